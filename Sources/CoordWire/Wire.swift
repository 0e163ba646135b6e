// Conversions between the generated protobuf types (coord.v1) and the core's own types. Nothing outside
// the services' edges sees a generated type.
import CoordCore
import Foundation
import SwiftProtobuf

public typealias Envelope = Coord_V1_Envelope

public enum Wire {
    /// The protocol version this build speaks.
    public static let protocolVersion: UInt32 = UInt32(Coord_V1_ProtocolVersion.current.rawValue)
    /// Largest request a node accepts; bigger ones get TOO_LARGE.
    public static let maxRequestBytes = 1 << 20
    /// Largest chunk a FetchChunk may ask for.
    public static let maxChunkBytes: UInt32 = 4 << 20

    public static func envelope(_ requestID: UInt64, _ body: Envelope.OneOf_Body) -> Envelope {
        var e = Envelope()
        e.protocolVersion = protocolVersion
        e.requestID = requestID
        e.body = body
        return e
    }

    public static func encode(_ envelope: Envelope) -> [UInt8] {
        // Serializing a fully-populated message cannot fail; a failure would be a programming error.
        (try? envelope.serializedBytes()) ?? []
    }

    /// Parses one message, or says in a sentence why it is not a coord.v1 Envelope of our version. The
    /// request id is returned with a version failure, so the refusal can still be matched by the peer.
    public static func decode(_ bytes: [UInt8]) throws(NodeFailure) -> Envelope {
        let envelope = try parse(bytes)
        try checkVersion(envelope)
        return envelope
    }

    /// Parses one message without judging its version.
    public static func parse(_ bytes: [UInt8]) throws(NodeFailure) -> Envelope {
        if bytes.count > maxRequestBytes {
            throw NodeFailure(.tooLarge, "message of \(bytes.count) bytes exceeds the limit of \(maxRequestBytes) bytes.")
        }
        let envelope: Envelope
        do {
            envelope = try Envelope(serializedBytes: bytes)
        } catch {
            throw NodeFailure(.malformed, "message of \(bytes.count) bytes is not a coord.v1 Envelope (\(error)).")
        }
        return envelope
    }

    public static func checkVersion(_ envelope: Envelope) throws(NodeFailure) {
        if envelope.protocolVersion != protocolVersion {
            throw NodeFailure(.versionMismatch,
                              "peer speaks coord protocol version \(envelope.protocolVersion), this program speaks version \(protocolVersion).")
        }
    }

    /// Refuses a request whose take id, camera or file path is not a CONTRACT §4 name before it reaches the
    /// node: a take id becomes a directory name, so "..", "/" or an empty one must never get that far.
    public static func checkNames(_ envelope: Envelope) throws(NodeFailure) {
        func take(_ id: String) throws(NodeFailure) {
            guard RigName.isValid(id) else {
                throw NodeFailure(.badConfig, "take id \"\(Echo.short(id))\" is not allowed: a take id is 1 to 64 of A-Z a-z 0-9 . _ - and not . or ..")
            }
        }
        func camera(_ name: String) throws(NodeFailure) {
            if let problem = RigName.problem(with: Echo.short(name), kind: "camera"), !RigName.isValid(name) {
                throw NodeFailure(.badConfig, problem + ".")
            }
        }
        func path(_ path: String, in takeID: String) throws(NodeFailure) {
            let parts = path.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 2, parts.allSatisfy({ RigName.isValid(String($0)) }) else {
                throw NodeFailure(.notFound, "no file \"\(Echo.short(path))\" in take \(takeID): paths are <node>/<file>.")
            }
        }
        switch envelope.body {
        case .configure(let m):
            try take(m.takeID)
            for c in m.cameras { try camera(c.camera) }
        case .arm(let m): try take(m.takeID)
        case .clockUpdate(let m): try take(m.takeID)
        case .startAt(let m): try take(m.takeID)
        case .adjustCamera(let m):
            try take(m.takeID)
            try camera(m.camera)
        case .stopAt(let m): try take(m.takeID)
        case .setControls(let m): try camera(m.camera)
        case .startPreview(let m): for c in m.cameras { try camera(c.camera) }
        case .abort(let m): try take(m.takeID)
        case .keepStills(let m): try take(m.shotID)
        case .listFiles(let m): try take(m.takeID)
        case .fetchChunk(let m):
            try take(m.takeID)
            try path(m.path, in: m.takeID)
        case .confirmCollected(let m):
            try take(m.takeID)
            for f in m.files { try path(f.path, in: m.takeID) }
        default: break
        }
    }

