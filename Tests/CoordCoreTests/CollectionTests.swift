import Foundation
import Testing
@testable import CoordCore

@Suite struct ChunkScheduleTests {
    @Test func neverMoreThanTheWindowInFlight() {
        var s = ChunkSchedule(window: 3, chunkBytes: 100)
        s.add(file: 0, from: 0, bytes: 1000)
        var issued: [ChunkSchedule.Request] = []
        while let r = s.next() { issued.append(r) }
        #expect(issued.count == 3)
        #expect(s.inFlight == 3 && !s.hasCredit)
        // A reply returns one credit, and exactly one more request goes out.
        s.completed()
        #expect(s.next() == .init(file: 0, offset: 300, length: 100))
        #expect(s.next() == nil)
    }

    @Test func filesFollowEachOtherFromTheirOffsetsWithAShortLastChunk() {
        var s = ChunkSchedule(window: 64, chunkBytes: 100)
        s.add(file: 0, from: 250, bytes: 420)  // a resumed file
        s.add(file: 1, from: 0, bytes: 100)
        s.add(file: 2, from: 50, bytes: 50)    // nothing left of it
        var issued: [ChunkSchedule.Request] = []
        while let r = s.next() { issued.append(r) }
        #expect(issued == [.init(file: 0, offset: 250, length: 100), .init(file: 0, offset: 350, length: 70),
                           .init(file: 1, offset: 0, length: 100)])
        for _ in issued { s.completed() }
        #expect(s.isIdle)
    }

    @Test func everyByteIsAskedForExactlyOnce() {
        var s = ChunkSchedule(window: 5, chunkBytes: 7)
        let sizes: [UInt64] = [0, 1, 6, 7, 8, 100, 1234]
        for (i, n) in sizes.enumerated() { s.add(file: i, from: 0, bytes: n) }
        var covered = [UInt64](repeating: 0, count: sizes.count)
        while !s.isIdle {
            guard let r = s.next() else { s.completed(); continue }
            #expect(r.offset == covered[r.file])
            covered[r.file] += UInt64(r.length)
        }
        #expect(covered == sizes)
    }

    @Test func aRetryGoesFirstAndACancelledFileStops() {
        var s = ChunkSchedule(window: 2, chunkBytes: 10)
        s.add(file: 0, from: 0, bytes: 30)
        s.add(file: 1, from: 0, bytes: 30)
        let first = s.next()!
        _ = s.next()
        s.completed()
        s.retry(first)
        #expect(s.next() == first)
        s.completed()
        s.cancel(file: 0)
        #expect(s.next() == .init(file: 1, offset: 0, length: 10))
    }
}

@Suite struct FileActionTests {
    let sha = String(repeating: "a", count: 64)

    @Test func aMatchingFinalFileIsKept() {
        #expect(FileAction.decide(expectedBytes: 10, expectedSHA256: sha, final: (10, sha), partialBytes: 4) == .have)
    }

    @Test func aFinalFileThatDiffersIsFetchedAgain() {
        #expect(FileAction.decide(expectedBytes: 10, expectedSHA256: sha, final: (10, "b"), partialBytes: nil) == .fetch)
        #expect(FileAction.decide(expectedBytes: 10, expectedSHA256: sha, final: (9, nil), partialBytes: nil) == .fetch)
    }

    @Test func aPartialCopyIsResumedUnlessItIsTooLongOrEmpty() {
        #expect(FileAction.decide(expectedBytes: 10, expectedSHA256: sha, final: nil, partialBytes: 4) == .resume(from: 4))
        #expect(FileAction.decide(expectedBytes: 10, expectedSHA256: sha, final: nil, partialBytes: 10) == .resume(from: 10))
        #expect(FileAction.decide(expectedBytes: 10, expectedSHA256: sha, final: nil, partialBytes: 11) == .fetch)
        #expect(FileAction.decide(expectedBytes: 10, expectedSHA256: sha, final: nil, partialBytes: 0) == .fetch)
        #expect(FileAction.decide(expectedBytes: 10, expectedSHA256: sha, final: nil, partialBytes: nil) == .fetch)
    }
}

