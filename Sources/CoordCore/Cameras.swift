/// A format a camera can deliver, as a V4L2 device enumerates it; or, with `sizeRange`, every size in ranges (a
/// GenICam camera's Width and Height, CONTRACT §12), `width`×`height` being the largest.
public struct CameraFormat: Equatable, Sendable {
    public var pixelFormat: String
    public var width: Int
    public var height: Int
    public var minFramePeriodMicroseconds: Int64
    public var maxFramePeriodMicroseconds: Int64
    /// The sizes up to `width`×`height` the camera takes too; nil: only `width`×`height`.
    public var sizeRange: SizeRange?

    public init(pixelFormat: String, width: Int, height: Int, minFramePeriodMicroseconds: Int64, maxFramePeriodMicroseconds: Int64,
                sizeRange: SizeRange? = nil) {
        self.pixelFormat = pixelFormat; self.width = width; self.height = height
        self.minFramePeriodMicroseconds = minFramePeriodMicroseconds; self.maxFramePeriodMicroseconds = maxFramePeriodMicroseconds
        self.sizeRange = sizeRange
    }

    /// Whether the format delivers `width`×`height`: its own size, or any size its range holds.
    public func offers(width: Int, height: Int) -> Bool {
        if width == self.width && height == self.height { return true }
        guard let sizeRange else { return false }
        return width <= self.width && height <= self.height && sizeRange.holds(width: width, height: height)
    }

    /// Every width from `minWidth` up in steps of `widthStep` (height likewise), as GenICam's Width and Height
    /// features take them (value = min + k × increment).
    public struct SizeRange: Equatable, Sendable {
        public var minWidth: Int, minHeight: Int
        public var widthStep: Int, heightStep: Int

        public init(minWidth: Int, minHeight: Int, widthStep: Int, heightStep: Int) {
            self.minWidth = minWidth; self.minHeight = minHeight
            self.widthStep = max(widthStep, 1); self.heightStep = max(heightStep, 1)
        }

        /// On the steps from the minimum (the upper bound is the format's size).
        public func holds(width: Int, height: Int) -> Bool {
            width >= minWidth && height >= minHeight && (width - minWidth) % widthStep == 0 && (height - minHeight) % heightStep == 0
        }
    }

    /// "width 1…2048 (step 1), height 1…2048 (step 1)" for a range format, "640x480" for one size.
    public var sizeText: String {
        guard let r = sizeRange else { return "\(width)x\(height)" }
        return "width \(r.minWidth)…\(width) (step \(r.widthStep)), height \(r.minHeight)…\(height) (step \(r.heightStep))"
    }
}

/// What a node says about one of its cameras in the handshake.
public struct CameraCapabilities: Equatable, Sendable {
    public var name: String
    public var source: String
    public var device: String
    public var formats: [CameraFormat]
    public var codecs: [VideoCodec]
    /// The id of the `Bus` its stream crosses (shared with the node's other cameras on it); empty: none shared.
    public var bus: String
    /// What the USB host controller reserves for its isochronous stream, bytes/s, as the node expects it (the
    /// largest alternate setting: UsbIsoStream.reservedBytesPerSecond); 0: not an isochronous USB camera.
    public var usbReservedBytesPerSecond: Double = 0
    /// The node's trigger output that exposes this camera, and what limits the rate it can follow (nil: free-running).
    public var trigger: Triggered?
    public struct Triggered: Equatable, Sendable {
        public var output: String
        public var readoutMicroseconds: Int64
        public var maximumFrameRate: Double?
        public init(output: String, readoutMicroseconds: Int64 = 0, maximumFrameRate: Double? = nil) {
            self.output = output; self.readoutMicroseconds = readoutMicroseconds; self.maximumFrameRate = maximumFrameRate
        }
    }

    public init(name: String, source: String, device: String = "", formats: [CameraFormat], codecs: [VideoCodec], bus: String = "") {
        self.name = name; self.source = source; self.device = device; self.formats = formats; self.codecs = codecs; self.bus = bus
    }
}

