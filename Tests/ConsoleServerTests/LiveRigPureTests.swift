import CoordCore
@testable import Coordinator
import Testing
import ZeroMQ

/// The console's pure parts behind issue 35's page defects: a camera's phase while it settles onto a new grid,
/// and how long a node's staging disk lasts.
@Suite struct LiveRigPureTests {
    func tile(_ camera: String, phase: Int64) -> PreviewTile {
        PreviewTile(key: CameraKey(node: "n", camera: camera), group: 1, centerMicroseconds: 0, phaseErrorMicroseconds: phase,
                    dropped: 0, width: 64, height: 48)
    }

    @Test func aPhaseIsBlankWhileItsCameraSettlesOntoANewGrid() {
        var grid = TileGrid()
        func switched(_ take: String, _ now: Int64) -> Bool { grid.switched(to: take, now: now) }
        func phase(_ camera: String, _ value: Int64, _ now: Int64) -> Int64? { grid.phase(of: tile(camera, phase: value), now: now) }
        #expect(!switched("", 1))
        #expect(phase("a", 12, 1) == 12)
        // A take ends: the preview's grid again, the camera steered back onto it (−15 075 µs for seconds).
        #expect(switched("take-1", 2_000_000))
        #expect(!switched("take-1", 2_100_000))
        #expect(switched("", 10_000_000))
        #expect(phase("a", -15_075, 10_500_000) == nil)
        #expect(phase("b", 40, 10_600_000) == 40)
        // Settled (within a millisecond): shown from then on, whatever it reads.
        #expect(phase("a", 300, 11_000_000) == 300)
        #expect(phase("a", -2_000, 11_200_000) == -2_000)
        // A camera that never comes within a millisecond is shown after 5 s: that is its phase.
        #expect(phase("c", 9_000, 14_900_000) == nil)
        #expect(phase("c", 9_000, 15_000_000) == 9_000)
    }

    @Test func recordingLeftIsFreeBytesOverTheNewestTakesRateLessTheReserve() {
        var runway = LiveRig.DiskRunway()
        #expect(runway.secondsLeft(freeBytes: 1 << 40) == nil, "not measured before a take")
        runway.seen(takeID: "t1", recording: true, bytes: 0, now: 0)
        runway.seen(takeID: "t1", recording: true, bytes: 5_000_000, now: 500_000)
        #expect(runway.bytesPerSecond == nil, "under a second is not a rate yet")
        runway.seen(takeID: "t1", recording: true, bytes: 20_000_000, now: 2_000_000)
        #expect(runway.bytesPerSecond == 10_000_000)
        // 1 GB free at 10 MB/s, less max(16 MiB, 3 s of writing) = 30 MB: 97 s.
        #expect(runway.secondsLeft(freeBytes: 1_000_000_000) == 97)
        #expect(runway.secondsLeft(freeBytes: 1_000) == 0)
        #expect(runway.secondsLeft(freeBytes: nil) == nil)
        // Idle statuses keep the rate; the next take measures afresh.
        runway.seen(takeID: "", recording: false, bytes: 0, now: 9_000_000)
        #expect(runway.bytesPerSecond == 10_000_000)
        runway.seen(takeID: "t2", recording: true, bytes: 0, now: 10_000_000)
        runway.seen(takeID: "t2", recording: true, bytes: 4_000_000, now: 12_000_000)
        #expect(runway.bytesPerSecond == 2_000_000)
    }
}

/// The demo's nodes publish their preview on the port after their control port: both must be free, or a node
/// records without a preview and the console never completes a set (CI saw it once a run in three).
@Suite struct DemoPortTests {
    @Test func everyNodesControlPortHasTheNextPortFreeAndNoTwoNodesOverlap() throws {
        // Hold the port after a fresh one, as another process would: it is never chosen with its neighbour taken.
        let context = ZMQContext()
        let blocker = try context.makeSocket(.router)
        defer { blocker.close() }
        let taken = try #require(Int(try blocker.bind("tcp://127.0.0.1:*").split(separator: ":").last ?? ""))
        let ports = try #require(DemoRig.loopbackPorts(12))
        #expect(ports.count == 12)
        let used = Set(ports + ports.map { $0 + 1 })
        #expect(used.count == 24, "control and preview ports overlap: \(ports.sorted())")
        #expect(!used.contains(taken))
        for port in ports {
            // Both are free once chosen: bind them now, as the node will.
            let control = try context.makeSocket(.router), preview = try context.makeSocket(.router)
            defer { control.close(); preview.close() }
            _ = try control.bind("tcp://127.0.0.1:\(port)")
            _ = try preview.bind("tcp://127.0.0.1:\(port + 1)")
        }
    }
}
