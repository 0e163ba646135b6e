// The node's edge: every request the coordinator builds decodes into the node's own `NodeRequest`, and every
// field a node cannot act on is refused there in one sentence naming it.
import CoordCore
import CoordWire
import Foundation
import Testing

private let clock = ClockMapping(offsetMicroseconds: 1_250, ratePPM: 12.5, referenceLocal: 9_000_000, uncertaintyMicroseconds: 40)
private let grid = FrameGrid(t0: 5_000_000, periodMicroseconds: 40_000)
private let camera = CameraSettings(camera: "cam0", ordinal: 1, width: 640, height: 480, fps: 25, codec: .mjpeg, recordEvery: 1,
                                    controls: CameraControls())

private func decoded(_ body: Envelope.OneOf_Body?) throws(NodeFailure) -> NodeRequest {
    var e = Wire.envelope(9, .statusRequest(Coord_V1_StatusRequest()))
    e.body = body
    // Through bytes, as a node receives it.
    return try Wire.request(Wire.parse(Wire.encode(e)))
}

private func refusal(_ body: Envelope.OneOf_Body?) -> NodeFailure? {
    do {
        _ = try decoded(body)
        return nil
    } catch {
        return error
    }
}

/// The refusal's sentence names `field`, with the code the node replies.
private func expectRefused(_ body: Envelope.OneOf_Body?, naming field: String, code: NodeFailure.Code = .badConfig,
                           sourceLocation: SourceLocation = #_sourceLocation) {
    guard let failure = refusal(body) else {
        Issue.record("accepted, expected a refusal naming \(field)", sourceLocation: sourceLocation)
        return
    }
    #expect(failure.code == code, "\(failure)", sourceLocation: sourceLocation)
    #expect(failure.message.contains(field), "\(failure.message)", sourceLocation: sourceLocation)
    #expect(!failure.message.contains("\n"), sourceLocation: sourceLocation)
}

private func arm(_ edit: (inout Coord_V1_Arm) -> Void) -> Envelope.OneOf_Body {
    guard case .arm(var m) = CoordRequest.arm(takeID: "t1", clock: clock, grid: grid, timecode: "01:00:00:00",
                                             preview: PreviewSettings(width: 320, fps: 5)) else { fatalError() }
    edit(&m)
    return .arm(m)
}