    public static func error(_ requestID: UInt64, _ failure: NodeFailure) -> Envelope {
        var e = Coord_V1_Error()
        e.code = failure.code.wire
        e.message = failure.message
        return envelope(requestID, .error(e))
    }
}

extension NodeFailure.Code {
    public var wire: Coord_V1_Error.Code {
        switch self {
        case .malformed: return .malformed
        case .unknownMessage: return .unknownMessage
        case .versionMismatch: return .versionMismatch
        case .tooLarge: return .tooLarge
        case .badState: return .badState
        case .badConfig: return .badConfig
        case .notFound: return .notFound
        case .io: return .io
        case .internal: return .internal
        }
    }

    public init(wire: Coord_V1_Error.Code) {
        switch wire {
        case .malformed: self = .malformed
        case .unknownMessage: self = .unknownMessage
        case .versionMismatch: self = .versionMismatch
        case .tooLarge: self = .tooLarge
        case .badState: self = .badState
        case .badConfig: self = .badConfig
        case .notFound: self = .notFound
        case .io: self = .io
        default: self = .internal
        }
    }
}

extension NodeFailure {
    public init(wire: Coord_V1_Error) {
        self.init(Code(wire: wire.code), wire.message)
    }
}

extension CameraFormat {
    public init(wire: Coord_V1_CameraFormat) {
        self.init(pixelFormat: wire.pixelFormat, width: Int(wire.width), height: Int(wire.height),
                  minFramePeriodMicroseconds: Int64(clamping: wire.minFramePeriodUs), maxFramePeriodMicroseconds: Int64(clamping: wire.maxFramePeriodUs),
                  sizeRange: wire.widthStep == 0 ? nil
                    : SizeRange(minWidth: Int(wire.minWidth), minHeight: Int(wire.minHeight), widthStep: Int(wire.widthStep), heightStep: Int(wire.heightStep)))
    }

    public var wire: Coord_V1_CameraFormat {
        var w = Coord_V1_CameraFormat()
        w.pixelFormat = pixelFormat
        w.width = UInt32(clamping: width)
        w.height = UInt32(clamping: height)
        w.minFramePeriodUs = UInt64(clamping: minFramePeriodMicroseconds)
        w.maxFramePeriodUs = UInt64(clamping: maxFramePeriodMicroseconds)
        if let sizeRange {
            w.minWidth = UInt32(clamping: sizeRange.minWidth)
            w.minHeight = UInt32(clamping: sizeRange.minHeight)
            w.widthStep = UInt32(clamping: sizeRange.widthStep)
            w.heightStep = UInt32(clamping: sizeRange.heightStep)
        }
        return w
    }
}

extension CameraCapabilities {
    public init(wire: Coord_V1_CameraInfo) {
        self.init(name: wire.name, source: wire.source, device: wire.device, formats: wire.formats.map(CameraFormat.init(wire:)),
                  // A codec this build does not know is one it cannot be asked for: left out, as before.
                  codecs: wire.codecs.compactMap(VideoCodec.init(rawValue:)), bus: wire.bus)
        usbReservedBytesPerSecond = wire.usbReservedBytesPerS
        if wire.hasTrigger {
            let t = wire.trigger
            // Out-of-range figures are dropped rather than trusted: the check then uses what is left.
            trigger = Triggered(output: t.output, readoutMicroseconds: t.readoutUs <= 1_000_000 ? Int64(t.readoutUs) : 0,
                                maximumFrameRate: t.maxFrameRate.isFinite && t.maxFrameRate > 0 ? t.maxFrameRate : nil)
        }
    }

    public var wire: Coord_V1_CameraInfo {
        var w = Coord_V1_CameraInfo()
        w.name = name
        w.source = source
        w.device = device
        w.formats = formats.map(\.wire)
        w.codecs = codecs.map(\.rawValue)
        w.bus = bus
        w.usbReservedBytesPerS = usbReservedBytesPerSecond
        if let trigger {
            w.trigger = .with {
                $0.output = trigger.output
                $0.readoutUs = UInt64(max(0, trigger.readoutMicroseconds))
                $0.maxFrameRate = trigger.maximumFrameRate ?? 0
            }
        }
        return w
    }
}

