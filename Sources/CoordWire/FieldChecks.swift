import CoordCore

/// Every number of every request checked at the edge, before the node's core does arithmetic with it: finite,
/// and within ranges the core's time and group arithmetic cannot overflow (a day at 1000 fps is under 10⁸
/// groups; a century of microseconds is about 3·10¹⁵). A field out of range is refused with BAD_CONFIG naming
/// the message, the field and its allowed range, and echoing at most a short prefix of what was sent.
extension Wire {
    /// Times on any clock (µs): ±10¹⁶, about 300 years either way.
    public static let timeRange: ClosedRange<Int64> = -10_000_000_000_000_000...10_000_000_000_000_000
    /// Groups of a grid: 0…2⁴⁰ (over 300 years at 100 fps).
    public static let groupRange: ClosedRange<Int64> = 0...(1 << 40)
    /// A grid's period: 1 ms (1000 fps) … 10 s.
    public static let periodRange: ClosedRange<UInt64> = 1_000...10_000_000
    /// A clock's rate error: ±1000 ppm (a crystal is off by tens; more means a broken estimate).
    public static let ratePPMRange: ClosedRange<Double> = -1_000...1_000
    /// A clock mapping's stated uncertainty: 0…10 s.
    public static let uncertaintyRange: ClosedRange<Double> = 0...10_000_000
    public static let maxCameras = 64
    public static let sizeRange: ClosedRange<UInt32> = 1...16_384
    public static let fpsRange: ClosedRange<UInt32> = 1...1_000
    public static let recordEveryRange: ClosedRange<UInt32> = 0...1_000
    public static let ordinalRange: ClosedRange<UInt32> = 0...255
    /// Free-text fields (a coordinator's host name, an abort's reason, a timecode): bytes kept at most.
    public static let maxTextBytes = 1_024

    /// Refuses a request with a number or a text field no node may act on; see the type's note.
    public static func checkFields(_ envelope: Envelope) throws(NodeFailure) {
        switch envelope.body {
        case .hello(let m):
            try text(m.coordinator, "Hello.coordinator")
        case .configure(let m):
            try configs(m.cameras, "Configure")
        case .arm(let m):
            try mapping(m.clock, "Arm.clock", present: m.hasClock)
            try within(m.t0Us, timeRange, "Arm.t0_us")
            try within(m.framePeriodUs, periodRange, "Arm.frame_period_us")
            try text(m.timecode, "Arm.timecode", limit: 32)
            if m.hasPreview { try preview(m.preview, "Arm.preview", allowOff: true) }
        case .clockUpdate(let m):
            try mapping(m.clock, "ClockUpdate.clock", present: m.hasClock)
        case .startAt(let m):
            try within(m.startGroup, groupRange, "StartAt.start_group")
            if m.stopGroup != 0 {
                try within(m.stopGroup, groupRange, "StartAt.stop_group")
                guard m.stopGroup > m.startGroup else {
                    throw NodeFailure(.badConfig, "StartAt.stop_group \(m.stopGroup) must be 0 (until StopAt) or after start_group \(m.startGroup).")
                }
            }
        case .stopAt(let m):
            try within(m.stopGroup, 1...groupRange.upperBound, "StopAt.stop_group")
        case .adjustCamera(let m):
            try within(m.fromGroup, groupRange, "AdjustCamera.from_group")
            if m.action == .slow { try within(m.recordEvery, 1...recordEveryRange.upperBound, "AdjustCamera.record_every") }
            try text(m.reason, "AdjustCamera.reason")
        case .abort(let m):
            try text(m.reason, "Abort.reason")
        case .fetchChunk(let m):
            try within(m.offset, 0...(UInt64(1) << 50), "FetchChunk.offset")
        case .startPreview(let m):
            try configs(m.cameras, "StartPreview")
            try mapping(m.clock, "StartPreview.clock", present: m.hasClock)
            try within(m.t0Us, timeRange, "StartPreview.t0_us")
            try within(m.framePeriodUs, periodRange, "StartPreview.frame_period_us")
            try preview(m.preview, "StartPreview.preview", allowOff: false)
            try within(m.leaseMs, 1_000...60_000, "StartPreview.lease_ms")
        case .keepStills(let m):
            try stillGroups(m.groups, shot: m.shotID)
            try stillModes(m.modes, shot: m.shotID)
        case .setControls(let m):
            let c = m.controls
            if c.hasExposureUs { try within(c.exposureUs, 1...10_000_000, "SetControls.controls.exposure_us") }
            if c.hasGainDb { try finite(c.gainDb, -100...1_000, "SetControls.controls.gain_db") }
            if c.hasWhiteBalanceK { try within(c.whiteBalanceK, 1_000...15_000, "SetControls.controls.white_balance_k") }
            if c.hasFocus { try finite(c.focus, 0...1, "SetControls.controls.focus") }
        default:
            break
        }
    }

