import Foundation
import Testing
@testable import CoordCore

@Suite struct SnapPlanTests {
    @Test func aSingleShotIsGroupZeroAndItsSpanOneGroup() throws {
        let plan = try SnapPlan(fps: 30)
        #expect(plan.groups == [0])
        #expect(plan.spanGroups == 1)
        #expect(plan.path(node: "node-1", camera: "cam0", shot: 0) == "node-1/cam0.png")
        #expect(plan.format == .png && plan.size == nil)
    }

    @Test func aBurstKeepsEveryShotOnTheGrid() throws {
        let plan = try SnapPlan(count: 5, everyMilliseconds: 200, fps: 30)
        #expect(plan.stride == 6)
        #expect(plan.groups == [0, 6, 12, 18, 24])
        #expect(plan.spanGroups == 25)
        #expect(plan.path(node: "n", camera: "c", shot: 3) == "n/c_3.png")
        #expect((0..<30).compactMap { plan.shot(ofGroup: Int64($0)) } == [0, 1, 2, 3, 4])
        #expect(plan.shot(ofGroup: 30) == nil && plan.shot(ofGroup: 7) == nil)
    }

    @Test(arguments: [(200, 30, 6), (40, 25, 1), (1000, 24, 24), (50, 60, 3), (100, 10, 1), (500, 2, 1)])
    func everyIsAWholeNumberOfFrames(every: Int, fps: Int, stride: Int64) throws {
        let plan = try SnapPlan(count: 3, everyMilliseconds: every, fps: fps, firstGroup: 10)
        #expect(plan.stride == stride)
        #expect(plan.groups == [10, 10 + stride, 10 + 2 * stride])
        // Shot k is k × MS after the first, exactly, on the grid's rate.
        for (k, group) in plan.groups.enumerated() {
            #expect((group - 10) * 1000 == Int64(k * every * fps))
        }
    }

    @Test(arguments: [(7, 30), (33, 30), (10, 24), (0, 30), (-200, 30), (1, 240)])
    func everyBetweenFramesIsOneSentence(every: Int, fps: Int) {
        #expect {
            try SnapPlan(count: 2, everyMilliseconds: every, fps: fps)
        } throws: { error in
            let sentence = (error as? SnapProblem)?.sentence ?? ""
            return sentence.hasPrefix("--every \(every) ms is not a whole number of frame periods at \(fps) fps")
                && sentence.hasSuffix(".") && !sentence.contains("\n")
        }
    }

    @Test func theSentenceSuggestsTheNearestWholeNumberOfFrames() {
        #expect(throws: SnapProblem("--every 7 ms is not a whole number of frame periods at 30 fps (one frame is 33.333 ms; try 33.333 ms).")) {
            try SnapPlan(count: 2, everyMilliseconds: 7, fps: 30)
        }
        #expect(throws: SnapProblem("--every 210 ms is not a whole number of frame periods at 30 fps (one frame is 33.333 ms; try 200 ms).")) {
            try SnapPlan(count: 2, everyMilliseconds: 210, fps: 30)
        }
    }

    @Test(arguments: [0, -1, 1001])
    func aCountOutsideOneToAThousandIsOneSentence(count: Int) {
        #expect(throws: SnapProblem("--count must be between 1 and 1000 shots (got \(count)).")) { try SnapPlan(count: count, fps: 30) }
    }

    @Test(arguments: ["99999x1", "640x481", "100x64", "x", "", "640", "640x480x3", "-640x480", "maxx"])
    func aSizeThatIsNoStillIsOneSentence(size: String) {
        #expect(throws: SnapProblem("--size must be max or an even WxH from 104x64 to 16384x16384, e.g. 1920x1080 (got \(size)).")) {
            try SnapPlan(fps: 30, size: size)
        }
    }

    @Test func sizesAndFormatsParse() throws {
        #expect(try SnapPlan(fps: 30, size: "max").size == .largest)
        #expect(try SnapPlan(fps: 30, size: "MAX").size == .largest)
        #expect(try SnapPlan(fps: 30, size: "4056x3040").size == .exactly(width: 4056, height: 3040))
        #expect(try SnapPlan(fps: 30, format: "TIFF").path(node: "a", camera: "b", shot: 0) == "a/b.tiff")
        #expect(try SnapPlan(fps: 30, format: "jpeg").path(node: "a", camera: "b", shot: 0) == "a/b.jpg")
        #expect(throws: SnapProblem("--format must be png, tiff or jpeg (got \"bmp\").")) { try SnapPlan(fps: 30, format: "bmp") }
    }

    @Test func theShotsBytesGrowWithSizeCountAndCameras() throws {
        let one = try SnapPlan(fps: 30)
        let burst = try SnapPlan(count: 5, everyMilliseconds: 200, fps: 30)
        let jpeg = try SnapPlan(fps: 30, format: "jpeg")
        let sizes = [(width: 4056, height: 3040), (width: 640, height: 480)]
        // A 12 MP lossless still is at least its RGB bytes (no compression is counted on).
        #expect(one.stillBytes(width: 4056, height: 3040) >= 4056 * 3040 * 3)
        #expect(one.shotBytes(sizes: sizes) == one.stillBytes(width: 4056, height: 3040) + one.stillBytes(width: 640, height: 480))
        #expect(burst.shotBytes(sizes: sizes) == 5 * one.shotBytes(sizes: sizes))
        #expect(jpeg.shotBytes(sizes: sizes) < one.shotBytes(sizes: sizes) / 3)
    }
}

