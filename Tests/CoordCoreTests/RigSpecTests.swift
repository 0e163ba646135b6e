import Foundation
import Testing
@testable import CoordCore

@Suite struct RigSpecTests {
    /// Three good nodes and every take default set.
    static let good = RigSpec(
        nodes: [
            .init(name: "pi-left", endpoint: "tcp://pi-left.local:5555"),
            .init(name: "jetson", endpoint: "tcp://127.0.0.2:5555", cameras: ["cam0", "cam1"]),
            .init(name: "pc.right", endpoint: "tcp://[::1]:6000"),
        ],
        take: .init(fps: 60, size: "1280x720", codec: .ffv1, name: "scene-1", takesDir: "/srv/takes"))

    @Test func aGoodSpecHasNoProblem() {
        #expect(Self.good.problem() == nil)
        #expect(Self.good.fault() == nil)
        #expect(RigSpec(nodes: [.init(name: "a", endpoint: "tcp://h:1")]).problem() == nil)
    }

    /// One change to the good spec, the field the problem must name, and a word the sentence must hold.
    struct Case: Sendable, CustomTestStringConvertible {
        var label: String
        var change: @Sendable (inout RigSpec) -> Void
        var field: String
        var says: String
        var testDescription: String { label }
    }

    static let cases: [Case] = [
        Case(label: "version 2", change: { $0.version = 2 }, field: "version", says: "version 2"),
        Case(label: "unknown deliverable", change: { $0.take.deliver = ["mov", "edl"] }, field: "take.deliver", says: "\"edl\""),
        Case(label: "no nodes", change: { $0.nodes = [] }, field: "nodes", says: "empty"),
        Case(label: "bad node name", change: { $0.nodes[1].name = "jet son" }, field: "nodes[1].name", says: "\"jet son\""),
        Case(label: "empty node name", change: { $0.nodes[0].name = "" }, field: "nodes[0].name", says: "not allowed"),
        Case(label: "node name too long", change: { $0.nodes[2].name = String(repeating: "n", count: 65) }, field: "nodes[2].name", says: "1 to 64"),
        Case(label: "duplicate name", change: { $0.nodes[2].name = "pi-left" }, field: "nodes[2].name", says: "nodes[0]"),
        Case(label: "http endpoint", change: { $0.nodes[1].endpoint = "http://h:1" }, field: "nodes[1].endpoint", says: "tcp://host:port"),
        Case(label: "no port", change: { $0.nodes[1].endpoint = "tcp://jetson" }, field: "nodes[1].endpoint", says: "port"),
        Case(label: "port 0", change: { $0.nodes[1].endpoint = "tcp://jetson:0" }, field: "nodes[1].endpoint", says: "65535"),
        Case(label: "port too big", change: { $0.nodes[1].endpoint = "tcp://jetson:70000" }, field: "nodes[1].endpoint", says: "65535"),
        Case(label: "port not a number", change: { $0.nodes[1].endpoint = "tcp://jetson:http" }, field: "nodes[1].endpoint", says: "port"),
        Case(label: "wildcard host", change: { $0.nodes[0].endpoint = "tcp://*:5555" }, field: "nodes[0].endpoint", says: "host"),
        Case(label: "empty host", change: { $0.nodes[0].endpoint = "tcp://:5555" }, field: "nodes[0].endpoint", says: "host"),
        Case(label: "space in host", change: { $0.nodes[0].endpoint = "tcp://pi left:5555" }, field: "nodes[0].endpoint", says: "host"),
        Case(label: "duplicate endpoint", change: { $0.nodes[2].endpoint = "tcp://PI-LEFT.local:5555" }, field: "nodes[2].endpoint", says: "nodes[0]"),
        Case(label: "empty camera list", change: { $0.nodes[1].cameras = [] }, field: "nodes[1].cameras", says: "empty"),
        Case(label: "bad camera name", change: { $0.nodes[1].cameras = ["cam0", "cam/1"] }, field: "nodes[1].cameras[1]", says: "\"cam/1\""),
        Case(label: "camera twice", change: { $0.nodes[1].cameras = ["cam0", "cam0"] }, field: "nodes[1].cameras[1]", says: "twice"),
        Case(label: "fps 0", change: { $0.take.fps = 0 }, field: "take.fps", says: "between 1 and 240"),
        Case(label: "fps 241", change: { $0.take.fps = 241 }, field: "take.fps", says: "241"),
        Case(label: "size without x", change: { $0.take.size = "1280" }, field: "take.size", says: "WxH"),
        Case(label: "size zero", change: { $0.take.size = "0x720" }, field: "take.size", says: "WxH"),
        Case(label: "size negative", change: { $0.take.size = "-1x720" }, field: "take.size", says: "WxH"),
        Case(label: "size three parts", change: { $0.take.size = "1x2x3" }, field: "take.size", says: "WxH"),
        Case(label: "repeat_seconds not finite", change: { $0.pressure.repeatSeconds = .infinity }, field: "pressure.repeat_seconds",
             says: "between 0 and 86400"),
        Case(label: "restore_seconds negative", change: { $0.pressure.restoreSeconds = -1 }, field: "pressure.restore_seconds",
             says: "between 0 and 86400 (got -1.0)"),
        Case(label: "codec", change: { $0.take.unknownCodec = "prores" }, field: "take.codec", says: "mjpeg, ffv1 or h264"),
        Case(label: "take name", change: { $0.take.name = "a/b" }, field: "take.name", says: "take name"),
        Case(label: "take name too long", change: { $0.take.name = String(repeating: "t", count: 42) }, field: "take.name", says: "longer"),
        Case(label: "empty takes_dir", change: { $0.take.takesDir = "" }, field: "take.takes_dir", says: "empty"),
        Case(label: "pinned node without the coordinator's cert", change: { $0.nodes[1].publicKey = String(repeating: "a", count: 40) },
             field: "nodes[1].public_key", says: "no security.cert"),
        Case(label: "security without a pinned node", change: { s in
            s.security = .init(cert: "c.key_secret")
            for i in s.nodes.indices where i != 2 { s.nodes[i].publicKey = String(repeating: "a", count: 40) }
        }, field: "nodes[2]", says: "has no public_key"),
        Case(label: "public_key and cert both", change: { s in
            s.security = .init(cert: "c.key_secret")
            for i in s.nodes.indices { s.nodes[i].publicKey = String(repeating: "a", count: 40) }
            s.nodes[0].cert = "n.key"
        }, field: "nodes[0].cert", says: "both"),
    ]