@Suite struct TransferMeterTests {
    @Test func rateIsOverTheRecentWindowAndETAFollowsIt() {
        var m = TransferMeter(total: 1000, window: 3_000_000)
        #expect(m.rate == nil && m.secondsLeft == nil)
        m.record(0)
        m.add(100, at: 1_000_000)
        #expect(m.rate == 100)
        #expect(m.secondsLeft == 9)
        // Later samples push the first seconds out of the 3 s window: the rate is 400 B over 2 s → 5 s only.
        m.add(400, at: 2_000_000)
        m.add(400, at: 5_000_000)
        #expect(abs(m.rate! - 400.0 / 3) < 1e-9)
        #expect(m.done == 900)
        m.add(100, at: 5_500_000)
        #expect(m.secondsLeft == 0)
    }

    @Test func aRefetchGrowsTheTotal() {
        var m = TransferMeter(total: 10)
        m.add(10, at: 1)
        #expect(m.secondsLeft == 0)
        m.grow(by: 10)
        #expect(m.total == 20 && m.secondsLeft != 0)
    }
}

@Suite struct CollectPolicyTests {
    func decode(_ json: String) throws -> CollectPolicy {
        try JSONDecoder().decode(CollectPolicy.self, from: Data(json.utf8))
    }

    @Test func defaultsAndEveryKey() throws {
        let d = try decode("{}")
        #expect(d == CollectPolicy() && d.afterConfirm == .delete && d.window == 8 && d.chunkKiB == nil)
        let p = try decode(#"{"after_confirm": "keep", "window": 16, "chunk_kib": 256, "max_mb_per_s": 40}"#)
        #expect(p == CollectPolicy(afterConfirm: .keep, window: 16, chunkKiB: 256, maxMBPerSecond: 40))
        #expect(p.fault() == nil)
    }

    /// Unset, the chunk size keeps the rig's chunks in flight within the budget: 4 MiB for a few nodes, 1 MiB at
    /// 64, never below 256 KiB; the rig file's `chunk_kib` wins.
    @Test func theChunkSizeIsChosenForHowManyNodesAreFetchedAtOnce() {
        let auto = CollectPolicy()
        #expect(auto.chunkBytes(nodes: 0) == 4 << 20)
        #expect(auto.chunkBytes(nodes: 2) == 4 << 20)
        #expect(auto.chunkBytes(nodes: 16) == 4 << 20)
        #expect(auto.chunkBytes(nodes: 17) == 2 << 20)
        #expect(auto.chunkBytes(nodes: 64) == 1 << 20)
        #expect(auto.chunkBytes(nodes: 100_000) == 256 << 10)
        for nodes in [1, 3, 9, 16, 33, 64, 100, 256] {
            let held = nodes * (auto.window + 2) * auto.chunkBytes(nodes: nodes)
            #expect(held <= CollectPolicy.inFlightBudget, "\(nodes) nodes hold \(held >> 20) MiB")
        }
        // A wider window leaves room for smaller chunks only.
        #expect(CollectPolicy(window: 64).chunkBytes(nodes: 2) == 4 << 20)
        #expect(CollectPolicy(window: 64).chunkBytes(nodes: 16) == 512 << 10)
        #expect(CollectPolicy(chunkKiB: 256).chunkBytes(nodes: 2) == 256 << 10)
    }

    @Test func outOfRangeSettingsNameTheirField() {
        #expect(CollectPolicy(window: 0).fault()?.field == "collect.window")
        #expect(CollectPolicy(window: 65).fault()?.field == "collect.window")
        #expect(CollectPolicy(chunkKiB: 8).fault()?.field == "collect.chunk_kib")
        #expect(CollectPolicy(maxMBPerSecond: 0).fault()?.sentence.contains("positive") == true)
        var spec = RigSpec(nodes: [.init(name: "a", endpoint: "tcp://h:1")])
        spec.collect.window = 99
        #expect(spec.fault()?.field == "collect.window")
        #expect(RigSpec.knownKeys["collect"] == ["after_confirm", "window", "chunk_kib", "max_mb_per_s"])
    }

    @Test func anUnknownAfterConfirmIsRefused() {
        #expect(throws: DecodingError.self) { try decode(#"{"after_confirm": "shred"}"#) }
    }
}
