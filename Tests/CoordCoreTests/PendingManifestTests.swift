import Foundation
import Testing
@testable import CoordCore

@Suite struct PendingManifestTests {
    let clock = TakeManifest.ClockFigures(offsetMicroseconds: 12, driftPPM: 0.5, uncertaintyMicroseconds: 3)

    func pending() -> PendingManifest {
        let a = [CameraSettings(camera: "cam0", ordinal: 0, width: 640, height: 480, fps: 30, codec: .mjpeg),
                 CameraSettings(camera: "cam1", ordinal: 1, width: 640, height: 480, fps: 30, codec: .mjpeg, recordEvery: 2)]
        let b = [CameraSettings(camera: "cam0", ordinal: 2, width: 1280, height: 720, fps: 30, codec: .ffv1)]
        var p = PendingManifest(takeID: "20260101T000000Z-x-000001", name: "x", grid: FrameGrid(t0: 1_000_000, periodMicroseconds: 33_333),
                                groups: 90, startWallclock: "2026-01-01T00:00:00Z",
                                nodes: [.init(name: "a", cameras: a, clock: clock), .init(name: "b", cameras: b, clock: clock)])
        p.timecode = "00:00:00:00"
        return p
    }

    @Test func everyPlannedCameraWithItsSettingsAndNoFilesYet() {
        let m = pending().manifest
        #expect(m.status == .partial)
        #expect(m.cameras.map { "\($0.node)/\($0.camera)#\($0.ordinal)" } == ["a/cam0#0", "a/cam1#1", "b/cam0#2"])
        #expect(m.cameras.allSatisfy { $0.files.isEmpty && $0.frames == 0 && $0.clock == clock })
        #expect(m.cameras[1].recordEvery == 2)
        #expect(m.t0Microseconds == 1_000_000 && m.framePeriodMicroseconds == 33_333 && m.groups == 90)
        #expect(m.timecode == "00:00:00:00")
        #expect(m.collection?.state == .pending)
        #expect(m.audio == nil && m.audioRequired == nil)
    }

    @Test func theNodesFiguresPriorityControlsAndWhoDisabledACamera() {
        var p = pending()
        var status = NodeStatus(node: "a", state: .finished, cameras: [NodeStatus.Camera(camera: "cam0")])
        status.cameras[0].held = 7
        status.cameras[0].timestampNoiseMicroseconds = 1.234
        status.cameras[0].centerUncertaintyMicroseconds = 5.678
        var mic = NodeStatus.Mic(mic: "mic0")
        mic.rateErrorPPM = 1.2345
        mic.error = "unplugged"
        status.mics = [mic]
        p.finalStatus = ["a": status]
        p.controls = ["a/cam1": CameraControls(exposureMicroseconds: 5000)]
        var slow = PressureResponder.Camera(node: "a", camera: "cam0", priority: 3)
        slow.disabled = true
        p.responderCameras = [slow]
        p.disabledElsewhere = ["b/cam0"]
        p.audioRequired = true
        let m = p.manifest
        #expect(m.cameras[0].held == 7 && m.cameras[0].priority == 3 && m.cameras[0].disabled == true && m.cameras[0].disabledBy == nil)
        #expect(m.cameras[0].timestampNoiseMicroseconds == 1.2 && m.cameras[0].centerUncertaintyMicroseconds == 5.7)
        #expect(m.cameras[1].controls == CameraControls(exposureMicroseconds: 5000) && m.cameras[1].disabled == nil)
        #expect(m.cameras[2].disabled == true && m.cameras[2].disabledBy == "another coordinator or peer")
        #expect(m.audio?.map(\.mic) == ["mic0"] && m.audio?[0].ended == "unplugged" && m.audio?[0].rateErrorPPM == 1.23)
        #expect(m.audioRequired == true)
    }

