import CoordCore
import CFFmpeg
import Foundation
import Synchronization
import Testing
@testable import LibAV
@testable import Pixels

#if canImport(Glibc)
import Glibc
#endif

/// A disk of `capacity` bytes under one file: an allocation or a write reaching past it fails with ENOSPC, as a full
/// file system does. `holdsAhead` false: a file system without fallocate (EOPNOTSUPP).
private func fullDisk(capacity: Int64, holdsAhead: Bool = true) -> DiskCalls {
    DiskCalls(
        allocate: { fd, mode, offset, length in
            guard holdsAhead else { return EOPNOTSUPP }
            if offset + length > capacity { return ENOSPC }
            return DiskCalls.system.allocate(fd, mode, offset, length)
        },
        write: { fd, bytes, offset in
            if offset + Int64(bytes.count) > capacity {
                // A full disk takes what fits, then refuses the rest.
                let fits = Int(max(0, capacity - offset))
                if fits > 0 { _ = DiskCalls.system.write(fd, UnsafeRawBufferPointer(rebasing: bytes[..<fits]), offset) }
                return ENOSPC
            }
            return DiskCalls.system.write(fd, bytes, offset)
        })
}

/// ffprobe's packet count of `file`'s video and whatever it says is wrong with the file (empty: nothing).
private func ffprobe(_ file: String) throws -> (packets: Int, complaints: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["ffprobe", "-v", "error", "-count_packets", "-select_streams", "v:0", "-show_entries",
                         "stream=nb_read_packets", "-of", "csv=p=0", file]
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let output = out.fileHandleForReading.readDataToEndOfFile()
    let complaints = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let text = String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    return (Int(text) ?? -1, String(decoding: complaints, as: UTF8.self))
}

@Suite struct FullDiskTests {
    /// Writes painted frames (a repeat every fifth) until the writer says the disk is full, at most `limit`.
    private func record(_ writer: MatroskaWriter, limit: Int) throws -> Int {
        let frame = PlanarFrame(width: writer.width, height: writer.height)
        let step = 1_000_000 / Int64(writer.fps)
        for i in 0..<limit {
            if i % 5 == 4 {
                try writer.writeRepeat(ptsMicroseconds: Int64(i) * step)
            } else {
                TestPattern.paint(into: frame, frameCounter: UInt32(i), ordinal: 1)
                try writer.write(frame, ptsMicroseconds: Int64(i) * step)
            }
            if writer.isShortOfSpace { return i + 1 }
        }
        return limit
    }

    @Test(arguments: VideoCodec.allCases)
    func aFullDiskStopsTheWriterWithEveryFrameWrittenInAFinishedFile(codec: VideoCodec) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("coord-fulldisk-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("cam0.mkv").path
        let capacity: Int64 = 2_000_000
        let writer = try MatroskaWriter(path: file, width: 320, height: 240, fps: 30, codec: codec,
                                        calls: fullDisk(capacity: capacity))
        let written = try record(writer, limit: 100_000)
        #expect(writer.isShortOfSpace, "the disk never filled")
        #expect(writer.spaceReason == String(cString: strerror(ENOSPC)))
        #expect(written == writer.framesWritten)
        try writer.finish()
        let probed = try ffprobe(file)
        #expect(probed.packets == written)
        #expect(probed.complaints.isEmpty, "\(probed.complaints)")
        // The space held past the end is given back: the file is only its bytes.
        var st = stat()
        #expect(stat(file, &st) == 0)
        #expect(Int64(st.st_size) <= capacity)
        #expect(Int64(st.st_blocks) * 512 <= Int64(st.st_size) + 65_536, "blocks past the end were kept")
    }

    @Test func theHeldSpaceIsGivenBackWhenTheFileIsFinishedOnARoomyDisk() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("coord-headroom-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("cam0.mkv").path
        let writer = try MatroskaWriter(path: file, width: 320, height: 240, fps: 30, codec: .mjpeg)
        #expect(try record(writer, limit: 60) == 60)
        #expect(!writer.isShortOfSpace)
        try writer.finish()
        var st = stat()
        #expect(stat(file, &st) == 0)
        #expect(Int64(st.st_blocks) * 512 <= Int64(st.st_size) + 65_536, "blocks past the end were kept")
        #expect(try ffprobe(file) == (60, ""))
    }

    @Test(arguments: VideoCodec.allCases)
    func withoutSpaceHeldAFullDiskFailsAWriteAndTheFileIsCutToItsWholeFrames(codec: VideoCodec) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("coord-nohold-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("cam0.mkv").path
        let writer = try MatroskaWriter(path: file, width: 320, height: 240, fps: 30, codec: codec,
                                        calls: fullDisk(capacity: 400_000, holdsAhead: false))
        var failure: (any Error)?
        do { _ = try record(writer, limit: 100_000) } catch { failure = error }
        let error = try #require(failure as? MediaError)
        #expect(error.code == cff_averror(ENOSPC))
        #expect(writer.isShortOfSpace)
        // No room for the index or the trailer.
        #expect(throws: MediaError.self) { try writer.finish() }
        let before = try ffprobe(file)
        #expect(!before.complaints.isEmpty, "ffprobe found nothing wrong with the cut-short file")
        // Cut after its last whole cluster, it plays to its end: the frames lost are those past the count.
        let frames = try writer.cutToWholeFrames()
        #expect(frames > 10 && frames < writer.framesWritten)
        let probed = try ffprobe(file)
        #expect(probed.packets == frames)
        #expect(probed.complaints.isEmpty, "\(probed.complaints)")
    }

    @Test func aHeadroomFileHoldsSpacePastItsEndAndGivesItBack() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("coord-hold-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("rows.csv").path
        let file = try HeadroomFile(path: path, headroom: 1 << 20)
        #expect(file.write(Array("frame,group,center_us,flags\n".utf8)) == 0)
        var st = stat()
        #expect(fstat(file.descriptor, &st) == 0)
        #expect(st.st_size == 28)
        #expect(Int64(st.st_blocks) * 512 >= 1 << 20, "no space held past the end")
        file.close()
        #expect(stat(path, &st) == 0)
        #expect(st.st_size == 28 && Int64(st.st_blocks) * 512 <= 65_536)
    }
}