    private static func configs(_ cameras: [Coord_V1_CameraConfig], _ message: String) throws(NodeFailure) {
        guard cameras.count <= maxCameras else {
            throw NodeFailure(.badConfig, "\(message) names \(cameras.count) cameras; a node takes at most \(maxCameras).")
        }
        for (i, c) in cameras.enumerated() {
            let field = "\(message).cameras[\(i)]"
            try within(c.ordinal, ordinalRange, "\(field).ordinal")
            try within(c.width, sizeRange, "\(field).width")
            try within(c.height, sizeRange, "\(field).height")
            try within(c.fps, fpsRange, "\(field).fps")
            try within(c.recordEvery, recordEveryRange, "\(field).record_every")
            try text(c.codec, "\(field).codec", limit: 16)
            if c.hasControls {
                let v = c.controls
                if v.hasExposureUs { try within(v.exposureUs, 1...10_000_000, "\(field).controls.exposure_us") }
                if v.hasGainDb { try finite(v.gainDb, -100...1_000, "\(field).controls.gain_db") }
                if v.hasWhiteBalanceK { try within(v.whiteBalanceK, 1_000...15_000, "\(field).controls.white_balance_k") }
                if v.hasFocus { try finite(v.focus, 0...1, "\(field).controls.focus") }
            }
        }
    }

    private static func mapping(_ m: Coord_V1_ClockMapping, _ field: String, present: Bool) throws(NodeFailure) {
        guard present else { return }
        try within(m.offsetUs, timeRange, "\(field).offset_us")
        try finite(m.ratePpm, ratePPMRange, "\(field).rate_ppm")
        try within(m.refLocalUs, timeRange, "\(field).ref_local_us")
        try finite(m.uncertaintyUs, uncertaintyRange, "\(field).uncertainty_us")
    }

    private static func preview(_ p: Coord_V1_PreviewSettings, _ field: String, allowOff: Bool) throws(NodeFailure) {
        if allowOff && p.width == 0 { return }
        try within(p.width, UInt32(PreviewSettings.widths.lowerBound)...UInt32(PreviewSettings.widths.upperBound), "\(field).width")
        try within(p.fps, UInt32(PreviewSettings.rates.lowerBound)...UInt32(PreviewSettings.rates.upperBound), "\(field).fps")
    }

    private static func within<T: BinaryInteger>(_ value: T, _ range: ClosedRange<T>, _ field: String) throws(NodeFailure) {
        guard range.contains(value) else {
            throw NodeFailure(.badConfig, "\(field) \(value) is outside \(range.lowerBound)…\(range.upperBound).")
        }
    }

    private static func finite(_ value: Double, _ range: ClosedRange<Double>, _ field: String) throws(NodeFailure) {
        guard value.isFinite, range.contains(value) else {
            throw NodeFailure(.badConfig, "\(field) \(value) is not a finite number within \(range.lowerBound)…\(range.upperBound).")
        }
    }

    private static func text(_ value: String, _ field: String, limit: Int = maxTextBytes) throws(NodeFailure) {
        guard value.utf8.count <= limit else {
            throw NodeFailure(.badConfig, "\(field) is \(value.utf8.count) bytes (\"\(Echo.short(value))…\"); at most \(limit) are taken.")
        }
    }
}
