// coord-node's wiring without a process: the command line read into NodeFlags, and buildNode's node and services.
import CoordCore
import Foundation
import Logging
import NodeAgent
import Testing
@testable import NodeCommands

private func staging() -> URL {
    FileManager.default.temporaryDirectory.appendingPathComponent("coord-build-node-\(UUID().uuidString)", isDirectory: true)
}

private func configuration(_ edit: (inout NodeConfiguration) -> Void = { _ in }) -> NodeConfiguration {
    var c = NodeConfiguration(name: "n1", endpoint: "tcp://127.0.0.1:*", staging: staging(), syntheticCameras: ["cam0"])
    c.previewEndpoint = ""
    edit(&c)
    return c
}

private func refusal(_ c: NodeConfiguration) -> NodeStartFailure? {
    do {
        _ = try buildNode(c, logger: Logger(label: "test"), onReady: { _ in })
        return nil
    } catch {
        return error
    }
}

@Suite struct BuildNodeTests {
    @Test func theCommandLineIsReadIntoFlagsAsGiven() throws {
        let serve = try Serve.parse(["--name", "n1", "--synthetic", "cam0,cam1", "--v4l2", "usb=/dev/video0", "--seed", "9",
                                     "--metrics", "127.0.0.1:0", "--keep-after-collect", "--clock-offset-us=-250"])
        var expected = NodeFlags()
        expected.name = "n1"
        expected.synthetic = "cam0,cam1"
        expected.v4l2 = ["usb=/dev/video0"]
        expected.seed = 9
        expected.metrics = "127.0.0.1:0"
        expected.keepAfterCollect = true
        expected.clockOffsetMicroseconds = -250
        #expect(serve.flags == expected)
    }

    @Test func aNodeIsBuiltWithItsControlSocketAndMetricsWhenAskedFor() throws {
        let plain = configuration()
        let node = try buildNode(plain, logger: Logger(label: "test"), onReady: { _ in })
        #expect(node.services.count == 1)
        #expect(node.stopSignals.count == 2)
        #expect(FileManager.default.fileExists(atPath: plain.staging.path))
        let supervised = try buildNode(configuration { $0.metrics = MetricsAddress(host: "127.0.0.1", port: 0); $0.parentPID = 1 },
                                       logger: Logger(label: "test"), onReady: { _ in })
        #expect(supervised.services.count == 2)
        // The demo's nodes leave Ctrl-C to their parent.
        #expect(supervised.stopSignals.count == 1)
    }

    @Test func aMachineThatCannotRunTheNodeIsOneSentenceWithStatusOne() throws {
        let blocked = try #require(refusal(configuration { $0.staging = URL(fileURLWithPath: "/dev/null/staging") }))
        #expect(blocked.status == 1)
        #expect(blocked.sentence.contains("cannot create staging directory /dev/null/staging"), "\(blocked.sentence)")
        let missing = try #require(refusal(configuration {
            $0.v4l2Cameras = [V4L2CameraEntry(name: "usb0", device: "/nonexistent/video9")]
        }))
        #expect(missing.status == 1)
        #expect(missing.sentence.contains("usb0"), "\(missing.sentence)")
        #expect(!missing.sentence.contains("\n"))
    }
}