@Suite struct SnapPlanSensorRateTests {
    @Test(arguments: [(1, nil, 30, 2), (5, 200, 30, 2), (5, 2000, 30, 2), (3, 400, 30, 2), (3, 100, 30, 1), (4, 33, 30, 1),
                      (2, 1000, 25, 1), (1, nil, 4, 1), (6, 80, 25, 1), (2, 100, 60, 3), (2, 50, 60, 3), (1, nil, 240, 16)] as [(Int, Int?, Int, Int)])
    func everyShotIsARealFrameOfASlowerSensor(count: Int, every: Int?, fps: Int, expected: Int) throws {
        guard every.map({ $0 * fps % 1000 == 0 }) ?? true else { return }
        let plan = try SnapPlan(count: count, everyMilliseconds: every, fps: fps)
        let recordEvery = plan.recordEvery(fps: fps)
        #expect(recordEvery == expected)
        #expect((1...fps).contains(recordEvery))
        // The cap anchors at group 0: every shot's group is one the sensor delivers.
        #expect(plan.groups.allSatisfy { $0 % Int64(recordEvery) == 0 })
    }
}

@Suite struct SnapPlanFirstGroupTests {
    @Test(arguments: [(30, 1, nil, 16), (30, 5, 200, 16), (25, 1, nil, 12), (60, 2, 50, 30), (1, 1, nil, 0)] as [(Int, Int, Int?, Int64)])
    func aColdShotWaitsAboutHalfASecondOnADeliveredGroup(fps: Int, count: Int, every: Int?, expected: Int64) throws {
        let first = SnapPlan.settledFirstGroup(fps: fps, count: count, everyMilliseconds: every)
        #expect(first == expected)
        let plan = try SnapPlan(count: count, everyMilliseconds: every, fps: fps, firstGroup: first)
        #expect(plan.groups.allSatisfy { $0 % Int64(plan.recordEvery(fps: fps)) == 0 })
        #expect(plan.spanGroups == first + Int64(count - 1) * plan.stride + 1)
    }
}

@Suite struct SnapBudgetTests {
    let node = SnapBudget.Node(name: "pi-1", freeDiskBytes: 10_000_000_000, sizes: [(width: 4056, height: 3040)], ffv1BytesPerPixel: 0.6)

    @Test func aShotThatFitsSaysWhatItTakesWhere() throws {
        let plan = try SnapPlan(count: 5, everyMilliseconds: 200, fps: 30)
        let budget = SnapBudget(plan: plan, recordEvery: 2, nodes: [node], takesDirectory: "/takes", takesFreeBytes: 50_000_000_000)
        #expect(budget.refusal == nil)
        // 25 groups, one in 2 a new frame: 13 frames of 12.3 Mpx at 0.6 bytes a pixel on the node.
        #expect(budget.lines.contains { $0.contains("25 group(s), 13 new frame(s) a camera") })
        #expect(budget.lines.contains { $0.hasPrefix("  pi-1: span 96.2 MB") })
        #expect(budget.lines.last == "the shot fits its disks.")
    }

    @Test func aFullStagingDiskRefusesNamingTheNode() throws {
        var small = node
        small.freeDiskBytes = 50_000_000
        let budget = SnapBudget(plan: try SnapPlan(fps: 30), recordEvery: 1, nodes: [small], takesDirectory: "/takes", takesFreeBytes: nil)
        #expect(budget.refusal == nil)
        small.freeDiskBytes = 1_000_000
        let refused = SnapBudget(plan: try SnapPlan(fps: 30), recordEvery: 1, nodes: [small], takesDirectory: "/takes", takesFreeBytes: nil)
        #expect(refused.refusal == "node pi-1 has 1.0 MB free on its staging disk but the shot's span takes 7.5 MB.")
    }

    @Test func aTakesDirectoryTooSmallForTheStillsRefuses() throws {
        let plan = try SnapPlan(count: 10, everyMilliseconds: 100, fps: 30, format: "tiff")
        let budget = SnapBudget(plan: plan, recordEvery: 1, nodes: [node, node], takesDirectory: "/takes", takesFreeBytes: 500_000_000)
        #expect(budget.refusal?.hasPrefix("the takes directory /takes has 500 MB free but the shot needs up to ") == true)
    }
}
