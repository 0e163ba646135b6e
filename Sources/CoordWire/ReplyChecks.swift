import CoordCore
import Foundation

/// A field of a node's reply the coordinator cannot act on: one sentence naming the node, the field and what is
/// wrong with it. The coordinator treats the reply as not given (the node's part of the take fails or is partial);
/// it never does arithmetic with the value.
public struct FieldFault: Error, Equatable, Sendable, CustomStringConvertible {
    /// How the sentence names the node: "node cam-a" or "node at tcp://…".
    public let node: String
    /// The field, as the protocol names it: "HelloReply.cameras[0].name".
    public let field: String
    public let sentence: String

    public init(node: String, field: String, _ problem: String) {
        self.node = node
        self.field = field
        sentence = Echo.capWords(in: "\(node) sent \(field) \(problem).")
    }

    public var description: String { sentence }
}

/// Every reply a node sends, checked at the coordinator's edge as the node checks every request (FieldChecks):
/// one entry point per reply kind, called by the coordinator, the console and `coord plan` alike, so a fuzzer
/// can call exactly what they call. `who` names the node in the sentence ("node cam-a", "node at tcp://…").
/// Ranges are those of the requests (`Wire.timeRange`, `Wire.groupRange`, …), so no value that passes can
/// overflow the core's arithmetic.
public enum NodeReply {
    /// A file's size: 0…2⁵⁰ bytes (a petabyte; a node refuses a FetchChunk offset beyond it).
    public static let fileBytesRange: ClosedRange<UInt64> = 0...(UInt64(1) << 50)
    /// A camera format's frame periods: 1 µs … 100 s.
    public static let formatPeriodRange: ClosedRange<UInt64> = 1...100_000_000
    /// Counts of frames, groups, samples: as many as a grid has groups.
    public static let countRange: ClosedRange<UInt64> = 0...UInt64(Wire.groupRange.upperBound)
    /// Free text a node sends (a version, a sentence, an event's detail): bytes kept at most.
    public static let maxTextBytes = 4_096
    /// Cameras, formats, files, events a reply may list.
    public static let maxCameras = 256
    public static let maxListed = 100_000

    // MARK: entry points

    /// The handshake's reply: its node name, every camera (unique valid names, formats with sizes and periods in
    /// range), microphones, and resources.
    public static func hello(_ m: Coord_V1_HelloReply, from who: String) throws(FieldFault) -> Coord_V1_HelloReply {
        let c = Checker(who)
        try c.name(m.node, "HelloReply.node", kind: "node")
        try c.text(m.agentVersion, "HelloReply.agent_version")
        try c.text(m.host, "HelloReply.host")
        try c.text(m.timeService, "HelloReply.time_service")
        try c.text(m.instanceID, "HelloReply.instance_id")
        try c.text(m.previewEndpoint, "HelloReply.preview_endpoint")
        try c.count(m.cameras.count, maxCameras, "HelloReply.cameras")
        var seen: [String: Int] = [:]
        for (i, camera) in m.cameras.enumerated() {
            let field = "HelloReply.cameras[\(i)]"
            try c.name(camera.name, "\(field).name", kind: "camera")
            if let first = seen[camera.name] {
                throw c.fault("\(field).name", "\"\(camera.name)\", the name of cameras[\(first)] too (two cameras would share one file)")
            }
            seen[camera.name] = i
            try c.text(camera.source, "\(field).source")
            try c.text(camera.device, "\(field).device")
            try c.text(camera.bus, "\(field).bus")
            try c.finite(camera.usbReservedBytesPerS, 0...1e12, "\(field).usb_reserved_bytes_per_s")
            try c.count(camera.codecs.count, 64, "\(field).codecs")
            for (j, codec) in camera.codecs.enumerated() { try c.text(codec, "\(field).codecs[\(j)]", limit: 64) }
            try c.count(camera.formats.count, maxListed, "\(field).formats")
            for (j, format) in camera.formats.enumerated() {
                let f = "\(field).formats[\(j)]"
                try c.text(format.pixelFormat, "\(f).pixel_format", limit: 64)
                try c.within(format.width, Wire.sizeRange, "\(f).width")
                try c.within(format.height, Wire.sizeRange, "\(f).height")
                try c.within(format.minFramePeriodUs, formatPeriodRange, "\(f).min_frame_period_us")
                try c.within(format.maxFramePeriodUs, format.minFramePeriodUs...formatPeriodRange.upperBound, "\(f).max_frame_period_us")
                // A size range (width_step set): its minima at most the size, its steps at most the largest size.
                if format.widthStep != 0 || format.heightStep != 0 || format.minWidth != 0 || format.minHeight != 0 {
                    try c.within(format.minWidth, 1...format.width, "\(f).min_width")
                    try c.within(format.minHeight, 1...format.height, "\(f).min_height")
                    try c.within(format.widthStep, 1...Wire.sizeRange.upperBound, "\(f).width_step")
                    try c.within(format.heightStep, 1...Wire.sizeRange.upperBound, "\(f).height_step")
                }
            }
        }
        var mics = Set<String>()
        for (i, mic) in m.mics.enumerated() {
            try c.name(mic, "HelloReply.mics[\(i)]", kind: "microphone")
            guard mics.insert(mic).inserted else { throw c.fault("HelloReply.mics[\(i)]", "\"\(mic)\" twice") }
        }
        if m.hasResources { try resources(m.resources, "HelloReply.resources", c) }
        return m
    }