extension Coord_V1_SourceDevice {
    /// A camera's device as Armed sends it (absent fields as empty strings).
    public init(camera: String, _ identity: DeviceIdentity) {
        self.init()
        source = camera
        driver = identity.driver
        card = identity.card ?? ""
        busInfo = identity.busInfo ?? ""
        `protocol` = identity.transport ?? ""
        vendor = identity.vendor ?? ""
        model = identity.model ?? ""
        serial = identity.serial ?? ""
        pipeline = identity.pipeline ?? ""
        cameraID = identity.cameraID ?? ""
        if let t = identity.timestamp {
            timestampStamp = t.stamp.rawValue
            timestampMarks = t.marks.rawValue
            timestampLateUs = t.lateMicroseconds
            timestampUncertaintyUs = t.uncertaintyMicroseconds
        }
        uvcHwtimestamps = Int32(clamping: identity.timestamp?.hwTimestamps ?? -1)
    }

    /// A microphone's device: its card's name.
    public init(microphone: String, card: String) {
        self.init()
        source = microphone
        self.microphone = true
        self.card = card
    }
}

extension CameraSettings {
    /// The settings a Configure or StartPreview carries; a codec this build does not know is one sentence naming it.
    public init(wire: Coord_V1_CameraConfig) throws(NodeFailure) {
        guard let codec = VideoCodec(rawValue: wire.codec) else {
            throw NodeFailure(.badConfig, "camera \(wire.camera): unknown codec \"\(wire.codec)\" (a node records \(VideoCodec.spelled)).")
        }
        self.init(camera: wire.camera, ordinal: Int(wire.ordinal), width: Int(wire.width), height: Int(wire.height),
                  fps: Int(wire.fps), codec: codec, recordEvery: max(1, Int(wire.recordEvery)),
                  controls: wire.hasControls ? CameraControls(wire: wire.controls) : CameraControls())
        if let rate = try Wire.rationalRate(num: wire.fpsNum, den: wire.fpsDen, period: nil, "camera \(wire.camera): fps_num/fps_den") {
            setRate(rate)
        }
    }

    public var wire: Coord_V1_CameraConfig {
        var w = Coord_V1_CameraConfig()
        w.camera = camera
        w.ordinal = UInt32(clamping: ordinal)
        w.width = UInt32(clamping: width)
        w.height = UInt32(clamping: height)
        w.fps = UInt32(clamping: fps)
        (w.fpsNum, w.fpsDen) = Wire.rateFields(rationalRate)
        w.codec = codec.rawValue
        w.recordEvery = UInt32(clamping: recordEvery)
        if !controls.isEmpty { w.controls = controls.wire }
        return w
    }
}

extension ClockMapping {
    public init(wire: Coord_V1_ClockMapping) {
        self.init(offsetMicroseconds: Double(wire.offsetUs), ratePPM: wire.ratePpm, referenceLocal: wire.refLocalUs,
                  uncertaintyMicroseconds: wire.uncertaintyUs)
    }

    public var wire: Coord_V1_ClockMapping {
        var w = Coord_V1_ClockMapping()
        w.offsetUs = Saturating.int64(offsetMicroseconds)
        w.ratePpm = ratePPM
        w.refLocalUs = referenceLocal
        w.uncertaintyUs = uncertaintyMicroseconds
        return w
    }
}

extension TakeManifest.File {
    public init(wire: Coord_V1_FileInfo) {
        self.init(path: wire.path, bytes: wire.bytes, sha256: wire.sha256, xxh128: wire.xxh128)
    }

    public var wire: Coord_V1_FileInfo {
        var w = Coord_V1_FileInfo()
        w.path = path
        w.bytes = bytes
        w.sha256 = sha256
        w.xxh128 = xxh128
        return w
    }
}

