// What the host controller reserves for a USB webcam's isochronous stream, as uvcvideo asks for it: not the
// stream's data rate but one alternate setting's whole packet every service interval (issue 36 item 4).
//
// Read in Debian's linux-source-6.1 (6.1.192), drivers/media/usb/uvc/uvc_video.c: uvc_video_start_transfer takes
// the device's dwMaxPayloadTransferSize (its probe/commit answer) and picks, over the streaming interface's
// alternate settings, the one whose uvc_endpoint_max_bpi (wMaxPacketSize × its high-bandwidth multiplier, or a
// SuperSpeed companion's wBytesPerInterval) is the smallest at least that size; usb_set_interface and the first
// URBs then claim that packet every interval from the controller's periodic schedule, or fail with ENOSPC.

/// The link speed of a USB device, from sysfs `speed` (Mbit/s).
public enum UsbSpeed: String, Equatable, Sendable {
    case low, full, high, superSpeed = "super", superPlus = "super-plus"

    public init?(megabitsPerSecond: Double) {
        switch megabitsPerSecond {
        case 1.5: self = .low
        case 12: self = .full
        case 480: self = .high
        case 5000: self = .superSpeed
        case 10_000, 20_000: self = .superPlus
        default: return nil
        }
    }

    /// High speed and faster count intervals in 125 µs microframes, full and low speed in 1 ms frames.
    var frameSeconds: Double { self == .low || self == .full ? 1e-3 : 125e-6 }

    /// What the bus lets periodic (isochronous and interrupt) transfers reserve, bytes per second: USB 2.0 §5.6.4
    /// allows 90 % of a full-speed frame (1500 B) and 80 % of a high-speed microframe (7500 B); SuperSpeed's
    /// 90 % is taken of the link after 8b/10b (5 Gbit/s → 500 MB/s) or 128b/132b coding.
    public var periodicBytesPerSecond: Double {
        switch self {
        case .low: return 0.9 * 1.5e6 / 8
        case .full: return 0.9 * 12e6 / 8
        case .high: return 0.8 * 480e6 / 8
        case .superSpeed: return 0.9 * 500e6
        case .superPlus: return 0.9 * 10e9 * 128 / 132 / 8
        }
    }
}

/// One alternate setting of a streaming interface with its isochronous IN endpoint, as the descriptors give it.
public struct UsbIsoAltSetting: Equatable, Sendable {
    public var alternateSetting: Int
    public var endpointAddress: Int
    /// The raw wMaxPacketSize: bits 0-10 the packet, bits 11-12 the extra transactions per microframe.
    public var wMaxPacketSize: Int
    public var bInterval: Int
    /// A SuperSpeed endpoint companion's wBytesPerInterval; nil below SuperSpeed.
    public var bytesPerIntervalSS: Int?

    public init(alternateSetting: Int, endpointAddress: Int, wMaxPacketSize: Int, bInterval: Int, bytesPerIntervalSS: Int? = nil) {
        self.alternateSetting = alternateSetting; self.endpointAddress = endpointAddress
        self.wMaxPacketSize = wMaxPacketSize; self.bInterval = bInterval; self.bytesPerIntervalSS = bytesPerIntervalSS
    }

    /// uvc_endpoint_max_bpi: the bytes the endpoint may move per service interval.
    public func bytesPerInterval(_ speed: UsbSpeed) -> Int {
        switch speed {
        case .superSpeed, .superPlus: return bytesPerIntervalSS ?? 0
        case .high: return (wMaxPacketSize & 0x7ff) * (((wMaxPacketSize >> 11) & 3) + 1)
        case .full, .low: return wMaxPacketSize & 0x7ff
        }
    }

    /// The service interval: 2^(bInterval−1) (micro)frames for an isochronous endpoint (USB 2.0 table 9-13).
    public func intervalSeconds(_ speed: UsbSpeed) -> Double {
        let exponent = min(max(bInterval, 1), 16) - 1
        return speed.frameSeconds * Double(1 << exponent)
    }

    /// What reserving this setting takes from the bus's periodic schedule.
    public func bytesPerSecond(_ speed: UsbSpeed) -> Double {
        Double(bytesPerInterval(speed)) / intervalSeconds(speed)
    }
}

/// A UVC camera's streaming interface: its speed and isochronous alternate settings.
public struct UsbIsoStream: Equatable, Sendable {
    public var speed: UsbSpeed
    public var altSettings: [UsbIsoAltSetting]

    public init(speed: UsbSpeed, altSettings: [UsbIsoAltSetting]) {
        self.speed = speed; self.altSettings = altSettings
    }

    /// uvcvideo's choice for a device asking `payload` bytes per interval (its dwMaxPayloadTransferSize; 0 counts
    /// as 1): the smallest packet at least that large, the later of equals; nil ("No fast enough alt setting",
    /// EIO) when none is.
    public func uvcChoice(payload: Int) -> UsbIsoAltSetting? {
        let asked = max(payload, 1)
        var best: UsbIsoAltSetting?
        for alt in altSettings where alt.bytesPerInterval(speed) >= asked {
            if best == nil || alt.bytesPerInterval(speed) <= best!.bytesPerInterval(speed) { best = alt }
        }
        return best
    }

    /// What the node expects the stream to reserve without knowing the payload the camera will ask: its largest
    /// alternate setting (a camera asks for it for raw formats, and a node cannot read the probe's answer).
    public var worstCase: UsbIsoAltSetting? {
        altSettings.filter { $0.bytesPerInterval(speed) > 0 }.max { $0.bytesPerSecond(speed) < $1.bytesPerSecond(speed) }
    }

    /// Bytes per second of the worst case; 0 without isochronous alternate settings (a bulk camera).
    public var reservedBytesPerSecond: Double { worstCase?.bytesPerSecond(speed) ?? 0 }
}
