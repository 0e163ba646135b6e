// Every message the coordinator sends, built from the core's values: nothing outside CoordWire fills a
// generated request by hand.
import CoordCore
import Foundation

public enum CoordRequest {
    public typealias Body = Envelope.OneOf_Body

    public static func hello(coordinator: String) -> Body {
        var m = Coord_V1_Hello()
        m.coordinator = coordinator
        return .hello(m)
    }

    public static var status: Body { .statusRequest(Coord_V1_StatusRequest()) }

    public static var clockProbe: Body { .clockProbe(Coord_V1_ClockProbe()) }

    public static func configure(takeID: String, cameras: [CameraSettings]) -> Body {
        var m = Coord_V1_Configure()
        m.takeID = takeID
        m.cameras = cameras.map(\.wire)
        return .configure(m)
    }

    /// Arms a node for the take on `grid` (group 0 at `grid.t0`, rig timebase) with its clock mapping; preview
    /// tiles only when `preview` is on.
    public static func arm(takeID: String, clock: ClockMapping, grid: FrameGrid, timecode: String,
                           preview: PreviewSettings) -> Body {
        var m = Coord_V1_Arm()
        m.takeID = takeID
        m.clock = clock.wire
        m.t0Us = grid.t0
        m.framePeriodUs = UInt64(grid.periodMicroseconds)
        (m.fpsNum, m.fpsDen) = Wire.rateFields(grid.rationalRate)
        m.timecode = timecode
        if preview.isOn {
            m.preview.width = UInt32(preview.width)
            m.preview.fps = UInt32(preview.fps)
        }
        return .arm(m)
    }

    public static func clockUpdate(takeID: String, clock: ClockMapping) -> Body {
        var m = Coord_V1_ClockUpdate()
        m.takeID = takeID
        m.clock = clock.wire
        return .clockUpdate(m)
    }

    public static func startAt(takeID: String, startGroup: Int64, stopGroup: Int64) -> Body {
        var m = Coord_V1_StartAt()
        m.takeID = takeID
        m.startGroup = startGroup
        m.stopGroup = stopGroup
        return .startAt(m)
    }

    public static func stopAt(takeID: String, stopGroup: Int64) -> Body {
        var m = Coord_V1_StopAt()
        m.takeID = takeID
        m.stopGroup = stopGroup
        return .stopAt(m)
    }

    /// The pressure policy's change to one camera from group `fromGroup` on; a restore is a slow to the
    /// camera's planned stride.
    public static func adjustCamera(takeID: String, camera: String, fromGroup: Int64, reason: String,
                                    action: PressureResponder.Decision.Action) -> Body {
        var m = Coord_V1_AdjustCamera()
        m.takeID = takeID
        m.camera = camera
        m.fromGroup = fromGroup
        m.reason = reason
        switch action {
        case .slow(let every), .restore(let every):
            m.action = .slow
            m.recordEvery = UInt32(clamping: every)
        case .disable:
            m.action = .disable
        }
        return .adjustCamera(m)
    }

    public static func abort(takeID: String, reason: String) -> Body {
        var m = Coord_V1_Abort()
        m.takeID = takeID
        m.reason = reason
        return .abort(m)
    }

    public static func listFiles(takeID: String) -> Body {
        var m = Coord_V1_ListFiles()
        m.takeID = takeID
        return .listFiles(m)
    }

    /// `length` bytes of `path` from `offset`, sent raw after the reply frame.
    public static func fetchChunk(takeID: String, path: String, offset: UInt64, length: Int) -> Body {
        var m = Coord_V1_FetchChunk()
        m.takeID = takeID
        m.path = path
        m.offset = offset
        m.length = UInt32(clamping: length)
        m.rawFrame = true
        return .fetchChunk(m)
    }

    /// The files that arrived intact; `keep`: the node keeps them, else it may delete them.
    public static func confirmCollected(takeID: String, files: [TakeManifest.File], keep: Bool) -> Body {
        var m = Coord_V1_ConfirmCollected()
        m.takeID = takeID
        m.files = files.map(\.wire)
        m.keep = keep
        return .confirmCollected(m)
    }

    /// Preview tiles from `cameras` on `grid` for `lease` (the console renews it), sent in whole ms.
    public static func startPreview(cameras: [CameraSettings], clock: ClockMapping, grid: FrameGrid,
                                    preview: PreviewSettings, lease: Duration) -> Body {
        var m = Coord_V1_StartPreview()
        m.cameras = cameras.map(\.wire)
        m.clock = clock.wire
        m.t0Us = grid.t0
        m.framePeriodUs = UInt64(grid.periodMicroseconds)
        (m.fpsNum, m.fpsDen) = Wire.rateFields(grid.rationalRate)
        m.preview.width = UInt32(preview.width)
        m.preview.fps = UInt32(preview.fps)
        m.leaseMs = UInt32(clamping: lease.microseconds / 1_000)
        return .startPreview(m)
    }

    /// The console's Snap: every previewing camera keeps `groups`' frames as stills of shot `shotID`.
    public static func keepStills(shotID: String, groups: [Int64], format: SnapPlan.Format, modes: [StillModeSwitch.Mode] = []) -> Body {
        var m = Coord_V1_KeepStills()
        m.shotID = shotID
        m.groups = groups
        m.format = format.rawValue
        m.modes = modes.map { mode in
            var w = Coord_V1_StillMode()
            w.camera = mode.camera
            w.width = UInt32(clamping: mode.width)
            w.height = UInt32(clamping: mode.height)
            w.recordEvery = UInt32(clamping: mode.recordEvery)
            return w
        }
        return .keepStills(m)
    }

    /// The operator's free-running trigger train while the node previews, on or off.
    public static func previewTrain(on: Bool) -> Body {
        var m = Coord_V1_PreviewTrain()
        m.on = on
        return .previewTrain(m)
    }

    public static func setControls(camera: String, controls: CameraControls) -> Body {
        var m = Coord_V1_SetControls()
        m.camera = camera
        m.controls = controls.wire
        return .setControls(m)
    }

    /// The discovery query's bytes (a UDP datagram, not an envelope).
    public static func discoveryQuery(nonce: [UInt8]) -> [UInt8] {
        var query = Coord_V1_Discovery()
        query.protocolVersion = Wire.protocolVersion
        var q = Coord_V1_DiscoveryQuery()
        q.nonce = Data(nonce)
        query.body = .query(q)
        return (try? query.serializedBytes()) ?? []
    }
}
