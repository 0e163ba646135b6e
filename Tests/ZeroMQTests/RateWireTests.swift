// Rational frame rates on the wire (CONTRACT §13): a 29.97 take's arm, configure and preview decode at the node into
// the exact grid and rate; an older peer's integer fps still means itself; a rational no node can run is refused
// in one sentence naming its field.
import CoordCore
import CoordWire
import Foundation
import Testing

private let ntsc = FrameRate(numerator: 30000, denominator: 1001)!
private let clock = ClockMapping(offsetMicroseconds: 1_250, ratePPM: 12.5, referenceLocal: 9_000_000, uncertaintyMicroseconds: 40)

private func decoded(_ body: Envelope.OneOf_Body?) throws(NodeFailure) -> NodeRequest {
    var e = Wire.envelope(9, .statusRequest(Coord_V1_StatusRequest()))
    e.body = body
    return try Wire.request(Wire.parse(Wire.encode(e)))
}

private func arm(grid: FrameGrid, timecode: String, _ edit: (inout Coord_V1_Arm) -> Void = { _ in }) -> Envelope.OneOf_Body {
    guard case .arm(var m) = CoordRequest.arm(takeID: "t1", clock: clock, grid: grid, timecode: timecode, preview: .off) else {
        fatalError("arm builds an arm")
    }
    edit(&m)
    return .arm(m)
}

@Suite struct RateWireTests {
    let grid = FrameGrid(t0: 5_000_000, rate: FrameRate(numerator: 30000, denominator: 1001)!)

    @Test func aDropFrameArmDecodesToTheExactGrid() throws {
        guard case .arm(let armed) = try decoded(arm(grid: grid, timecode: "01:00:00;00")) else {
            Issue.record("not an arm"); return
        }
        #expect(armed.grid == grid && armed.grid.rationalRate == ntsc && armed.timecode == "01:00:00;00")
        #expect(armed.grid.instant(ofGroup: 2_589_410) == grid.instant(ofGroup: 2_589_410))
    }

    @Test func aCamerasRationalRateSurvivesConfigureAndAnOlderPeersFpsIsItself() throws {
        var settings = CameraSettings(camera: "cam0", ordinal: 0, width: 640, height: 480, fps: 30, codec: .mjpeg)
        settings.setRate(ntsc)
        guard case .configure(_, let cameras) = try decoded(CoordRequest.configure(takeID: "t1", cameras: [settings])) else {
            Issue.record("not a configure"); return
        }
        #expect(cameras == [settings] && cameras[0].rate == ntsc && cameras[0].fps == 30)
        #expect(abs(cameras[0].capturedFPS - 30000.0 / 1001) < 1e-9)
        var old = settings.wire
        (old.fpsNum, old.fpsDen) = (0, 0)
        #expect(try CameraSettings(wire: old).rate == FrameRate(30))
    }

    @Test func aRationalNoNodeCanRunIsOneSentence() {
        func refusal(_ body: Envelope.OneOf_Body) -> String? {
            do { _ = try decoded(body); return nil } catch { return error.message }
        }
        // Another period than the rational's, a rate over 1000 fps, a denominator of a million and one.
        for edit: (inout Coord_V1_Arm) -> Void in [{ $0.framePeriodUs = 33_333 }, { ($0.fpsNum, $0.fpsDen) = (2_000_000, 1001) },
                                                    { ($0.fpsNum, $0.fpsDen) = (30, 1_000_001) }, { $0.fpsNum = 0 }] {
            let message = refusal(arm(grid: grid, timecode: "", edit))
            #expect(message?.contains("Arm.fps_num/fps_den") == true, "\(message ?? "accepted")")
            #expect(message?.contains("\n") == false)
        }
        // A drop-frame label at an integer rate, and a non-drop one at 29.97.
        #expect(refusal(arm(grid: FrameGrid(t0: 0, rate: FrameRate(30)), timecode: "01:00:00;00"))?.contains("HH:MM:SS:FF at 30 fps") == true)
        #expect(refusal(arm(grid: grid, timecode: "01:00:00:00"))?.contains("HH:MM:SS;FF at 30000/1001 fps") == true)
    }
}
