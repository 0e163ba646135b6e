// Issue 25 item 3: the collector's copies are written and hashed off the fetcher, in order, with bounded memory.
import CoordCore
import Foundation
import Platform
import Synchronization
import Testing
@testable import Coordinator
#if canImport(Glibc)
import Glibc
#endif

@Suite struct CopyWriterTests {
    private func scratch() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("copywriter-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    /// Chunks of every shape (aligned, odd, a short tail) arrive as one copy: the file and its hash are the bytes.
    @Test func chunksHandedOverInOrderAreTheFileAndItsHash() async throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        var rng = SystemRandomNumberGenerator()
        let sizes = [256 << 10, 256 << 10, 4096, 12_345, 256 << 10, 77]
        let chunks = sizes.map { n in Data((0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }) }
        let whole = chunks.reduce(Data(), +)
        let expected = XXH128.bytes(whole)
        let copy = ArrivingCopy(TakeManifest.File(path: "n1/cam0.mkv", bytes: UInt64(whole.count), sha256: "", xxh128: expected))
        let path = dir.appendingPathComponent("copy").path
        try copy.create(path)
        let writer = CopyWriter(node: "n1", limit: 2)
        for chunk in chunks { await writer.submit { copy.append(chunk) } }
        await writer.settle()
        #expect(copy.failure == nil)
        #expect(copy.written == UInt64(whole.count))
        #expect(copy.digest() == expected)
        try copy.sync()
        copy.close()
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == whole)
    }

    /// A fetcher never has more than `limit` chunks waiting for the disk: the queue holds it back.
    private final class Tally: Sendable {
        let handedOver = Atomic<Int>(0), written = Atomic<Int>(0), worst = Atomic<Int>(0)
    }

    @Test func theFetcherWaitsWhileTheWriterIsBehind() async {
        let writer = CopyWriter(node: "n1", limit: 2)
        let tally = Tally()
        for _ in 0..<40 {
            await writer.submit {
                // Behind: each write is slow next to handing over.
                var x = 0
                for i in 0..<200_000 { x &+= i }
                _ = x
                let waiting = tally.handedOver.load(ordering: .sequentiallyConsistent) - tally.written.load(ordering: .sequentiallyConsistent)
                _ = tally.worst.max(waiting, ordering: .sequentiallyConsistent)
                _ = tally.written.add(1, ordering: .sequentiallyConsistent)
            }
            _ = tally.handedOver.add(1, ordering: .sequentiallyConsistent)
        }
        await writer.settle()
        #expect(tally.written.load(ordering: .sequentiallyConsistent) == 40)
        #expect(tally.worst.load(ordering: .sequentiallyConsistent) <= 2)
    }

    /// A write that fails (a full disk) is kept as the copy's failure, and nothing after it is written or hashed.
    @Test func aFailedWriteStopsTheCopyAndSaysWhy() async throws {
        let copy = ArrivingCopy(TakeManifest.File(path: "n1/cam0.mkv", bytes: 8192, sha256: "", xxh128: XXH128.bytes(Data(count: 8192))))
        try copy.create("/dev/full")
        let writer = CopyWriter(node: "n1", limit: 2)
        await writer.submit { copy.append(Data(count: 4096)) }
        await writer.submit { copy.append(Data(count: 4096)) }
        await writer.settle()
        #expect(copy.failure?.errno == ENOSPC)
        #expect(copy.written == 0)
        #expect(Collector.fileProblem(copy.failure!.errno).contains("disk is full"))
        copy.close()
    }
}