extension NodeResources {
    public init(wire: Coord_V1_NodeResources) {
        self.init(buses: wire.buses.map { Bus(id: $0.id, kind: $0.kind, bandwidthBytesPerSecond: $0.bandwidthBytesPerS) },
                  calibration: wire.hasCalibration ? Calibration(wire: wire.calibration) : nil,
                  freeDiskBytes: wire.freeDiskBytes, diskTotalBytes: wire.diskTotalBytes, diskID: wire.diskID,
                  cpuCount: Int(max(1, wire.cpuCount)), cpuLoad: wire.cpuLoad,
                  thermalZones: wire.thermalZones.map {
                      ThermalZone(name: $0.name, celsius: $0.celsius, passiveCelsius: $0.passiveCelsius > 0 ? $0.passiveCelsius : nil,
                                  criticalCelsius: $0.criticalCelsius > 0 ? $0.criticalCelsius : nil)
                  },
                  hostID: wire.hostID)
    }

    public var wire: Coord_V1_NodeResources {
        var w = Coord_V1_NodeResources()
        w.buses = buses.map { bus in
            var b = Coord_V1_Bus()
            b.id = bus.id
            b.kind = bus.kind
            b.bandwidthBytesPerS = bus.bandwidthBytesPerSecond
            return b
        }
        if let calibration { w.calibration = calibration.wire }
        w.freeDiskBytes = freeDiskBytes
        w.diskTotalBytes = diskTotalBytes
        w.diskID = diskID
        w.cpuCount = UInt32(clamping: cpuCount)
        w.cpuLoad = cpuLoad
        w.thermalZones = thermalZones.map { zone in
            var z = Coord_V1_ThermalZone()
            z.name = zone.name
            z.celsius = zone.celsius
            z.passiveCelsius = zone.passiveCelsius ?? 0
            z.criticalCelsius = zone.criticalCelsius ?? 0
            return z
        }
        w.hostID = hostID
        return w
    }
}

extension Calibration {
    public init(wire: Coord_V1_Calibration) {
        self.init(diskWriteBytesPerSecond: wire.diskWriteBytesPerS,
                  encode: Dictionary(wire.encode.map { ($0.codec, CodecRate(pixelsPerSecond: $0.pixelsPerS, bytesPerPixel: $0.bytesPerPixel)) },
                                     uniquingKeysWith: { a, _ in a }),
                  heatingCelsiusPerSecond: wire.heatingCPerS > 0 ? wire.heatingCPerS : nil,
                  cpuCount: Int(wire.cpuCount), measuredAt: wire.measuredAt)
    }

    public var wire: Coord_V1_Calibration {
        var w = Coord_V1_Calibration()
        w.diskWriteBytesPerS = diskWriteBytesPerSecond
        w.encode = encode.keys.sorted().map { codec in
            var r = Coord_V1_CodecRate()
            r.codec = codec
            r.pixelsPerS = encode[codec]!.pixelsPerSecond
            r.bytesPerPixel = encode[codec]!.bytesPerPixel
            return r
        }
        w.heatingCPerS = heatingCelsiusPerSecond ?? 0
        w.cpuCount = UInt32(clamping: cpuCount)
        w.measuredAt = measuredAt
        return w
    }
}