    /// A Status reply as the coordinator keeps it: names, counts, times and figures in range.
    public static func status(_ m: Coord_V1_Status, from who: String) throws(FieldFault) -> NodeStatus {
        let c = Checker(who)
        try c.name(m.node, "Status.node", kind: "node")
        if !m.takeID.isEmpty { try c.name(m.takeID, "Status.take_id", kind: "take") }
        try c.text(m.detail, "Status.detail")
        try c.text(m.pressureCause, "Status.pressure_cause")
        try c.within(m.localNowUs, Wire.timeRange, "Status.local_now_us")
        try c.within(m.t0Us, Wire.timeRange, "Status.t0_us")
        if m.framePeriodUs != 0 { try c.within(m.framePeriodUs, Wire.periodRange, "Status.frame_period_us") }
        try c.within(m.rigNowUs, Wire.timeRange, "Status.rig_now_us")
        try c.within(m.stopGroup, Wire.groupRange, "Status.stop_group")
        try c.count(m.cameras.count, maxCameras, "Status.cameras")
        var seen = Set<String>()
        for (i, camera) in m.cameras.enumerated() {
            let f = "Status.cameras[\(i)]"
            try c.name(camera.camera, "\(f).camera", kind: "camera")
            guard seen.insert(camera.camera).inserted else { throw c.fault("\(f).camera", "\"\(camera.camera)\" twice") }
            try c.within(camera.frames, countRange, "\(f).frames")
            try c.within(camera.dropped, countRange, "\(f).dropped")
            try c.within(camera.held, countRange, "\(f).held")
            try c.within(camera.lastGroup, -1...Wire.groupRange.upperBound, "\(f).last_group")
            try c.text(camera.error, "\(f).error")
            // Its figures (noise, uncertainty, levels) are kept only when finite, in NodeStatus(wire:).
            try c.within(camera.recordEvery, Wire.recordEveryRange, "\(f).record_every")
            try c.within(camera.bytesWritten, fileBytesRange, "\(f).bytes_written")
            if camera.hasTrigger {
                let t = camera.trigger
                try c.name(t.output, "\(f).trigger.output", kind: "trigger output")
                try c.name(t.source, "\(f).trigger.source", kind: "trigger source")
                try c.within(t.pulses, countRange, "\(f).trigger.pulses")
                try c.within(t.extraFrames, countRange, "\(f).trigger.extra_frames")
                for (v, key) in [(t.errorP50Us, "p50"), (t.errorP99Us, "p99"), (t.errorMaxUs, "max")] {
                    try c.within(v, 0...Wire.timeRange.upperBound, "\(f).trigger.error_\(key)_us")
                }
            }
        }
        var mics = Set<String>()
        for (i, mic) in m.mics.enumerated() {
            let f = "Status.mics[\(i)]"
            try c.name(mic.mic, "\(f).mic", kind: "microphone")
            guard mics.insert(mic.mic).inserted else { throw c.fault("\(f).mic", "\"\(mic.mic)\" twice") }
            try c.within(mic.frames, countRange, "\(f).frames")
            try c.within(mic.sampleRate, 0...1_000_000, "\(f).sample_rate")
            try c.within(mic.channels, 0...256, "\(f).channels")
            try c.within(mic.startUs, Wire.timeRange, "\(f).start_us")
            try c.text(mic.error, "\(f).error")
            try c.within(mic.bytesWritten, fileBytesRange, "\(f).bytes_written")
        }
        try c.count(m.events.count, maxListed, "Status.events")
        for (i, event) in m.events.enumerated() {
            let f = "Status.events[\(i)]"
            try c.within(event.tUs, Wire.timeRange, "\(f).t_us")
            if !event.camera.isEmpty { try c.name(event.camera, "\(f).camera", kind: "camera") }
            try c.text(event.kind, "\(f).kind", limit: 64)
            try c.text(event.detail, "\(f).detail")
        }
        if m.hasResources { try resources(m.resources, "Status.resources", c) }
        try c.count(m.controls.count, maxCameras, "Status.controls")
        var controlled = Set<String>()
        for (i, camera) in m.controls.enumerated() {
            _ = try controls(camera, field: "Status.controls[\(i)]", c)
            guard controlled.insert(camera.camera).inserted else { throw c.fault("Status.controls[\(i)].camera", "\"\(camera.camera)\" twice") }
        }
        return NodeStatus(wire: m)
    }

