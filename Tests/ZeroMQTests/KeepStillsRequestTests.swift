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
