import CoordCore
import Foundation
import Media

/// A GenICam device as discovery lists it (nothing opened).
public struct GenICamDevice: Equatable, Sendable {
    /// The id `--genicam NAME=DEVICE_ID` takes, e.g. `Aravis-Fake-GV01`.
    public var deviceID: String
    /// Aravis' protocol name: "GigEVision", "USB3Vision" (or "Fake").
    public var protocolName: String
    public var vendor: String
    public var model: String
    public var serial: String
    /// Its IP address (GigE Vision) or USB path.
    public var address: String

    public init(deviceID: String, protocolName: String, vendor: String, model: String, serial: String, address: String) {
        self.deviceID = deviceID; self.protocolName = protocolName; self.vendor = vendor; self.model = model
        self.serial = serial; self.address = address
    }
}

/// What an opened GenICam camera offers: its identity, pixel formats, size ranges and frame-rate range.
public struct GenICamDescription: Equatable, Sendable {
    public var identity: DeviceIdentity
    public var pixelFormats: [String]
    public var widthRange: ClosedRange<Int>
    public var heightRange: ClosedRange<Int>
    /// AcquisitionFrameRate's range, fps; nil when the camera has no rate control.
    public var frameRateRange: ClosedRange<Double>?
    public var controlRanges: ControlRanges
    /// The host's address on the link a GigE Vision camera is reached through; nil for USB3 Vision.
    public var hostAddress: String?

    public init(identity: DeviceIdentity, pixelFormats: [String], widthRange: ClosedRange<Int>, heightRange: ClosedRange<Int>,
                frameRateRange: ClosedRange<Double>?, controlRanges: ControlRanges, hostAddress: String? = nil) {
        self.identity = identity; self.pixelFormats = pixelFormats; self.widthRange = widthRange
        self.heightRange = heightRange; self.frameRateRange = frameRateRange; self.controlRanges = controlRanges
        self.hostAddress = hostAddress
    }

    /// The sizes a GenICam camera offers the planner: the common ones that fit its Width/Height ranges and its
    /// largest size (a GenICam camera takes any size in range, within its steps).
    static let commonSizes = [(320, 240), (640, 480), (800, 600), (1024, 768), (1280, 720), (1280, 1024), (1920, 1080),
                              (1920, 1200), (2048, 1536), (2448, 2048), (3840, 2160)]

    /// The recordable format coord would choose, nil when none.
    public var recordedFormat: GenICamPixelFormat? { GenICamPixelFormat.preferred(among: pixelFormats) }

    /// The handshake's formats: each size with the recorded pixel format and the rate range (empty: none recordable).
    public var handshakeFormats: [CameraFormat] {
        guard let format = recordedFormat, let rates = frameRateRange, rates.upperBound > 0 else { return [] }
        var sizes = Self.commonSizes.filter { widthRange.contains($0.0) && heightRange.contains($0.1) }
        let largest = (widthRange.upperBound & ~1, heightRange.upperBound & ~1)
        if !sizes.contains(where: { $0 == largest }) { sizes.append(largest) }
        let fastest = Int64((1e6 / rates.upperBound).rounded(.up))
        let slowest = rates.lowerBound > 0 ? Int64((1e6 / rates.lowerBound).rounded(.down)) : 10_000_000
        return sizes.map { CameraFormat(pixelFormat: format.rawValue, width: $0.0, height: $0.1,
                                        minFramePeriodMicroseconds: fastest, maxFramePeriodMicroseconds: max(fastest, slowest)) }
    }

    /// Why the camera cannot be recorded at all, or nil.
    public func formatProblem(deviceID: String) -> String? {
        if recordedFormat == nil {
            return "\(deviceID) offers no pixel format coord can record (it offers \(pixelFormats.joined(separator: ", ")); coord takes Mono8, Mono16, RGB8 or Bayer 8-bit)"
        }
        if frameRateRange == nil { return "\(deviceID) has no AcquisitionFrameRate feature, so coord cannot set its rate" }
        return nil
    }

    /// The block `--list-cameras` prints for this device.
    public func lines(device: GenICamDevice) -> [String] {
        var out = ["genicam \(device.deviceID)",
                   "  protocol: \(identity.transport ?? device.protocolName)\(device.address.isEmpty ? "" : " at \(device.address)")",
                   "  vendor: \(identity.vendor ?? device.vendor)", "  model: \(identity.model ?? device.model)",
                   "  serial: \(identity.serial ?? device.serial)",
                   "  size: \(widthRange.lowerBound)…\(widthRange.upperBound) x \(heightRange.lowerBound)…\(heightRange.upperBound)"]
        if let rates = frameRateRange {
            out.append("  frame rate: \(String(format: "%.3g", rates.lowerBound))…\(String(format: "%.4g", rates.upperBound)) fps")
        } else {
            out.append("  frame rate: not settable (no AcquisitionFrameRate)")
        }
        out.append("  formats:")
        let chosen = recordedFormat
        for name in pixelFormats {
            let usable = GenICamPixelFormat(name: name) != nil
            out.append("    \(name)\(GenICamPixelFormat(name: name) == chosen && chosen != nil ? " (recorded)" : usable ? "" : " — not recordable by coord")")
        }
        if pixelFormats.isEmpty { out.append("    none") }
        return out
    }
}
