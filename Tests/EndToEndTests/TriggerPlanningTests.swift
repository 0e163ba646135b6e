import CoordCore
import CoordWire
import Coordinator
import Foundation
import Testing

/// `coord plan` (and start-take, which plans alike) on a triggered camera (CONTRACT §17, issue 38): the node's
/// handshake says which output exposes it and its AcquisitionFrameRate limit, and a rate it cannot follow at one
/// frame per pulse is one sentence naming the camera.
@Suite struct TriggerPlanningTests {
    private func hello(trigger: CameraCapabilities.Triggered?) -> RigPlanner.Hello {
        var camera = CameraCapabilities(name: "mv0", source: "genicam", device: "Fake-1", formats: [
            CameraFormat(pixelFormat: "mono8", width: 640, height: 480, minFramePeriodMicroseconds: 10_000, maxFramePeriodMicroseconds: 1_000_000),
        ], codecs: [.mjpeg])
        camera.trigger = trigger
        var reply = Coord_V1_HelloReply()
        reply.node = "n1"
        // Through the wire as the handshake carries it.
        reply.cameras = [camera.wire]
        return RigPlanner.Hello(endpoint: "tcp://127.0.0.1:5710", reply: reply)
    }

    private func request(fps: Int, exposure: Int? = nil) -> TakeRequest {
        var r = TakeRequest(name: "t", seconds: 1, fps: fps, width: 640, height: 480, codec: .mjpeg,
                            takesDirectory: URL(fileURLWithPath: "/tmp"))
        if let exposure {
            r.camerasByEndpoint["tcp://127.0.0.1:5710"] = [RigSpec.Camera(name: "mv0", controls: CameraControls(exposureMicroseconds: exposure))]
        }
        return r
    }

    private func refusal(_ hello: RigPlanner.Hello, _ request: TakeRequest) -> String? {
        do {
            _ = try RigPlanner.plannedNodes([hello], request: request)
            return nil
        } catch {
            return "\(error)"
        }
    }

    @Test func theHandshakeCarriesTheBindingAndTheLimit() {
        let limited = CameraCapabilities.Triggered(output: "sync", readoutMicroseconds: 3_000, maximumFrameRate: 25.5)
        #expect(CameraCapabilities(wire: hello(trigger: limited).reply.cameras[0]).trigger == limited)
        #expect(CameraCapabilities(wire: hello(trigger: nil).reply.cameras[0]).trigger == nil)
    }

    @Test func aRateAboveTheCamerasLimitIsRefusedNamingIt() throws {
        let limited = hello(trigger: .init(output: "sync", maximumFrameRate: 25.5))
        let sentence = try #require(refusal(limited, request(fps: 30)))
        #expect(sentence.contains("camera n1/mv0 cannot follow a trigger at 30 fps") && sentence.contains("at most 25.5 fps"), "\(sentence)")
        #expect(refusal(limited, request(fps: 25)) == nil)
        // The same rate on a free-running camera is not the trigger's business.
        #expect(refusal(hello(trigger: nil), request(fps: 30)) == nil)
    }

    @Test func anExposurePlusReadoutLongerThanThePeriodIsRefused() throws {
        let slowReadout = hello(trigger: .init(output: "sync", readoutMicroseconds: 8_000))
        let sentence = try #require(refusal(slowReadout, request(fps: 40, exposure: 20_000)))
        #expect(sentence.contains("camera n1/mv0") && sentence.contains("exposure (20000 µs) plus readout (8000 µs)")
                && sentence.contains("frame period (25000 µs)"), "\(sentence)")
        #expect(refusal(slowReadout, request(fps: 40, exposure: 15_000)) == nil)
    }
}
