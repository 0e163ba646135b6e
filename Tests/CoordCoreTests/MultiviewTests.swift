import CoordCore
import Testing

@Suite("Multiview: tiles matched into sets by group")
struct MultiviewTests {
    let a = CameraKey(node: "n1", camera: "cam0"), b = CameraKey(node: "n2", camera: "cam0"), c = CameraKey(node: "n2", camera: "cam1")

    func tile(_ key: CameraKey, _ group: Int64) -> PreviewTile {
        PreviewTile(key: key, group: group, centerMicroseconds: 1_000_000 + group * 33_333, phaseErrorMicroseconds: 0, dropped: 0,
                    width: 480, height: 360)
    }

    @Test func aSetIsShownOnlyOnceEveryCameraHasATileOfItsGroup() {
        var assembler = MultiviewAssembler(cameras: [a, b, c], patienceGroups: 18)
        #expect(assembler.add(tile(a, 6)).isEmpty)
        #expect(assembler.add(tile(b, 6)).isEmpty)
        let sets = assembler.add(tile(c, 6))
        #expect(sets.count == 1)
        #expect(sets[0].complete)
        #expect(sets[0].tiles.map(\.key) == [a, b, c])
        #expect(sets[0].tiles.allSatisfy { $0.tile?.group == 6 })
    }

    @Test func tilesArrivingInAnyOrderAcrossGroupsNeverMix() {
        var assembler = MultiviewAssembler(cameras: [a, b], patienceGroups: 18)
        // n1 runs ahead of n2: its tiles of 6 and 12 arrive before n2's of 6.
        #expect(assembler.add(tile(a, 6)).isEmpty)
        #expect(assembler.add(tile(a, 12)).isEmpty)
        let first = assembler.add(tile(b, 6))
        #expect(first.map(\.group) == [6])
        let second = assembler.add(tile(b, 12))
        #expect(second.map(\.group) == [12])
        #expect(second[0].tiles.allSatisfy { $0.tile?.group == 12 })
    }

    @Test func aCameraWithoutATileIsMarkedMissingNotFilledFromAnotherGroup() {
        var assembler = MultiviewAssembler(cameras: [a, b], patienceGroups: 12)
        var shown: [MultiviewSet] = []
        shown += assembler.add(tile(a, 6))
        shown += assembler.add(tile(b, 0))  // b's older tile must not stand in for group 6
        shown += assembler.add(tile(a, 12))
        shown += assembler.add(tile(a, 18))
        #expect(shown.map(\.group) == [0, 6])
        #expect(shown.allSatisfy { set in set.tiles.allSatisfy { $0.tile == nil || $0.tile!.group == set.group } })
        let six = shown.first { $0.group == 6 }
        #expect(six != nil)
        #expect(six?.complete == false)
        #expect(six?.tiles.first { $0.key == b }?.tile == nil)
        #expect(six?.tiles.first { $0.key == a }?.tile?.group == 6)
    }

    @Test func aLateTileOfAGroupAlreadyShownIsDropped() {
        var assembler = MultiviewAssembler(cameras: [a, b], patienceGroups: 18)
        _ = assembler.add(tile(a, 12))
        #expect(assembler.add(tile(b, 12)).count == 1)
        #expect(assembler.add(tile(a, 6)).isEmpty)
        #expect(assembler.add(tile(b, 6)).isEmpty)
        #expect(assembler.lateTiles == 2)
    }

    @Test func aNewGridStartsItsGroupsAfresh() {
        var assembler = MultiviewAssembler(cameras: [a], patienceGroups: 18)
        #expect(assembler.add(tile(a, 900)).count == 1)
        assembler.restartGroups()
        #expect(assembler.add(tile(a, 0)).map(\.group) == [0])
    }

    @Test func aTileFromTheFutureIsRefusedAndCannotHoldBackEveryLaterSet() {
        var assembler = MultiviewAssembler(cameras: [a, b], patienceGroups: 12)
        let now = tile(a, 600).centerMicroseconds
        // A wild stamp a day ahead: taken as the newest group, every later set would be shown incomplete.
        #expect(assembler.add(tile(a, 600 + 2_592_000), rigNow: now).isEmpty)
        #expect(assembler.futureTiles == 1)
        #expect(assembler.add(tile(a, 594), rigNow: now).isEmpty)
        let sets = assembler.add(tile(b, 594), rigNow: now)
        #expect(sets.map(\.group) == [594])
        #expect(sets.allSatisfy { $0.complete })
        // Within the slack (a mapping's error, half a period) a tile is taken.
        #expect(assembler.add(tile(a, 600), rigNow: now - 500_000).isEmpty)
        #expect(assembler.futureTiles == 1)
    }

    @Test func tilesOfCamerasNotInTheRigAreIgnored() {
        var assembler = MultiviewAssembler(cameras: [a], patienceGroups: 18)
        #expect(assembler.add(tile(b, 6)).isEmpty)
    }

    @Test(arguments: [(30, 5, 6), (30, 15, 2), (25, 5, 5), (60, 7, 9), (5, 15, 1)])
    func everyCameraTakesTheSameGroups(fps: Int, previewFPS: Int, stride: Int64) {
        #expect(PreviewSettings(width: 480, fps: previewFPS).groupStride(framePeriodMicroseconds: FrameGrid.period(fps: fps)) == stride)
    }

    @Test func previewSettingsOutOfRangeAreNamed() {
        #expect(PreviewSettings(width: 480, fps: 5).problem == nil)
        #expect(PreviewSettings(width: 481, fps: 5).problem?.contains("481") == true)
        #expect(PreviewSettings(width: 480, fps: 16).problem?.contains("16") == true)
    }
}
