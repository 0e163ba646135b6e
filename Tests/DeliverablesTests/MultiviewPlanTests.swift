import CoordCore
import Foundation
import Testing
@testable import Deliverables
@testable import TakeDocuments

@Suite struct MultiviewPlanTests {
    static func cameras(_ sizes: [(Int, Int)]) -> [TakeManifest.Camera] {
        sizes.enumerated().map { k, size in
            var c = DeliverPlanTests.camera("node-\(k / 2 + 1)", "cam\(k % 2)")
            c.width = size.0
            c.height = size.1
            return c
        }
    }

    static func plan(_ sizes: [(Int, Int)], layout: MultiviewLayout = .grid, width: Int = 1920) throws -> MultiviewPlan {
        let deliver = try DeliverPlan.make(DeliverPlanTests.manifest(cameras: cameras(sizes)), codec: .h264).get()
        return try MultiviewPlan.make(deliver, layout: layout, width: width).get()
    }

    func inside(_ r: MultiviewRect, _ width: Int, _ height: Int) -> Bool {
        r.x >= 0 && r.y >= 0 && r.x + r.width <= width && r.y + r.height <= height
    }

    @Test func sixVGACamerasAt1920FillThreeColumnsTwoRowsUnscaled() throws {
        let p = try Self.plan(Array(repeating: (640, 480), count: 6))
        // Two rows of 480 and a 60-pixel band for the timecode under them.
        #expect((p.width, p.height, p.band) == (1920, 1020, 60))
        #expect(p.output == "deliver/20260312-141500-s-0a1b2c_multiview.mov")
        #expect(p.tiles.map { [$0.cell.x, $0.cell.y] } == [[0, 0], [640, 0], [1280, 0], [0, 480], [640, 480], [1280, 480]])
        // 1:1, so each tile's SYNCSTRIPE keeps its 8×8 blocks.
        #expect(p.tiles.allSatisfy { $0.picture == MultiviewRect(x: 0, y: 0, width: 640, height: 480) })
        #expect(p.tiles.map(\.label) == ["node-1/cam0", "node-1/cam1", "node-2/cam0", "node-2/cam1", "node-3/cam0", "node-3/cam1"])
        #expect(p.sounds.count == 1 && p.groups == 30 && p.timecode == "14:15:00:01")
    }

    @Test func aWiderCameraIsLetterboxedInACellAsTallAsTheTallestAspect() throws {
        let p = try Self.plan([(640, 480), (1280, 720), (640, 480), (640, 480), (640, 480)])
        #expect((p.width, p.height) == (1920, 1020))
        #expect(p.tiles[1].cell == MultiviewRect(x: 640, y: 0, width: 640, height: 480))
        #expect(p.tiles[1].picture == MultiviewRect(x: 0, y: 60, width: 640, height: 360))
        #expect(p.tiles[4].cell == MultiviewRect(x: 640, y: 480, width: 640, height: 480))
    }

    @Test func pipPutsTheFirstCameraFullFrameAndTheOthersAlongTheBottom() throws {
        let p = try Self.plan([(640, 480), (640, 480), (640, 480)], layout: .pip)
        #expect((p.width, p.height, p.band) == (1920, 1440, 0))
        #expect(p.tiles[0].cell == MultiviewRect(x: 0, y: 0, width: 1920, height: 1440))
        #expect(p.tiles[0].picture == MultiviewRect(x: 0, y: 0, width: 1920, height: 1440))
        #expect(p.tiles[1].cell == MultiviewRect(x: 30, y: 1050, width: 480, height: 360))
        #expect(p.tiles[2].cell == MultiviewRect(x: 540, y: 1050, width: 480, height: 360))
    }