@Suite struct NodeRequestDecodeTests {
    @Test func everyRequestTheCoordinatorBuildsDecodesToTheCoresValues() throws {
        let file = TakeManifest.File(path: "n1/cam0.mkv", bytes: 1_000, sha256: String(repeating: "a", count: 64), xxh128: "")
        let preview = PreviewSettings(width: 320, fps: 5)
        let cases: [(Envelope.OneOf_Body, NodeRequest)] = [
            (CoordRequest.hello(coordinator: "host-a"), .hello(coordinator: "host-a")),
            (CoordRequest.status, .status),
            (CoordRequest.configure(takeID: "t1", cameras: [camera]), .configure(takeID: "t1", cameras: [camera])),
            (CoordRequest.arm(takeID: "t1", clock: clock, grid: grid, timecode: "01:00:00:00", preview: preview),
             .arm(.init(takeID: "t1", grid: grid, clock: clock, timecode: "01:00:00:00", preview: preview))),
            (CoordRequest.arm(takeID: "t1", clock: clock, grid: grid, timecode: "", preview: .off),
             .arm(.init(takeID: "t1", grid: grid, clock: clock, timecode: "", preview: nil))),
            (CoordRequest.clockUpdate(takeID: "t1", clock: clock), .clockUpdate(takeID: "t1", clock: clock)),
            (CoordRequest.startAt(takeID: "t1", startGroup: 10, stopGroup: 0), .startAt(takeID: "t1", startGroup: 10, stopGroup: 0)),
            (CoordRequest.startAt(takeID: "t1", startGroup: 10, stopGroup: 60), .startAt(takeID: "t1", startGroup: 10, stopGroup: 60)),
            (CoordRequest.stopAt(takeID: "t1", stopGroup: 60), .stopAt(takeID: "t1", stopGroup: 60)),
            (CoordRequest.adjustCamera(takeID: "t1", camera: "cam0", fromGroup: 30, reason: "hot", action: .slow(recordEvery: 2)),
             .adjustCamera(takeID: "t1", camera: "cam0", adjustment: .slow(every: 2, from: 30), reason: "hot")),
            (CoordRequest.adjustCamera(takeID: "t1", camera: "cam0", fromGroup: 30, reason: "", action: .disable),
             .adjustCamera(takeID: "t1", camera: "cam0", adjustment: .disable(from: 30), reason: "")),
            (CoordRequest.abort(takeID: "t1", reason: "operator"), .abort(takeID: "t1", reason: "operator")),
            (CoordRequest.listFiles(takeID: "t1"), .listFiles(takeID: "t1")),
            (CoordRequest.fetchChunk(takeID: "t1", path: "n1/cam0.mkv", offset: 4096, length: 65_536),
             .fetchChunk(.init(takeID: "t1", path: "n1/cam0.mkv", offset: 4096, length: 65_536, rawFrame: true))),
            (CoordRequest.confirmCollected(takeID: "t1", files: [file], keep: true),
             .confirmCollected(takeID: "t1", files: [file], keep: true)),
            (CoordRequest.startPreview(cameras: [camera], clock: clock, grid: grid, preview: preview, lease: .milliseconds(5_000)),
             .startPreview(.init(cameras: [camera], grid: grid, clock: clock, settings: preview, lease: .milliseconds(5_000)))),
            (CoordRequest.setControls(camera: "cam0", controls: CameraControls(exposureMicroseconds: 8_000)),
             .setControls(camera: "cam0", controls: CameraControls(exposureMicroseconds: 8_000))),
        ]
        for (body, expected) in cases {
            #expect(try decoded(body) == expected)
        }
        var probe = Coord_V1_ClockProbe()
        probe.t1Us = -42
        #expect(try decoded(.clockProbe(probe)) == .clockProbe(sentLocal: -42))
    }

    @Test func anAdjustmentWithoutAnActionIsLeftForTheTakeToRefuse() throws {
        var m = Coord_V1_AdjustCamera()
        m.takeID = "t1"
        m.camera = "cam0"
        m.fromGroup = 3
        #expect(try decoded(.adjustCamera(m)) == .adjustCamera(takeID: "t1", camera: "cam0", adjustment: .unknown, reason: ""))
    }

    @Test func outOfRangeNumbersAreRefusedNamingTheField() {
        expectRefused(arm { $0.framePeriodUs = 0 }, naming: "Arm.frame_period_us")
        expectRefused(arm { $0.framePeriodUs = .max }, naming: "Arm.frame_period_us")
        expectRefused(arm { $0.t0Us = .min }, naming: "Arm.t0_us")
        expectRefused(arm { $0.clock.ratePpm = .nan }, naming: "Arm.clock.rate_ppm")
        expectRefused(arm { $0.clock.uncertaintyUs = -1 }, naming: "Arm.clock.uncertainty_us")
        expectRefused(arm { $0.preview.width = 1 }, naming: "Arm.preview.width")
        expectRefused(CoordRequest.startAt(takeID: "t1", startGroup: -1, stopGroup: 0), naming: "StartAt.start_group")
        expectRefused(CoordRequest.startAt(takeID: "t1", startGroup: 10, stopGroup: 5), naming: "StartAt.stop_group")
        expectRefused(CoordRequest.stopAt(takeID: "t1", stopGroup: 0), naming: "StopAt.stop_group")
        expectRefused(CoordRequest.stopAt(takeID: "t1", stopGroup: .max), naming: "StopAt.stop_group")
        expectRefused(CoordRequest.adjustCamera(takeID: "t1", camera: "cam0", fromGroup: 1, reason: "", action: .slow(recordEvery: 5_000)),
                      naming: "AdjustCamera.record_every")
        var wide = camera
        wide.width = 20_000
        expectRefused(CoordRequest.configure(takeID: "t1", cameras: [wide]), naming: "Configure.cameras[0].width")
        expectRefused(CoordRequest.configure(takeID: "t1", cameras: Array(repeating: camera, count: 65)), naming: "65 cameras")
        expectRefused(CoordRequest.setControls(camera: "cam0", controls: CameraControls(gainDecibels: .infinity)),
                      naming: "SetControls.controls.gain_db")
        expectRefused(CoordRequest.startPreview(cameras: [camera], clock: clock, grid: grid, preview: PreviewSettings(width: 320, fps: 5),
                                                lease: .milliseconds(10)), naming: "StartPreview.lease_ms")
        expectRefused(CoordRequest.hello(coordinator: String(repeating: "x", count: 5_000)), naming: "Hello.coordinator")
    }