extension NodeStatus {
    /// A node's Status reply as the coordinator keeps it.
    public init(wire: Coord_V1_Status) {
        let state: TakeConductor.NodeState
        switch wire.state {
        case .configured: state = .configured
        case .armed: state = .armed
        case .recording: state = .recording
        case .finished: state = .finished
        case .failed: state = .failed
        case .idle, .unspecified, .UNRECOGNIZED: state = .idle
        }
        self.init(node: wire.node, state: state, takeID: wire.takeID, cameras: wire.cameras.map { c in
            var camera = NodeStatus.Camera(camera: c.camera)
            camera.frames = Int64(clamping: c.frames)
            camera.dropped = Int64(clamping: c.dropped)
            camera.lastGroup = c.lastGroup
            camera.finished = c.finished
            camera.error = c.error
            camera.timestampNoiseMicroseconds = c.timestampNoiseUs.isFinite ? c.timestampNoiseUs : 0
            camera.centerUncertaintyMicroseconds = c.centerUncertaintyUs.isFinite ? c.centerUncertaintyUs : 0
            camera.phaseRestarts = Int(c.phaseRestarts)
            camera.held = Int64(clamping: c.held)
            camera.recordEvery = max(1, Int(c.recordEvery))
            camera.disabled = c.disabled
            camera.bytesWritten = c.bytesWritten
            if c.hasTrigger {
                let t = c.trigger
                camera.trigger = TriggerFigures(output: t.output, source: t.source, pulses: Int64(clamping: t.pulses),
                                                error: TriggerTiming(p50: t.errorP50Us, p99: t.errorP99Us, max: t.errorMaxUs))
                camera.extraFrames = Int64(clamping: t.extraFrames)
            }
            return camera
        })
        detail = wire.detail
        for c in wire.controls where RigName.isValid(c.camera) && controls[c.camera] == nil {
            controls[c.camera] = CameraControls(wire: c.controls)
        }
        // A node's figures are kept only when they are numbers in range: the manifest must stay valid JSON.
        func finite(_ x: Double, _ limit: Double) -> Double { x.isFinite ? min(max(x, -limit), limit) : 0 }
        mics = wire.mics.filter { RigName.isValid($0.mic) }.map { m in
            var mic = NodeStatus.Mic(mic: m.mic)
            mic.frames = Int64(clamping: m.frames)
            mic.sampleRate = Int(m.sampleRate)
            mic.channels = Int(m.channels)
            mic.startMicroseconds = min(max(m.startUs, Wire.timeRange.lowerBound), Wire.timeRange.upperBound)
            mic.offsetP50Microseconds = finite(m.avOffsetP50Us, 1e9)
            mic.offsetP99Microseconds = finite(m.avOffsetP99Us, 1e9)
            mic.rateErrorPPM = finite(m.rateErrorPpm, 1e6)
            mic.finished = m.finished
            mic.error = m.error
            mic.levelDBFS = finite(m.levelDbfs, 200)
            mic.bytesWritten = m.bytesWritten
            return mic
        }
        pressure = PressureLevel(rawValue: Int(wire.pressure.rawValue))
        pressureCause = wire.pressureCause
        clockUncertaintyMicroseconds = wire.clockUncertaintyUs.isFinite && wire.clockUncertaintyUs > 0 ? min(wire.clockUncertaintyUs, 1e9) : nil
        // A node's own event keeps its kind as the node named it (a newer node's kind is kept as it is).
        events = wire.events.map { TakeEvent(TakeEvent.Kind(rawValue: $0.kind), at: $0.tUs, node: wire.node, camera: $0.camera, $0.detail) }
        // A node's numbers are checked as a request's are: a grid the core's arithmetic could overflow on is none.
        if Wire.periodRange.contains(wire.framePeriodUs), Wire.timeRange.contains(wire.t0Us) {
            grid = FrameGrid(t0: wire.t0Us, periodMicroseconds: Int64(wire.framePeriodUs))
            grid?.rationalRate = try? Wire.rationalRate(num: wire.fpsNum, den: wire.fpsDen, period: wire.framePeriodUs, "Status.fps_num")
        }
        rigNowMicroseconds = min(max(wire.rigNowUs, Wire.timeRange.lowerBound), Wire.timeRange.upperBound)
        stopGroup = Wire.groupRange.contains(wire.stopGroup) ? wire.stopGroup : 0
    }
}

extension TakeEvent {
    /// As a node reports its own event in Status (the node is the status's sender).
    public var wire: Coord_V1_NodeEvent {
        var e = Coord_V1_NodeEvent()
        e.tUs = tMicroseconds
        e.camera = camera
        e.kind = kind.rawValue
        e.detail = detail
        return e
    }
}

extension CameraControls {
    public init(wire: Coord_V1_ControlValues) {
        self.init(exposureMicroseconds: wire.hasExposureUs ? Int(clamping: wire.exposureUs) : nil,
                  gainDecibels: wire.hasGainDb ? wire.gainDb : nil,
                  whiteBalanceKelvin: wire.hasWhiteBalanceK ? Int(wire.whiteBalanceK) : nil,
                  focus: wire.hasFocus ? wire.focus : nil)
    }

    public var wire: Coord_V1_ControlValues {
        var w = Coord_V1_ControlValues()
        if let exposureMicroseconds { w.exposureUs = Int64(exposureMicroseconds) }
        if let gainDecibels { w.gainDb = gainDecibels }
        if let whiteBalanceKelvin { w.whiteBalanceK = Int32(clamping: whiteBalanceKelvin) }
        if let focus { w.focus = focus }
        return w
    }
}
