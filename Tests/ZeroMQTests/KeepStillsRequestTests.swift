// The console's Snap at the node's edge: a KeepStills the coordinator builds decodes to the core's values, and a
// shot id, group list or format the node cannot act on is refused in one sentence naming it.
import CoordCore
import CoordWire
import Testing

private func decoded(_ body: Envelope.OneOf_Body) throws(NodeFailure) -> NodeRequest {
    var e = Wire.envelope(3, .statusRequest(Coord_V1_StatusRequest()))
    e.body = body
    return try Wire.request(Wire.parse(Wire.encode(e)))
}

private func keep(_ edit: (inout Coord_V1_KeepStills) -> Void) -> Envelope.OneOf_Body {
    guard case .keepStills(var m) = CoordRequest.keepStills(shotID: "shot-1", groups: [120], format: .png) else { fatalError() }
    edit(&m)
    return .keepStills(m)
}

private func refused(_ body: Envelope.OneOf_Body, naming words: String, sourceLocation: SourceLocation = #_sourceLocation) {
    do {
        let request = try decoded(body)
        Issue.record("accepted \(request), expected a refusal naming \(words)", sourceLocation: sourceLocation)
    } catch {
        #expect(error.code == .badConfig, "\(error)", sourceLocation: sourceLocation)
        #expect(error.message.contains(words), "\(error.message)", sourceLocation: sourceLocation)
        #expect(!error.message.contains("\n"), sourceLocation: sourceLocation)
    }
}

@Suite struct KeepStillsRequestTests {
    @Test func aSnapTheConsoleBuildsDecodesToTheShotItsGroupsAndFormat() throws {
        #expect(try decoded(CoordRequest.keepStills(shotID: "20261127-snap-a1", groups: [7, 9, 11], format: .tiff))
            == .keepStills(shotID: "20261127-snap-a1", groups: [7, 9, 11], format: .tiff))
        #expect(try decoded(keep { _ in }).kind == "keepStills")
    }

    @Test func aBadShotIdGroupsOrFormatIsRefusedNamingIt() {
        refused(keep { $0.shotID = "../etc" }, naming: "take id \"../etc\" is not allowed")
        refused(keep { $0.shotID = "" }, naming: "take id")
        refused(keep { $0.groups = [] }, naming: "KeepStills.groups has 0")
        refused(keep { $0.groups = Array(0...Int64(SnapPlan.mostShots)) }, naming: "KeepStills.groups has 1001")
        refused(keep { $0.groups = [-1] }, naming: "group -1")
        refused(keep { $0.groups = [1 << 41] }, naming: "group \(Int64(1) << 41)")
        refused(keep { $0.groups = [9, 7] }, naming: "ascending order")
        refused(keep { $0.groups = [7, 7] }, naming: "each once")
        // A warm shot keeps the camera's pixels exactly: JPEG is `coord snap`'s.
        refused(keep { $0.format = "jpeg" }, naming: "KeepStills.format must be png or tiff")
        refused(keep { $0.format = "" }, naming: "KeepStills.format")
    }
}

@Suite struct KeepStillsModesTests {
    @Test func aSnapsModeSwitchesDecodeToTheCoresModes() throws {
        let modes = [StillModeSwitch.Mode(camera: "cam0", width: 3840, height: 2160, recordEvery: 5)]
        #expect(try decoded(CoordRequest.keepStills(shotID: "s1", groups: [10], format: .png, modes: modes))
            == .keepStills(shotID: "s1", groups: [10], format: .png, modes: modes))
    }

    @Test func aBadModeIsRefusedNamingIt() {
        func mode(_ camera: String, _ w: UInt32, _ h: UInt32, _ every: UInt32) -> Coord_V1_StillMode {
            var m = Coord_V1_StillMode()
            m.camera = camera; m.width = w; m.height = h; m.recordEvery = every
            return m
        }
        refused(keep { $0.modes = [mode("../x", 640, 480, 1)] }, naming: "no camera name (KeepStills.modes)")
        refused(keep { $0.modes = [mode("cam0", 641, 480, 1)] }, naming: "641x480; KeepStills.modes sizes are even")
        refused(keep { $0.modes = [mode("cam0", 640, 480, 0)] }, naming: "record_every 0, outside 1…1000")
        refused(keep { $0.modes = [mode("cam0", 640, 480, 1), mode("cam0", 1280, 720, 1)] }, naming: "names a camera twice")
    }
}