    @Test(arguments: cases)
    func eachProblemNamesItsField(_ c: Case) throws {
        var spec = Self.good
        c.change(&spec)
        let fault = try #require(spec.fault())
        #expect(fault.field == c.field)
        #expect(fault.sentence.contains(c.field), "\(fault.sentence)")
        #expect(fault.sentence.contains(c.says), "\(fault.sentence)")
        #expect(spec.problem() == fault.sentence)
        // One sentence: no line breaks.
        #expect(!fault.sentence.contains("\n"))
    }

    @Test(arguments: ["tcp://h:1", "tcp://10.1.2.3:5555", "tcp://node-7.rig.local:65535", "tcp://[fe80::1]:5555", "tcp://eth0:5555"])
    func goodEndpoints(_ endpoint: String) {
        #expect(RigSpec.endpointProblem(endpoint) == nil)
    }

    @Test(arguments: ["", "tcp://", "tcp://h", "tcp://h:", "udp://h:1", "h:1", "tcp://h:1/x", "tcp://[::1:5555", "tcp://h:-1",
                      "tcp://h:5555 ", "ipc:///tmp/x", "tcp://user@h:1"])
    func badEndpoints(_ endpoint: String) {
        #expect(RigSpec.endpointProblem(endpoint) != nil)
    }

    @Test func aTakeCodecNamingNoCodecIsKeptForItsProblemSentence() throws {
        let take = try JSONDecoder().decode(RigSpec.TakeDefaults.self, from: Data(#"{"codec": "prores", "fps": 25}"#.utf8))
        #expect(take.codec == nil && take.unknownCodec == "prores")
        var spec = Self.good
        spec.take = take
        #expect(spec.fault()?.field == "take.codec")
        #expect(spec.problem() == "take.codec must be mjpeg, ffv1 or h264 (got \"prores\").")
        let h264 = try JSONDecoder().decode(RigSpec.TakeDefaults.self, from: Data(#"{"codec": "h264"}"#.utf8))
        #expect(h264.codec == .h264 && h264.unknownCodec == nil)
    }

    @Test func sizes() {
        #expect(RigSpec.parseSize("640x480")! == (640, 480))
        #expect(RigSpec.parseSize("1920X1080")! == (1920, 1080))
        for bad in ["", "x", "640x", "x480", "640*480", "640x480x1", "６40x480", "+640x480", "640 x 480", "99999x1"] {
            #expect(RigSpec.parseSize(bad) == nil, "\(bad)")
        }
    }

    @Test func knownKeysFollowTheCodingKeys() {
        #expect(RigSpec.knownKeys[""] == ["version", "nodes", "take", "pressure", "collect", "security"])
        #expect(RigSpec.knownKeys["security"] == ["cert"])
        #expect(RigSpec.knownKeys["nodes[].cameras[]"] == ["name", "priority", "max_fps", "size", "controls"])
        #expect(RigSpec.knownKeys["nodes[].cameras[].controls"] == ["exposure_us", "gain_db", "white_balance_k", "focus"])
        #expect(RigSpec.knownKeys["pressure"] == ["serious", "critical", "slow_record_every", "repeat_seconds", "restore_seconds"])
        #expect(RigSpec.knownKeys["nodes[]"] == ["name", "endpoint", "cameras", "public_key", "cert"])
        #expect(RigSpec.knownKeys["take"] == ["fps", "size", "codec", "name", "takes_dir", "audio", "deliver"])
    }
}

@Suite struct RepeatLimiterTests {
    @Test func theFirstOfAKindIsLoggedThenOnePerIntervalWithTheCountHeldBack() {
        var limiter = RepeatLimiter(interval: .microseconds(60), capacity: 8)
        #expect(limiter.admit("a", now: 0) == .log(heldBack: 0))
        for t in 1..<60 { #expect(limiter.admit("a", now: Int64(t)) == .holdBack) }
        #expect(limiter.admit("b", now: 30) == .log(heldBack: 0))
        #expect(limiter.admit("a", now: 60) == .log(heldBack: 59))
        #expect(limiter.admit("a", now: 61) == .holdBack)
    }

    @Test func itsIntervalIsCountedInWholeMicroseconds() {
        #expect(Duration.seconds(60).microseconds == 60_000_000)
        #expect(Duration.nanoseconds(1_999).microseconds == 1)
        #expect(Duration.milliseconds(-3).microseconds == -3_000)
        #expect(Duration.seconds(Int64.max).microseconds == .max)
    }

    @Test func everNewKindsCannotGrowItPastItsCapacity() {
        var limiter = RepeatLimiter(interval: .microseconds(60), capacity: 8)
        for i in 0..<10_000 { _ = limiter.admit("peer-\(i)", now: Int64(i)) }
        #expect(limiter.kinds == 8)
        // The newest kinds are the ones remembered.
        #expect(limiter.admit("peer-9999", now: 10_000) == .holdBack)
    }
}