    @Test func eachCamerasAndMicrophonesDeviceAndNullFieldsLeftOut() throws {
        var p = pending()
        var status = NodeStatus(node: "a", state: .finished, cameras: [])
        status.mics = [NodeStatus.Mic(mic: "mic0")]
        p.finalStatus = ["a": status]
        p.devices = ["a/cam0": DeviceIdentity(driver: "vivid", card: "vivid", busInfo: "platform:vivid-000"), "a/cam1": .synthetic]
        p.micDevices = ["a/mic0": "Loopback"]
        let m = p.manifest
        #expect(m.cameras.map(\.device?.driver) == ["vivid", "synthetic", nil])
        #expect(m.audio?[0].device == "Loopback")
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let json = try #require(String(data: try encoder.encode(m), encoding: .utf8))
        #expect(json.contains(#""device":{"bus_info":"platform:vivid-000","card":"vivid","driver":"vivid"}"#))
        #expect(json.contains(#""device":{"driver":"synthetic"}"#))
        #expect(json.contains(#""device":"Loopback""#))
        #expect(try JSONDecoder().decode(TakeManifest.self, from: Data(json.utf8)).cameras[0].device?.busInfo == "platform:vivid-000")
    }

    @Test func aMicrophoneLostBeforeGroupZeroIsListedApartWithoutAFile() throws {
        var p = pending()
        var status = NodeStatus(node: "a", state: .finished, cameras: [])
        var lost = NodeStatus.Mic(mic: "mic0")
        lost.finished = true
        lost.error = "unplugged"
        var short = NodeStatus.Mic(mic: "mic1")
        short.finished = true
        short.frames = 480
        short.error = "unplugged"
        status.mics = [lost, short]
        p.finalStatus = ["a": status]
        p.micDevices = ["a/mic0": "USB"]
        let m = p.manifest
        #expect(m.audio?.map(\.mic) == ["mic1"] && m.audio?[0].ended == "unplugged")
        #expect(m.audioLost == [TakeManifest.LostMicrophone(node: "a", mic: "mic0", ended: "unplugged", device: "USB")])
        let json = try JSONEncoder().encode(m)
        #expect(String(decoding: json, as: UTF8.self).contains(#""audio_lost":[{"#))
        #expect(try JSONDecoder().decode(TakeManifest.self, from: json).audioLost?.first?.mic == "mic0")
        #expect(pending().manifest.audioLost == nil)
    }

    @Test func eventsInTimeOrder() {
        var p = pending()
        p.events = [.init(tMicroseconds: 30, node: "a", camera: "", kind: .start, detail: "late"),
                    .init(tMicroseconds: 10, node: "b", camera: "", kind: .fit, detail: "early")]
        #expect(p.manifest.events.map(\.detail) == ["early", "late"])
    }
}

@Suite struct HandshakeAnswerTests {
    @Test func oneNameForEveryNode() {
        let answers = [HandshakeAnswer(endpoint: "tcp://a:1", node: "a", instanceID: "1", host: "h1"),
                       HandshakeAnswer(endpoint: "tcp://b:1", node: "b", instanceID: "2", host: "h2")]
        #expect(HandshakeAnswer.duplicateProblem(answers) == nil)
        #expect(HandshakeAnswer.duplicateProblem([]) == nil)
    }

    @Test func theSameNodeListedTwice() {
        let answers = [HandshakeAnswer(endpoint: "tcp://127.0.0.1:5710", node: "a", instanceID: "x", host: "h"),
                       HandshakeAnswer(endpoint: "tcp://localhost:5710", node: "a", instanceID: "x", host: "h")]
        #expect(HandshakeAnswer.duplicateProblem(answers)
                == "the rig file lists node a twice: tcp://127.0.0.1:5710 and tcp://localhost:5710 reach the same node (on host h); list it once.")
    }

    @Test func twoNodesWithOneName() {
        let answers = [HandshakeAnswer(endpoint: "tcp://p:1", node: "a", instanceID: "x", host: "p"),
                       HandshakeAnswer(endpoint: "tcp://q:1", node: "a", instanceID: "y", host: "q")]
        #expect(HandshakeAnswer.duplicateProblem(answers)
                == "two nodes are both named a (tcp://p:1 on host p and tcp://q:1 on host q); every node needs its own name.")
        // No instance id (an older node): never taken for the same process.
        let older = answers.map { HandshakeAnswer(endpoint: $0.endpoint, node: $0.node, instanceID: "", host: $0.host) }
        #expect(HandshakeAnswer.duplicateProblem(older)?.hasPrefix("two nodes are both named a") == true)
    }
}