    @Test func everyLayoutKeepsItsPicturesInsideTheirCellsAndItsCellsApartInsideTheFrame() throws {
        let shapes = [(640, 480), (1280, 720), (480, 640), (1920, 1080), (320, 240)]
        for layout in MultiviewLayout.allCases {
            for n in 1...16 {
                for width in [160, 1000, 1920, 3840] {
                    let sizes = (0..<n).map { shapes[$0 % shapes.count] }
                    let p = try Self.plan(sizes, layout: layout, width: width)
                    #expect(p.width == width && p.height % 2 == 0 && p.height > 0)
                    for (k, t) in p.tiles.enumerated() {
                        #expect(inside(t.cell, p.width, p.height - p.band), "\(layout) n=\(n) w=\(width) tile \(k) \(t.cell)")
                        #expect(inside(t.picture, t.cell.width, t.cell.height), "\(layout) n=\(n) w=\(width) tile \(k) \(t.picture)")
                        #expect([t.cell.x, t.cell.y, t.cell.width, t.cell.height, t.picture.x, t.picture.y, t.picture.width,
                                 t.picture.height].allSatisfy { $0 % 2 == 0 })
                        // Cells never overlap, except pip's insets over its main picture.
                        for (j, o) in p.tiles.enumerated() where j < k && !(layout == .pip && j == 0) {
                            let apart = t.cell.x >= o.cell.x + o.cell.width || o.cell.x >= t.cell.x + t.cell.width
                                || t.cell.y >= o.cell.y + o.cell.height || o.cell.y >= t.cell.y + t.cell.height
                            #expect(apart, "\(layout) n=\(n) w=\(width) tiles \(j) and \(k)")
                        }
                    }
                }
            }
        }
    }

    @Test func aBadWidthOrNoCameraIsOneSentence() throws {
        let deliver = try DeliverPlan.make(DeliverPlanTests.manifest(cameras: Self.cameras([(640, 480)])), codec: .h264).get()
        for width in [0, -2, 1921, 100, 8000] {
            let problem = try #require(MultiviewPlan.make(deliver, layout: .grid, width: width).problem())
            #expect(problem.sentence == "--width must be an even number of pixels from 160 to 7680 (got \(width)).")
        }
        var none = deliver
        none.movs = []
        #expect(MultiviewPlan.make(none, layout: .pip, width: 1920).problem()?.sentence
                == "take 20260312-141500-s-0a1b2c has no cameras to put in a multiview.")
    }

    @Test func theFilledGroupsAreTheDupRowsOfTheFramesTable() {
        let csv = "frame,group,center_us,flags\n0,0,100,\n1,1,200,dup\n2,2,300,\n3,3,400,dup\r\n4,4,500,dupe\nbad\n"
        #expect(MultiviewPlan.filledGroups(csv) == [1, 3])
        #expect(MultiviewPlan.filledGroups("frame,group,center_us,flags\n").isEmpty)
    }

    @Test func theFingerprintChangesWithWhatTheMovieShows() throws {
        let grid = try Self.plan(Array(repeating: (640, 480), count: 2))
        var marked = grid
        marked.tiles[1].filled = [3]
        #expect(Set([grid.fingerprint, marked.fingerprint, try Self.plan(Array(repeating: (640, 480), count: 2), layout: .pip).fingerprint,
                     try Self.plan(Array(repeating: (640, 480), count: 2), width: 1280).fingerprint]).count == 4)
    }

    @Test func progressSaysFramesRateAndTimeLeft() {
        #expect(MultiviewPlan.progressLine(done: 120, of: 300, seconds: 2) == "multiview: frame 120/300 (40%), 60.0 fps, ETA 3 s")
        #expect(MultiviewPlan.progressLine(done: 0, of: 300, seconds: 0) == "multiview: frame 0/300 (0%), 0.0 fps, ETA 0 s")
    }
}

extension Result {
    fileprivate func problem() -> Failure? { if case .failure(let f) = self { f } else { nil } }
}

/// The shell's refusals that come before any picture is decoded, on a take directory of placeholder files.
@Suite struct MultiviewDelivererTests {
    static func take(_ manifest: TakeManifest, framesCSV: String? = nil) throws -> String {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("multiview-\(UUID().uuidString)").path
        for camera in manifest.cameras {
            try FileManager.default.createDirectory(atPath: "\(root)/\(camera.node)", withIntermediateDirectories: true)
            try Data("mkv".utf8).write(to: URL(fileURLWithPath: "\(root)/\(camera.node)/\(camera.camera).mkv"))
            if let framesCSV { try Data(framesCSV.utf8).write(to: URL(fileURLWithPath: "\(root)/\(camera.node)/\(camera.camera).frames.csv")) }
        }
        for mic in manifest.audio ?? [] {
            try FileManager.default.createDirectory(atPath: "\(root)/\(mic.node)", withIntermediateDirectories: true)
            try Data("mka".utf8).write(to: URL(fileURLWithPath: "\(root)/\(mic.path)"))
        }
        try JSONEncoder().encode(manifest).write(to: URL(fileURLWithPath: "\(root)/manifest.json"))
        return root
    }

    static func sentence(_ root: String, fontFile: String = MultiviewDeliverer.fontFile) -> String {
        do { _ = try MultiviewDeliverer.run(takeDirectory: root, layout: .grid, width: 1920, fontFile: fontFile) { _ in } } catch {
            return "\(error)"
        }
        return "made"
    }

    @Test func aMissingFontNamesThePackageToInstall() throws {
        let root = try Self.take(DeliverPlanTests.manifest())
        #expect(Self.sentence(root, fontFile: "/nonexistent/DejaVuSans.ttf")
                == "the multiview's labels need the font /nonexistent/DejaVuSans.ttf, which is missing; install the fonts-dejavu-core package.")
    }

    @Test func aTakeWithoutCamerasOrWithAShortFramesTableIsOneSentence() throws {
        var bare = DeliverPlanTests.manifest()
        bare.cameras = []
        #expect(Self.sentence(try Self.take(bare)) == "take 20260312-141500-s-0a1b2c has no cameras to put in a multiview.")
        let short = try Self.take(DeliverPlanTests.manifest(), framesCSV: "frame,group,center_us,flags\n0,0,1,\n")
        #expect(Self.sentence(short) == "n1/cam0.frames.csv lists 1 frames but the take has 30 groups.")
    }
}
