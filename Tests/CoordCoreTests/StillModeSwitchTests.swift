// A console Snap at another size than the cameras preview at: which cameras switch mode, the rate each runs at for
// the shot, how far ahead the group must lie for the slowest restart, and that the group is one every switched
// sensor delivers; and the request's figures refused as `coord snap`'s are, naming the console's field.
import CoordCore
import Testing

private func offering(_ name: String, source: String = "synthetic", sizes: [(Int, Int)], fastest: Int64 = 16_667) -> CameraCapabilities {
    CameraCapabilities(name: name, source: source, formats: sizes.map {
        CameraFormat(pixelFormat: "yuv420p", width: $0.0, height: $0.1, minFramePeriodMicroseconds: fastest, maxFramePeriodMicroseconds: 1_000_000)
    }, codecs: [.ffv1])
}

private func camera(_ node: String, _ name: String, _ w: Int, _ h: Int, _ caps: CameraCapabilities) -> StillModeSwitch.Camera {
    StillModeSwitch.Camera(node: node, settings: CameraSettings(camera: name, ordinal: 0, width: w, height: h, fps: 30, codec: .ffv1), capabilities: caps)
}

@Suite struct StillModeSwitchTests {
    let usb = offering("cam0", sizes: [(320, 240), (640, 480), (1280, 720), (3840, 2160)])
    let grid = FrameGrid(t0: 1_000_000, periodMicroseconds: 33_333)

    @Test func onlyCamerasPreviewingAtAnotherSizeThanTheStillSwitch() throws {
        let rig = [camera("a", "cam0", 640, 480, usb), camera("a", "cam1", 3840, 2160, usb), camera("b", "cam0", 320, 240, usb)]
        // No size: every still at its preview's size, nothing switches.
        #expect(try StillModeSwitch.switches(rig, plan: SnapPlan(fps: 30), fps: 30).isEmpty)
        // max: the largest mode; the camera already there keeps running.
        let max = try StillModeSwitch.switches(rig, plan: SnapPlan(fps: 30, size: "max"), fps: 30)
        #expect(max.map { "\($0.node)/\($0.camera)" } == ["a/cam0", "b/cam0"])
        #expect(max.allSatisfy { $0.width == 3840 && $0.height == 2160 })
        #expect(max[1].fromWidth == 320 && max[1].fromHeight == 240)
        // An exact size switches every camera not at it, smaller ones too.
        let exact = try StillModeSwitch.switches(rig, plan: SnapPlan(fps: 30, size: "640x480"), fps: 30)
        #expect(exact.map(\.camera) == ["cam1", "cam0"] && exact.map(\.node) == ["a", "b"])
    }

