import CoordCore
import CoordWire
import Foundation
import Logging
import Capture
import ScriptedCameras
import Testing
@testable import NodeAgent

/// The node side of V4L2 cameras without a camera: flags, configuration checks, the listing, and a node agent
/// whose devices are a scripted webcam (`V4L2Access.scripted`).
@Suite struct V4L2NodeTests {
    /// A scripted rig of devices written to a temporary JSON file.
    private func access(_ devices: String) throws -> (V4L2Access, URL) {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("v4l2-script-\(UUID().uuidString).json")
        try Data("{\"devices\": {\(devices)}}".utf8).write(to: url)
        return (try V4L2Access.scripted(url: url, seed: 3), url)
    }

    @Test func v4l2FlagsNameACameraAndItsDevice() throws {
        #expect(try V4L2CameraEntry.parse(["cam0=/dev/video0", " top=/dev/v4l/by-id/usb-Logitech-video-index0 "]) == [
            V4L2CameraEntry(name: "cam0", device: "/dev/video0"),
            V4L2CameraEntry(name: "top", device: "/dev/v4l/by-id/usb-Logitech-video-index0"),
        ])
        for bad in ["cam0", "=/dev/video0", "cam0=", "cam0=video0"] {
            let error = #expect(throws: SyntheticCameraSpecError.self) { try V4L2CameraEntry.parse([bad]) }
            #expect(error?.option == "--v4l2" && error?.description.contains("\"\(bad)\"") == true)
        }
    }

    @Test func aNodeNeedsACameraOfEitherKindAndUniqueNames() {
        var config = NodeConfiguration(name: "n1", endpoint: "", staging: URL(fileURLWithPath: "/tmp"), syntheticCameras: [])
        #expect(config.problem() == "node n1 has no cameras: give --synthetic NAME[,NAME…], --v4l2 NAME=/dev/videoN or --genicam NAME=DEVICE_ID.")
        config.v4l2Cameras = [V4L2CameraEntry(name: "cam0", device: "/dev/video0")]
        #expect(config.problem() == nil)
        config.syntheticCameras = ["cam0"]
        #expect(config.problem() == "camera names must be unique on node n1.")
        config.syntheticCameras = ["synth"]
        #expect(config.problem() == nil && config.cameraNames == ["synth", "cam0"])
        config.v4l2Cameras.append(V4L2CameraEntry(name: "bad name", device: "/dev/video2"))
        #expect(config.problem() != nil)
    }

    @Test func theListingSaysWhatItFoundAndWhyItSkippedTheRest() throws {
        let (scripted, url) = try access(#""/dev/video0": {}, "/dev/video1": {"profile": "metadata-node"}, "/dev/video10": {"openError": "EBUSY"}"#)
        defer { try? FileManager.default.removeItem(at: url) }
        let root = try FakeRoot()
        defer { root.remove() }
        let lines = CameraListing.lines(access: scripted, probe: root.probe)
        #expect(lines.filter { $0.hasPrefix("/dev/") } == ["/dev/video0", "/dev/video1", "/dev/video10"])
        #expect(lines.contains("  skipped: /dev/video10 is busy (another program is using the camera)"))
        #expect(lines.last == "1 camera(s) coord can record from: /dev/video0; use --v4l2 NAME=DEVICE")

        let (empty, emptyURL) = try access("")
        defer { try? FileManager.default.removeItem(at: emptyURL) }
        #expect(CameraListing.lines(access: empty, probe: root.probe) == ["no cameras found (the V4L2 script lists no devices)"])
    }

    @Test func aNodeDeclaresItsV4L2CameraAndTheUSBBusItSitsOn() throws {
        let (scripted, url) = try access(#""/dev/video0": {}"#)
        defer { try? FileManager.default.removeItem(at: url) }
        let controller = "sys/devices/pci0000:00/0000:00:14.0"
        let root = try FakeRoot(files: [
            "\(controller)/usb1/busnum": "1\n", "\(controller)/usb1/speed": "480\n",
            "\(controller)/usb1/1-1/busnum": "1\n", "\(controller)/usb1/1-1/speed": "480\n",
        ], links: [
            "sys/class/video4linux/video0/device": "../../../devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0",
            "sys/bus/usb/devices/usb1": "../../../devices/pci0000:00/0000:00:14.0/usb1",
        ])
        defer { root.remove() }
        try FileManager.default.createDirectory(at: root.url.appendingPathComponent("\(controller)/usb1/1-1/1-1:1.0"),
                                                withIntermediateDirectories: true)
        var config = NodeConfiguration(name: "n1", endpoint: "", staging: root.url.appendingPathComponent("staging"),
                                       syntheticCameras: ["synth"])
        config.v4l2Cameras = [V4L2CameraEntry(name: "cam0", device: "/dev/video0")]
        config.v4l2 = scripted
        config.systemRoot = root.url
        let agent = try NodeAgent(configuration: config, logger: Logger(label: "test"))
        let reply = agent.handle(Wire.encode(Wire.envelope(1, .hello(Coord_V1_Hello()))), receivedLocal: 0)
        guard case .helloReply(let hello) = reply.body else {
            Issue.record("expected a hello reply, got \(String(describing: reply.body))")
            return
        }
        #expect(hello.cameras.map(\.name) == ["synth", "cam0"])
        let cam = hello.cameras[1]
        #expect(cam.source == "v4l2" && cam.device == "/dev/video0" && cam.bus == "usb1")
        #expect(cam.formats.first.map { "\($0.pixelFormat) \($0.width)x\($0.height)" } == "MJPG 640x480")
        #expect(hello.resources.buses.map(\.id) == ["usb1"])
    }

    @Test func aNodeWithAMissingOrUnusableCameraDoesNotStart() throws {
        let (scripted, url) = try access(#""/dev/video1": {"profile": "metadata-node"}"#)
        defer { try? FileManager.default.removeItem(at: url) }
        for (device, sentence) in [
            ("/dev/video7", "camera cam0: /dev/video7 does not exist (is the camera plugged in?)."),
            ("/dev/video1", "camera cam0: /dev/video1 (HD Pro Webcam C920) is not a video capture node (a UVC webcam's second node carries only metadata)."),
        ] {
            var config = NodeConfiguration(name: "n1", endpoint: "", staging: URL(fileURLWithPath: "/tmp"), syntheticCameras: [])
            config.v4l2Cameras = [V4L2CameraEntry(name: "cam0", device: device)]
            config.v4l2 = scripted
            let error = #expect(throws: NodeFailure.self) { _ = try NodeAgent(configuration: config, logger: Logger(label: "test")) }
            #expect(error?.message == sentence)
        }
    }
}
