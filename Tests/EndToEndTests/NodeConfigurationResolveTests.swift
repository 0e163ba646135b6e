// coord-node's settings without a process: the flags over the node file, resolved into the agent's configuration
// or one sentence (NodeConfiguration.resolve).
import CoordCore
import Foundation
import Testing
@testable import NodeAgent

private func file(_ yaml: String) throws -> NodeFile {
    try NodeFile.parse("version: 1\n" + yaml, path: "node.yaml").file
}

private func flags(_ edit: (inout NodeFlags) -> Void = { _ in }) -> NodeFlags {
    var f = NodeFlags()
    f.name = "n1"
    f.endpoint = "tcp://127.0.0.1:*"
    f.staging = "/tmp/coord-node-resolve"
    f.synthetic = "cam0"
    edit(&f)
    return f
}

private func refusal(_ flags: NodeFlags, _ file: NodeFile? = nil) -> NodeStartFailure? {
    do {
        _ = try NodeConfiguration.resolve(flags: flags, file: file)
        return nil
    } catch {
        return error
    }
}

@Suite struct NodeConfigurationResolveTests {
    @Test func flagsAloneGiveTheirSettingsAndTheDefaults() throws {
        let c = try NodeConfiguration.resolve(flags: flags { $0.seed = 7; $0.syntheticOpenMilliseconds = -5 }, file: nil)
        #expect(c.name == "n1")
        #expect(c.endpoint == "tcp://127.0.0.1:*")
        #expect(c.staging.path == "/tmp/coord-node-resolve")
        #expect(c.syntheticCameras == ["cam0"])
        #expect(c.seed == 7)
        #expect(c.syntheticOpenMilliseconds == 0)
        #expect(c.discoveryPort == 5710)
        #expect(c.metrics == nil)
        #expect(c.security == nil)
        #expect(c.calibrationFile.path == "/tmp/coord-node-resolve/calibration.json")
    }

    @Test func aFlagWinsOverTheFileAndTheFileFillsTheRest() throws {
        let nodeFile = try file("""
            name: from-file
            endpoint: tcp://127.0.0.1:5999
            staging: /srv/staging
            metrics: 127.0.0.1:9710
            discovery_port: 0
            keep_after_collect: true
            cameras:
              - {name: filecam, synthetic: true}
            """)
        var given = NodeFlags()
        given.name = "from-flag"
        let c = try NodeConfiguration.resolve(flags: given, file: nodeFile)
        #expect(c.name == "from-flag")
        #expect(c.endpoint == "tcp://127.0.0.1:5999")
        #expect(c.staging.path == "/srv/staging")
        #expect(c.syntheticCameras == ["filecam"])
        #expect(c.metrics == MetricsAddress(host: "127.0.0.1", port: 9710))
        #expect(c.discoveryPort == 0)
        #expect(c.keepAfterCollect)
    }

    @Test func camerasAndMicrophonesComeFromTheFlagsOrTheFileNeverAMix() throws {
        let nodeFile = try file("""
            cameras:
              - {name: filecam, synthetic: true, bus: usb1}
            buses: {usb1: 5000}
            audio:
              - {name: clicks, synthetic: true}
            """)
        let fromFile = try NodeConfiguration.resolve(flags: flags { $0.synthetic = nil }, file: nodeFile)
        #expect(fromFile.syntheticCameras == ["filecam"])
        #expect(fromFile.syntheticCameraBus == ["filecam": "usb1"])
        #expect(fromFile.micNames == ["clicks"])
        let fromFlags = try NodeConfiguration.resolve(flags: flags { $0.syntheticMic = "mic0" }, file: nodeFile)
        #expect(fromFlags.syntheticCameras == ["cam0"])
        #expect(fromFlags.syntheticBuses.isEmpty)
        #expect(fromFlags.micNames == ["mic0"])
    }

    @Test func insecureAndKeepAreOnWhenEitherSaysSo() throws {
        let nodeFile = try file("insecure: true\n")
        let c = try NodeConfiguration.resolve(flags: flags { $0.endpoint = "tcp://0.0.0.0:*"; $0.keepAfterCollect = true }, file: nodeFile)
        #expect(c.insecure)
        #expect(c.keepAfterCollect)
    }

    @Test func everyBadSettingIsOneSentenceWithStatusTwo() {
        let cases: [(NodeFlags, String)] = [
            (flags { $0.syntheticGrain = 65 }, "--synthetic-grain must be between 0 and 64"),
            (flags { $0.cert = "n1.key_secret" }, "--cert needs --authorized"),
            (flags { $0.authorized = "keys" }, "--authorized needs --cert"),
            (flags { $0.metrics = "nowhere" }, "--metrics must be HOST:PORT"),
            (flags { $0.synthetic = "a@nobus" }, "--synthetic"),
            (flags { $0.synthetic = nil }, "has no cameras"),
            (flags { $0.synthetic = "cam0,cam0" }, "unique"),
            (flags { $0.name = "a/b" }, "node"),
            (flags { $0.endpoint = "tcp://0.0.0.0:5710" }, "without keys"),
            (flags { $0.v4l2 = ["novideo"] }, "--v4l2"),
        ]
        for (given, words) in cases {
            guard let failure = refusal(given) else {
                Issue.record("accepted \(given), expected a refusal saying \(words)")
                continue
            }
            #expect(failure.status == 2)
            #expect(failure.sentence.contains(words), "\(failure.sentence)")
            #expect(!failure.sentence.contains("\n"))
        }
    }

    @Test func theFilesCertNeedsItsAuthorizedToo() throws {
        // keys: needs both in the file; flags naming one of them set both aside.
        let nodeFile = try file("keys: {cert: /nonexistent/n1.key_secret, authorized: /nonexistent/keys}\n")
        let failure = try #require(refusal(flags(), nodeFile))
        #expect(failure.sentence.contains("n1.key_secret"), "\(failure.sentence)")
        let halfFlags = try #require(refusal(flags { $0.authorized = "/nonexistent/keys" }, nodeFile))
        #expect(halfFlags.sentence.contains("--authorized needs --cert"))
    }
}