    @Test func aSizeACameraDoesNotOfferIsOneSentenceNamingIt() {
        let rig = [camera("a", "cam0", 640, 480, usb)]
        #expect(throws: SnapProblem("camera a/cam0 has no 1920x1080 mode (it offers 1280x720, 320x240, 3840x2160, 640x480).")) {
            try StillModeSwitch.switches(rig, plan: SnapPlan(fps: 30, size: "1920x1080"), fps: 30)
        }
    }

    @Test func aSwitchedCameraRunsAtARateItsModeOffersUnderThePixelLimitWithEveryShotOnAFrame() throws {
        // 4K at 30 fps is 249 Mpx/s: one group in 5 (6 fps, 50 Mpx/s) for a single shot.
        #expect(StillModeSwitch.recordEvery(for: usb, width: 3840, height: 2160, fps: 30, plan: try SnapPlan(fps: 30)) == 5)
        // A 200 ms burst's stride is 6: k divides it, so 6 (5 does not).
        #expect(StillModeSwitch.recordEvery(for: usb, width: 3840, height: 2160, fps: 30, plan: try SnapPlan(count: 3, everyMilliseconds: 200, fps: 30)) == 6)
        // A small mode runs at the full rate.
        #expect(StillModeSwitch.recordEvery(for: usb, width: 640, height: 480, fps: 30, plan: try SnapPlan(fps: 30)) == 1)
        // A mode whose fastest frame is 90 ms runs one group in 3 at least; a burst whose stride no such k divides has no rate.
        let slow = offering("cam0", sizes: [(3840, 2160)], fastest: 90_000)
        #expect(StillModeSwitch.recordEvery(for: slow, width: 3840, height: 2160, fps: 30, plan: try SnapPlan(fps: 30)) == 5)
        #expect(StillModeSwitch.recordEvery(for: slow, width: 3840, height: 2160, fps: 30, plan: try SnapPlan(count: 2, everyMilliseconds: 100, fps: 30)) == 3)
        #expect(StillModeSwitch.recordEvery(for: slow, width: 3840, height: 2160, fps: 25, plan: try SnapPlan(count: 2, everyMilliseconds: 80, fps: 25)) == nil)
    }

    @Test func aWebcamsJPEGModesCountOnlyForAnMJPEGCodec() throws {
        // A C920: 1920x1080 as MJPG at up to 30 fps, as YUYV only at 5. Recorded raw (ffv1) its still comes from
        // YUYV: one group in 6, never the MJPG rate the node would refuse to open.
        let c920 = CameraCapabilities(name: "cam0", source: "v4l2", formats: [
            CameraFormat(pixelFormat: "YUYV", width: 640, height: 480, minFramePeriodMicroseconds: 33_333, maxFramePeriodMicroseconds: 200_000),
            CameraFormat(pixelFormat: "YUYV", width: 1920, height: 1080, minFramePeriodMicroseconds: 200_000, maxFramePeriodMicroseconds: 200_000),
            CameraFormat(pixelFormat: "MJPG", width: 1920, height: 1080, minFramePeriodMicroseconds: 33_333, maxFramePeriodMicroseconds: 200_000),
        ], codecs: [.ffv1, .mjpeg])
        let raw = try StillModeSwitch.switches([camera("a", "cam0", 640, 480, c920)], plan: SnapPlan(fps: 30, size: "max"), fps: 30)
        #expect(raw.map { [$0.width, $0.height, $0.recordEvery] } == [[1920, 1080, 6]])
        var muxed = camera("a", "cam0", 640, 480, c920)
        muxed.settings.codec = .mjpeg
        let jpeg = try StillModeSwitch.switches([muxed], plan: SnapPlan(fps: 30, size: "max"), fps: 30)
        #expect(jpeg.map { [$0.width, $0.height, $0.recordEvery] } == [[1920, 1080, 2]])  // 15 fps: 31 Mpx/s
        // A webcam whose only mode at a size is JPEG has no raw still there.
        let only = CameraCapabilities(name: "cam0", source: "v4l2", formats: [c920.formats[0], c920.formats[2]], codecs: [.ffv1, .mjpeg])
        #expect(throws: SnapProblem("camera a/cam0 has no 1920x1080 mode (it offers 640x480).")) {
            try StillModeSwitch.switches([camera("a", "cam0", 640, 480, only)], plan: SnapPlan(fps: 30, size: "1920x1080"), fps: 30)
        }
    }

    @Test func theLeadCoversTheSlowestRestartAndOneOfItsFrames() throws {
        let v4l2 = offering("cam1", source: "v4l2", sizes: [(640, 480), (1920, 1080)])
        let rig = [camera("a", "cam0", 640, 480, usb), camera("b", "cam1", 640, 480, v4l2)]
        let switches = try StillModeSwitch.switches(rig, plan: SnapPlan(fps: 30, size: "max"), fps: 30)
        #expect(switches.map(\.source) == ["synthetic", "v4l2"])
        let lead = StillModeSwitch.lead(warm: 7_000, switches: switches, periodMicroseconds: 33_333)
        // The slowest of the two: each camera's restart and lockFrames of its own frames (4K synthetic runs 1 in 5,
        // 1080p V4L2 1 in 2).
        #expect(switches.map(\.recordEvery) == [5, 2])
        let each = switches.map { StillModeSwitch.restartMicroseconds(source: $0.source) + Int64(StillModeSwitch.lockFrames) * 33_333 * Int64($0.recordEvery) }
        #expect(lead == 7_000 + each.max()!)
        #expect(StillModeSwitch.lead(warm: 7_000, switches: [], periodMicroseconds: 33_333) == 7_000)
        #expect(StillModeSwitch.restartMicroseconds(source: "synthetic") < StillModeSwitch.restartMicroseconds(source: "v4l2"))
    }

    @Test func theGroupIsAtLeastTheLeadAheadAndOnEverySwitchedSensorsFrames() throws {
        let rig = [camera("a", "cam0", 640, 480, usb), camera("a", "cam1", 320, 240, offering("cam1", sizes: [(320, 240), (1280, 720)], fastest: 50_000))]
        let switches = try StillModeSwitch.switches(rig, plan: SnapPlan(fps: 30, size: "max"), fps: 30)
        #expect(switches.map(\.recordEvery) == [5, 2])
        for now in [Int64(5_000_000), 5_016_000, 7_777_777] {
            let lead = StillModeSwitch.lead(warm: 7_000, switches: switches, periodMicroseconds: 33_333)
            let group = StillModeSwitch.group(now: now, lead: lead, grid: grid, switches: switches)
            #expect(grid.instant(ofGroup: group) >= now + lead)
            #expect(group % 10 == 0, "group \(group) is not on both sensors' frames (every 5 and every 2)")
            #expect(grid.instant(ofGroup: group) - now - lead < 10 * 33_333)
            #expect(lead >= StillModeSwitch.restartMicroseconds(source: "synthetic") + 14 * 5 * 33_333)
        }
        // No switch: the warm group.
        #expect(StillModeSwitch.group(now: 5_000_000, lead: 7_000, grid: grid, switches: []) == WarmSnap.group(now: 5_000_000, lead: 7_000, grid: grid))
    }

    @Test func theConsolesFiguresAreRefusedAsCoordSnapsNamingTheField() {
        #expect(throws: SnapProblem("a Snap's count must be between 1 and 1000 shots (got 0).")) { try SnapPlan(count: 0, fps: 30, prefix: "a Snap's ") }
        #expect(throws: SnapProblem("a Snap's every 150 ms is not a whole number of frame periods at 30 fps (one frame is 33.333 ms; try 166.667 ms).")) {
            try SnapPlan(count: 2, everyMilliseconds: 150, fps: 30, prefix: "a Snap's ")
        }
        #expect(throws: SnapProblem("a Snap's size must be max or an even WxH from 104x64 to 16384x16384, e.g. 1920x1080 (got big).")) {
            try SnapPlan(fps: 30, size: "big", prefix: "a Snap's ")
        }
        #expect(throws: SnapProblem("a Snap's format must be png, tiff or jpeg (got \"gif\").")) { try SnapPlan(fps: 30, format: "gif", prefix: "a Snap's ") }
        // The command line's flags as before.
        #expect(throws: SnapProblem("--count must be between 1 and 1000 shots (got 0).")) { try SnapPlan(count: 0, fps: 30) }
        // A burst's groups: g0 + k × every / period.
        #expect((try? SnapPlan(count: 3, everyMilliseconds: 200, fps: 30, firstGroup: 40))?.groups == [40, 46, 52])
    }
}