/// What the coordinator asks one camera to record.
public struct CameraSettings: Equatable, Sendable {
    public var camera: String
    public var ordinal: Int
    public var width: Int
    public var height: Int
    public var fps: Int
    public var codec: VideoCodec
    /// A frame-rate cap: the camera records one group in this many (its sensor runs at fps / recordEvery) and
    /// the groups between repeat its previous frame, so its file stays aligned with the rig's frame for frame.
    public var recordEvery: Int = 1
    /// Picture controls to set as the camera opens (the rig file's `controls:`); empty: as they are.
    public var controls = CameraControls()
    /// The exact rate when it is not an integer (30000/1001; `fps` is then its whole rate, 30); nil: `fps`.
    public var rationalRate: FrameRate?

    /// The camera's frame rate (CONTRACT §13).
    public var rate: FrameRate { rationalRate ?? FrameRate(numerator: fps, denominator: 1) ?? FrameRate(1) }

    /// Sets the rate: `fps` its whole rate, `rationalRate` the rational when it is not an integer.
    public mutating func setRate(_ rate: FrameRate) {
        fps = rate.nominal
        rationalRate = rate.isInteger ? nil : rate
    }

    public init(camera: String, ordinal: Int, width: Int, height: Int, fps: Int, codec: VideoCodec, recordEvery: Int = 1,
                controls: CameraControls = CameraControls()) {
        self.camera = camera; self.ordinal = ordinal; self.width = width; self.height = height; self.fps = fps; self.codec = codec
        self.recordEvery = recordEvery
        self.controls = controls
    }

    /// The rate the camera actually captures at (fps / recordEvery).
    public var capturedFPS: Double { (rationalRate?.value ?? Double(fps)) / Double(max(recordEvery, 1)) }

    /// Why these settings cannot run on a camera with `capabilities`, as one sentence; nil if they can.
    public func problem(on node: String, with capabilities: CameraCapabilities?) -> String? {
        guard let capabilities else { return "node \(node) has no camera named \"\(camera)\"." }
        guard (0...255).contains(ordinal) else { return "camera \(node)/\(camera): ordinal \(ordinal) is outside 0…255." }
        guard fps > 0 else { return "camera \(node)/\(camera): frame rate \(fps) must be positive." }
        guard (1...fps).contains(recordEvery) else {
            return "camera \(node)/\(camera): record_every \(recordEvery) must be between 1 and the frame rate \(fps)."
        }
        guard width > 0, height > 0, width % 2 == 0, height % 2 == 0, width >= 104, height >= 64 else {
            return "camera \(node)/\(camera): size \(width)x\(height) must be even and at least 104x64."
        }
        guard capabilities.codecs.contains(codec) else {
            return "camera \(node)/\(camera) cannot record codec \"\(codec.rawValue)\" (it offers \(capabilities.codecs.map(\.rawValue).joined(separator: ", ")))."
        }
        let period = rate.periodMicroseconds * Int64(recordEvery)
        let sized = capabilities.formats.filter { $0.offers(width: width, height: height) }
        guard !sized.isEmpty else {
            let named = capabilities.device.isEmpty ? "" : " (\(capabilities.device))"
            if let ranged = capabilities.formats.first(where: { $0.sizeRange != nil }) {
                return "camera \(node)/\(camera)\(named) cannot be \(width)x\(height): it takes \(ranged.sizeText)."
            }
            let sizes = capabilities.formats.map { "\($0.width)x\($0.height)" }
            return "camera \(node)/\(camera) has no \(width)x\(height) format (it offers \(Array(Set(sizes)).sorted().joined(separator: ", ")))."
        }
        guard sized.contains(where: { period >= $0.minFramePeriodMicroseconds && period <= $0.maxFramePeriodMicroseconds }) else {
            let fastest = sized.map(\.minFramePeriodMicroseconds).min()!
            // The highest whole rate whose rounded grid period the sensor still allows (1e6 / 16 667 µs is 59.998,
            // yet 60 fps, period 16 667 µs, runs).
            var fastestFPS = Int(1_000_000 / max(fastest, 1)) + 1
            while fastestFPS > 1 && FrameGrid.period(fps: fastestFPS) < fastest { fastestFPS -= 1 }
            return "camera \(node)/\(camera) cannot run \(width)x\(height) at \(rate) fps (its fastest is \(fastestFPS) fps)."
        }
        return nil
    }
}
