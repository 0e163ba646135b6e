import CoordCore
import Foundation
import Capture

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
    /// Width's and Height's increments: a size is min + k × step (GenICam's Inc).
    public var widthStep: Int
    public var heightStep: Int
    /// AcquisitionFrameRate's range, fps; nil when the camera has no rate control.
    public var frameRateRange: ClosedRange<Double>?
    public var controlRanges: ControlRanges
    /// The host's address on the link a GigE Vision camera is reached through; nil for USB3 Vision.
    public var hostAddress: String?

    public init(identity: DeviceIdentity, pixelFormats: [String], widthRange: ClosedRange<Int>, heightRange: ClosedRange<Int>,
                widthStep: Int = 1, heightStep: Int = 1,
                frameRateRange: ClosedRange<Double>?, controlRanges: ControlRanges, hostAddress: String? = nil) {
        self.identity = identity; self.pixelFormats = pixelFormats; self.widthRange = widthRange
        self.heightRange = heightRange; self.widthStep = max(widthStep, 1); self.heightStep = max(heightStep, 1)
        self.frameRateRange = frameRateRange; self.controlRanges = controlRanges
        self.hostAddress = hostAddress
    }

    /// Width and Height as the planner takes them: any size from the minima up in the steps, to the largest on the
    /// steps.
    public var sizeRange: CameraFormat.SizeRange {
        CameraFormat.SizeRange(minWidth: widthRange.lowerBound, minHeight: heightRange.lowerBound, widthStep: widthStep, heightStep: heightStep)
    }

    /// The largest size on the steps, even where the steps allow one (coord records even sizes).
    public var largestSize: (width: Int, height: Int) {
        func largest(_ range: ClosedRange<Int>, _ step: Int) -> Int {
            let top = range.upperBound - (range.upperBound - range.lowerBound) % step
            return top % 2 != 0 && top - step >= range.lowerBound && (top - step) % 2 == 0 ? top - step : top
        }
        return (largest(widthRange, widthStep), largest(heightRange, heightStep))
    }

    /// Whether the camera takes `width`×`height` (inside its ranges, on its steps).
    public func takes(width: Int, height: Int) -> Bool {
        widthRange.contains(width) && heightRange.contains(height) && sizeRange.holds(width: width, height: height)
    }

    /// Why the camera cannot be `width`×`height`, one sentence naming it, the size and its ranges; nil when it can.
    public func sizeProblem(deviceID: String, width: Int, height: Int) -> String? {
        takes(width: width, height: height) ? nil : "\(deviceID) cannot be \(width)x\(height): it takes \(rangeText)"
    }

    /// "width 1…2048 (step 1), height 1…2048 (step 1)".
    public var rangeText: String {
        "width \(widthRange.lowerBound)…\(widthRange.upperBound) (step \(widthStep)), height \(heightRange.lowerBound)…\(heightRange.upperBound) (step \(heightStep))"
    }

    /// Sizes listed beside the range for what reads a size list (`coord discover`'s common take, the budget's
    /// smaller size): the common ones the camera takes and its largest.
    static let commonSizes = [(320, 240), (640, 480), (800, 600), (1024, 768), (1280, 720), (1280, 1024), (1920, 1080),
                              (1920, 1200), (2048, 1536), (2448, 2048), (3840, 2160)]

    /// The recordable format coord would choose, nil when none.
    public var recordedFormat: GenICamPixelFormat? { GenICamPixelFormat.preferred(among: pixelFormats) }

    /// The handshake's formats, each with the recorded pixel format and the rate range (empty: none recordable): the
    /// common sizes it takes, then its largest size carrying the whole range, so any size inside it plans.
    public var handshakeFormats: [CameraFormat] {
        guard let format = recordedFormat, let rates = frameRateRange, rates.upperBound > 0 else { return [] }
        let largest = largestSize
        let sizes = Self.commonSizes.filter { takes(width: $0.0, height: $0.1) && ($0.0, $0.1) != largest }
        let fastest = Int64((1e6 / rates.upperBound).rounded(.up))
        let slowest = rates.lowerBound > 0 ? Int64((1e6 / rates.lowerBound).rounded(.down)) : 10_000_000
        return sizes.map { CameraFormat(pixelFormat: format.rawValue, width: $0.0, height: $0.1,
                                        minFramePeriodMicroseconds: fastest, maxFramePeriodMicroseconds: max(fastest, slowest)) }
            + [CameraFormat(pixelFormat: format.rawValue, width: largest.width, height: largest.height,
                            minFramePeriodMicroseconds: fastest, maxFramePeriodMicroseconds: max(fastest, slowest), sizeRange: sizeRange)]
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
                   "  width: \(widthRange.lowerBound)…\(widthRange.upperBound), step \(widthStep)",
                   "  height: \(heightRange.lowerBound)…\(heightRange.upperBound), step \(heightStep)",
                   "  size: any width x height in these ranges and steps (coord records even sizes from 104x64)"]
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