    /// A FileList: of `takeID`, every path `<node>/<file>` in `node`'s own folder and listed once, sizes a node
    /// can serve, checksums of 64 lower-case hex digits.
    public static func fileList(_ m: Coord_V1_FileList, node: String, takeID: String, from who: String) throws(FieldFault) -> [TakeManifest.File] {
        let c = Checker(who)
        guard m.takeID == takeID else { throw c.fault("FileList.take_id", "\"\(Echo.short(m.takeID))\" in answer to a list of take \(takeID)") }
        try c.count(m.files.count, maxListed, "FileList.files")
        var seen: [String: Int] = [:]
        var files: [TakeManifest.File] = []
        for (i, file) in m.files.enumerated() {
            let f = "FileList.files[\(i)]"
            let parts = file.path.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 2, parts.allSatisfy({ RigName.isValid(String($0)) }), String(parts[0]) == node else {
                throw c.fault("\(f).path", "\"\(Echo.short(file.path))\", which is not a file in its own folder (\(node)/<file>, names of A-Z a-z 0-9 . _ -)")
            }
            if let first = seen[file.path] { throw c.fault("\(f).path", "\"\(file.path)\", listed already as files[\(first)]") }
            seen[file.path] = i
            try c.within(file.bytes, fileBytesRange, "\(f).bytes")
            guard file.sha256.utf8.count == 64, file.sha256.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else {
                throw c.fault("\(f).sha256", "\"\(Echo.short(file.sha256))\", which is not 64 lower-case hex digits")
            }
            // Empty from a node that predates it; else exactly what ASC MHL will carry.
            guard file.xxh128.isEmpty || (file.xxh128.utf8.count == 32 && file.xxh128.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })) else {
                throw c.fault("\(f).xxh128", "\"\(Echo.short(file.xxh128))\", which is not 32 lower-case hex digits")
            }
            files.append(TakeManifest.File(wire: file))
        }
        return files
    }

    /// A Chunk answering a FetchChunk of `length` bytes of `path` at `offset`: the bytes, never more than asked.
    public static func chunk(_ m: Coord_V1_Chunk, path: String, offset: UInt64, length: Int, from who: String) throws(FieldFault) -> Data {
        let c = Checker(who)
        guard m.path == path else { throw c.fault("Chunk.path", "\"\(Echo.short(m.path))\" in answer to a request for \(path)") }
        guard m.offset == offset else { throw c.fault("Chunk.offset", "\(m.offset) in answer to a request for \(path) at offset \(offset)") }
        guard m.data.count <= length else {
            throw c.fault("Chunk.data", "of \(m.data.count) bytes in answer to a request for \(length) bytes of \(path)")
        }
        return m.data
    }

    /// A ClockProbeReply as a sample: t1 echoed as sent, t2 and t3 clock readings with t3 ≥ t2, t4 when it arrived.
    /// `sent`: the t1 the probe carried, when the caller knows it.
    public static func clockProbe(_ m: Coord_V1_ClockProbeReply, sent: Int64? = nil, receivedAt t4: Int64, from who: String) throws(FieldFault) -> ClockProbeSample {
        let c = Checker(who)
        if let sent, m.t1Us != sent { throw c.fault("ClockProbeReply.t1_us", "\(m.t1Us), not the \(sent) the probe carried") }
        try c.within(m.t1Us, Wire.timeRange, "ClockProbeReply.t1_us")
        guard m.t1Us <= t4 else { throw c.fault("ClockProbeReply.t1_us", "\(m.t1Us), later than the reply arrived (\(t4))") }
        try c.within(m.t2Us, Wire.timeRange, "ClockProbeReply.t2_us")
        try c.within(m.t3Us, Wire.timeRange, "ClockProbeReply.t3_us")
        guard m.t3Us >= m.t2Us else { throw c.fault("ClockProbeReply.t3_us", "\(m.t3Us), earlier than its t2_us \(m.t2Us)") }
        return ClockProbeSample(t1: m.t1Us, t2: m.t2Us, t3: m.t3Us, t4: t4)
    }

    /// What an Armed reply tells the manifest: each camera's controls in force and each camera's and microphone's
    /// device (CONTRACT §11).
    public struct Armed: Sendable {
        public var controls: [(camera: String, controls: CameraControls)] = []
        /// By camera name.
        public var cameraDevices: [String: DeviceIdentity] = [:]
        /// By microphone name: the ALSA card's name, or "synthetic".
        public var micDevices: [String: String] = [:]
    }

    /// A device field's longest text: QUERYCAP's `card` and `bus_info` are 32 bytes, GenICam's strings at most 512.
    public static let maxDeviceTextBytes = 512

    /// An Armed reply of `takeID`: its cameras, warnings, each camera's controls in force, and each source's device
    /// (named once, a printable driver for a camera and a card for a microphone).
    public static func armed(_ m: Coord_V1_Armed, takeID: String, from who: String) throws(FieldFault) -> Armed {
        let c = Checker(who)
        guard m.takeID == takeID else { throw c.fault("Armed.take_id", "\"\(Echo.short(m.takeID))\" in answer to arming take \(takeID)") }
        try c.count(m.cameras.count, maxCameras, "Armed.cameras")
        for (i, camera) in m.cameras.enumerated() { try c.name(camera, "Armed.cameras[\(i)]", kind: "camera") }
        try c.count(m.warnings.count, maxCameras * 4, "Armed.warnings")
        for (i, warning) in m.warnings.enumerated() { try c.text(warning, "Armed.warnings[\(i)]") }
        try c.count(m.controls.count, maxCameras, "Armed.controls")
        var out = Armed()
        for (i, applied) in m.controls.enumerated() {
            let values = try controls(applied, field: "Armed.controls[\(i)]", c)
            out.controls.append((applied.camera, values))
        }
        try c.count(m.devices.count, maxCameras * 2, "Armed.devices")
        for (i, d) in m.devices.enumerated() {
            let f = "Armed.devices[\(i)]"
            try c.name(d.source, "\(f).source", kind: d.microphone ? "microphone" : "camera")
            let named = d.microphone ? out.micDevices[d.source] != nil : out.cameraDevices[d.source] != nil
            if named { throw c.fault("\(f).source", "\"\(d.source)\", whose device is named already") }
            let fields = [("driver", d.driver), ("card", d.card), ("bus_info", d.busInfo), ("protocol", d.`protocol`),
                          ("vendor", d.vendor), ("model", d.model), ("serial", d.serial), ("pipeline", d.pipeline),
                          ("camera_id", d.cameraID)]
            for (name, value) in fields { try c.printable(value, "\(f).\(name)", limit: maxDeviceTextBytes) }
            let some = { (s: String) in s.isEmpty ? nil : s }
            if d.microphone {
                guard !d.card.isEmpty else { throw c.fault("\(f).card", "empty; a microphone's device is its card's name") }
                out.micDevices[d.source] = d.card
            } else {
                guard !d.driver.isEmpty else { throw c.fault("\(f).driver", "empty; a camera's device names its driver") }
                out.cameraDevices[d.source] = DeviceIdentity(
                    driver: d.driver, card: some(d.card), busInfo: some(d.busInfo), transport: some(d.`protocol`),
                    vendor: some(d.vendor), model: some(d.model), serial: some(d.serial), pipeline: some(d.pipeline),
                    cameraID: some(d.cameraID))
                out.cameraDevices[d.source]?.timestamp = try stampChoice(d, field: f, c)
            }
        }
        return out
    }

    /// A camera device's buffer stamp (nil when the node did not say): a stamp and marks this build knows, finite
    /// non-negative figures under an hour.
    private static func stampChoice(_ d: Coord_V1_SourceDevice, field f: String, _ c: Checker) throws(FieldFault) -> BufferStampChoice? {
        guard !d.timestampStamp.isEmpty else { return nil }
        guard let stamp = BufferStampChoice.Stamp(rawValue: d.timestampStamp) else {
            throw c.fault("\(f).timestamp_stamp", "\"\(Echo.short(d.timestampStamp))\", not a stamp this coordinator knows")
        }
        guard let marks = BufferStampChoice.Marks(rawValue: d.timestampMarks) else {
            throw c.fault("\(f).timestamp_marks", "\"\(Echo.short(d.timestampMarks))\", not what a stamp can mark")
        }
        for (name, v) in [("timestamp_late_us", d.timestampLateUs), ("timestamp_uncertainty_us", d.timestampUncertaintyUs)]
        where !(v.isFinite && v >= 0 && v < 3.6e9) {
            throw c.fault("\(f).\(name)", "\(v), not a lateness from 0 to an hour in µs")
        }
        return BufferStampChoice(stamp: stamp, marks: marks, lateMicroseconds: d.timestampLateUs,
                                 uncertaintyMicroseconds: d.timestampUncertaintyUs,
                                 hwTimestamps: d.uvcHwtimestamps >= 0 ? Int(d.uvcHwtimestamps) : nil)
    }

    /// A ControlsApplied reply: the camera's controls now in force.
    public static func controlsApplied(_ m: Coord_V1_ControlsApplied, from who: String) throws(FieldFault) -> CameraControls {
        try controls(m, field: "ControlsApplied", Checker(who))
    }

    /// A PreviewFrame: names, sizes, group and times in range. `who`: the node as the rig knows it, or the
    /// preview endpoint it came from.
    public static func previewFrame(_ m: Coord_V1_PreviewFrame, from who: String) throws(FieldFault) -> Coord_V1_PreviewFrame {
        let c = Checker(who)
        try c.name(m.node, "PreviewFrame.node", kind: "node")
        try c.name(m.camera, "PreviewFrame.camera", kind: "camera")
        if !m.takeID.isEmpty { try c.name(m.takeID, "PreviewFrame.take_id", kind: "take") }
        try c.within(m.ordinal, 0...UInt32(Int32.max), "PreviewFrame.ordinal")
        try c.within(m.group, Wire.groupRange, "PreviewFrame.group")
        try c.within(m.centerUs, Wire.timeRange, "PreviewFrame.center_us")
        try c.within(m.width, Wire.sizeRange, "PreviewFrame.width")
        try c.within(m.height, Wire.sizeRange, "PreviewFrame.height")
        try c.within(m.dropped, countRange, "PreviewFrame.dropped")
        // center_uncertainty_us is shown only when finite (PreviewReceiver).
        try c.within(m.phaseErrorUs, -Wire.timeRange.upperBound...Wire.timeRange.upperBound, "PreviewFrame.phase_error_us")
        return m
    }

    // MARK: parts

    private static func controls(_ m: Coord_V1_ControlsApplied, field: String, _ c: Checker) throws(FieldFault) -> CameraControls {
        try c.name(m.camera, "\(field).camera", kind: "camera")
        let v = m.controls
        if v.hasExposureUs { try c.within(v.exposureUs, 0...10_000_000, "\(field).controls.exposure_us") }
        if v.hasGainDb { try c.finite(v.gainDb, -1_000_000...1_000_000, "\(field).controls.gain_db") }
        if v.hasWhiteBalanceK { try c.within(v.whiteBalanceK, 0...100_000, "\(field).controls.white_balance_k") }
        if v.hasFocus { try c.finite(v.focus, 0...1, "\(field).controls.focus") }
        return CameraControls(wire: v)
    }

    private static func resources(_ r: Coord_V1_NodeResources, _ field: String, _ c: Checker) throws(FieldFault) {
        let rate: ClosedRange<Double> = 0...1e15
        try c.count(r.buses.count, maxCameras, "\(field).buses")
        for (i, bus) in r.buses.enumerated() {
            try c.text(bus.id, "\(field).buses[\(i)].id", limit: 256)
            try c.text(bus.kind, "\(field).buses[\(i)].kind", limit: 256)
            try c.finite(bus.bandwidthBytesPerS, rate, "\(field).buses[\(i)].bandwidth_bytes_per_s")
        }
        if r.hasCalibration {
            let k = r.calibration
            try c.finite(k.diskWriteBytesPerS, rate, "\(field).calibration.disk_write_bytes_per_s")
            try c.finite(k.heatingCPerS, -1_000...1_000, "\(field).calibration.heating_c_per_s")
            try c.within(k.cpuCount, 0...1_000_000, "\(field).calibration.cpu_count")
            try c.text(k.measuredAt, "\(field).calibration.measured_at", limit: 64)
            try c.count(k.encode.count, 64, "\(field).calibration.encode")
            for (i, e) in k.encode.enumerated() {
                try c.text(e.codec, "\(field).calibration.encode[\(i)].codec", limit: 64)
                try c.finite(e.pixelsPerS, rate, "\(field).calibration.encode[\(i)].pixels_per_s")
                try c.finite(e.bytesPerPixel, 0...1_000, "\(field).calibration.encode[\(i)].bytes_per_pixel")
            }
        }
        try c.within(r.cpuCount, 0...1_000_000, "\(field).cpu_count")
        try c.finite(r.cpuLoad, 0...1e6, "\(field).cpu_load")
        try c.text(r.diskID, "\(field).disk_id", limit: 256)
        try c.text(r.hostID, "\(field).host_id", limit: 256)
        try c.count(r.thermalZones.count, 1_024, "\(field).thermal_zones")
        for (i, zone) in r.thermalZones.enumerated() {
            let f = "\(field).thermal_zones[\(i)]"
            try c.text(zone.name, "\(f).name", limit: 256)
            try c.finite(zone.celsius, -274...10_000, "\(f).celsius")
            try c.finite(zone.passiveCelsius, -274...10_000, "\(f).passive_celsius")
            try c.finite(zone.criticalCelsius, -274...10_000, "\(f).critical_celsius")
        }
    }

    /// Builds the faults of one reply, each naming `who`.
    private struct Checker {
        let who: String
        init(_ who: String) { self.who = who }

        func fault(_ field: String, _ problem: String) -> FieldFault { FieldFault(node: who, field: field, problem) }

        func within<T: BinaryInteger>(_ value: T, _ range: ClosedRange<T>, _ field: String) throws(FieldFault) {
            guard range.contains(value) else { throw fault(field, "\(value), outside \(range.lowerBound)…\(range.upperBound)") }
        }

        func finite(_ value: Double, _ range: ClosedRange<Double>, _ field: String) throws(FieldFault) {
            guard value.isFinite, range.contains(value) else {
                throw fault(field, "\(value), not a finite number within \(range.lowerBound)…\(range.upperBound)")
            }
        }

        func count(_ n: Int, _ limit: Int, _ field: String) throws(FieldFault) {
            guard n <= limit else { throw fault(field, "with \(n) entries; at most \(limit) are taken") }
        }

        func text(_ value: String, _ field: String, limit: Int = NodeReply.maxTextBytes) throws(FieldFault) {
            guard value.utf8.count <= limit else { throw fault(field, "of \(value.utf8.count) bytes (\"\(Echo.short(value))…\"); at most \(limit) are taken") }
        }

        /// Text the manifest and the console show as it is: at most `limit` bytes, no control characters.
        func printable(_ value: String, _ field: String, limit: Int) throws(FieldFault) {
            try text(value, field, limit: limit)
            // Named by code point, not echoed: the sentence itself goes to terminals and logs.
            if let bad = value.unicodeScalars.first(where: { $0.properties.generalCategory == .control }) {
                throw fault(field, "with the control character U+\(String(format: "%04X", bad.value)); a device's name is printable text")
            }
        }

        /// A node, camera, microphone or take name: CONTRACT §4's pattern, so it is safe as a file name.
        func name(_ value: String, _ field: String, kind: String) throws(FieldFault) {
            guard RigName.isValid(value) else {
                throw fault(field, value.isEmpty ? "empty; a \(kind) name is 1 to 64 of A-Z a-z 0-9 . _ -"
                    : "\"\(Echo.short(value))\", which is not a \(kind) name (1 to 64 of A-Z a-z 0-9 . _ -, not . or ..)")
            }
        }
    }
}