    @Test func missingFieldsAreRefusedNamingWhatIsMissing() {
        expectRefused(arm { $0.clearClock() }, naming: "clock mapping")
        var update = Coord_V1_ClockUpdate()
        update.takeID = "t1"
        expectRefused(.clockUpdate(update), naming: "carries no mapping")
        expectRefused(CoordRequest.fetchChunk(takeID: "t1", path: "n1/cam0.mkv", offset: 0, length: 0), naming: "chunk length 0")
        expectRefused(CoordRequest.fetchChunk(takeID: "t1", path: "n1/cam0.mkv", offset: 0, length: 5 << 20), naming: "chunk length")
        expectRefused(CoordRequest.startPreview(cameras: [], clock: clock, grid: grid, preview: PreviewSettings(width: 320, fps: 5),
                                                lease: .milliseconds(5_000)), naming: "at least one camera")
        guard case .startPreview(var noClock) = CoordRequest.startPreview(cameras: [camera], clock: clock, grid: grid,
                                                                           preview: PreviewSettings(width: 320, fps: 5),
                                                                           lease: .milliseconds(5_000)) else { return }
        noClock.clearClock()
        expectRefused(.startPreview(noClock), naming: "clock mapping")
        expectRefused(arm { $0.timecode = "25:99:00:00" }, naming: "timecode")
    }

    @Test func hostileNamesAndWrongKindsAreRefused() {
        expectRefused(CoordRequest.listFiles(takeID: ".."), naming: "take id")
        expectRefused(CoordRequest.listFiles(takeID: ""), naming: "take id")
        expectRefused(CoordRequest.configure(takeID: "t1/../x", cameras: [camera]), naming: "take id")
        var slash = camera
        slash.camera = "a/b"
        expectRefused(CoordRequest.configure(takeID: "t1", cameras: [slash]), naming: "camera")
        expectRefused(CoordRequest.fetchChunk(takeID: "t1", path: "../etc/passwd", offset: 0, length: 1), naming: "no file", code: .notFound)
        // A reply sent as a request, and an envelope carrying nothing.
        expectRefused(.ack(Coord_V1_Ack()), naming: "replies as requests", code: .unknownMessage)
        expectRefused(.status(Coord_V1_Status()), naming: "replies as requests", code: .unknownMessage)
        expectRefused(nil, naming: "no request", code: .unknownMessage)
    }

    @Test func anotherProtocolVersionIsRefusedBeforeAnyField() {
        var e = Wire.envelope(3, CoordRequest.listFiles(takeID: ".."))
        e.protocolVersion = Wire.protocolVersion + 1
        #expect(throws: NodeFailure.self) { try Wire.request(e) }
        do {
            _ = try Wire.request(e)
        } catch {
            #expect(error.code == .versionMismatch)
        }
    }

    @Test func everyKindHasTheProtocolsName() throws {
        #expect(try decoded(CoordRequest.status).kind == "statusRequest")
        #expect(try decoded(CoordRequest.listFiles(takeID: "t1")).kind == "listFiles")
    }
}
