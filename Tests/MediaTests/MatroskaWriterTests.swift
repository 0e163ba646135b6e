import CoordCore
import Foundation
import Testing
@testable import LibAV
@testable import Pixels

/// Runs a command-line tool found on PATH and returns its exit status and standard output.
private func run(_ tool: String, _ arguments: [String]) throws -> (status: Int32, output: Data) {
    let path = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        .split(separator: ":").map { "\($0)/\(tool)" }
        .first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/bin/\(tool)"
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    let stdout = Pipe()
    process.standardOutput = stdout
    process.standardError = FileHandle.nullDevice
    try process.run()
    let output = stdout.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, output)
}

/// A fresh directory under the temporary directory, removed by `cleanUp`.
private struct Scratch {
    let directory: URL
    init() throws {
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("coord-media-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }
    func file(_ name: String) -> String { directory.appendingPathComponent(name).path }
    func cleanUp() { try? FileManager.default.removeItem(at: directory) }
}

private struct Probe {
    var frames: Int
    var codecName: String
    var width: Int
    var height: Int
}

private func probe(_ file: String) throws -> Probe? {
    let result = try run("ffprobe", [
        "-v", "error", "-count_frames", "-select_streams", "v:0",
        "-show_entries", "stream=nb_read_frames,codec_name,width,height", "-of", "json", file,
    ])
    guard result.status == 0,
          let json = try JSONSerialization.jsonObject(with: result.output) as? [String: Any],
          let stream = (json["streams"] as? [[String: Any]])?.first,
          let frames = Int(stream["nb_read_frames"] as? String ?? "") else { return nil }
    return Probe(frames: frames, codecName: stream["codec_name"] as? String ?? "",
                 width: stream["width"] as? Int ?? 0, height: stream["height"] as? Int ?? 0)
}

/// Every frame of `file` decoded to 8-bit gray by the ffmpeg CLI, one stripe (or nil) per frame.
private func decodeStripes(_ file: String, width: Int, height: Int) throws -> [SyncStripe?] {
    let result = try run("ffmpeg", ["-v", "error", "-i", file, "-fps_mode", "passthrough",
                                    "-f", "rawvideo", "-pix_fmt", "gray", "-"])
    guard result.status == 0 else { return [] }
    let frameSize = width * height
    #expect(result.output.count % frameSize == 0)
    return result.output.withUnsafeBytes { raw in
        let bytes = raw.bindMemory(to: UInt8.self)
        return stride(from: 0, to: bytes.count - frameSize + 1, by: frameSize).map { offset in
            SyncStripe.decode(luma: UnsafeBufferPointer(rebasing: bytes[offset..<(offset + frameSize)]), stride: width)
        }
    }
}

/// Writes `count` painted frames 1/fps apart, with a repeat after every frame listed in `repeatAfter`;
/// returns the stripes in file order.
@discardableResult
private func writeTake(_ writer: MatroskaWriter, count: Int, repeatAfter: Set<Int>, ordinal: UInt8 = 2) throws -> [SyncStripe] {
    let frame = PlanarFrame(width: writer.width, height: writer.height)
    let step = 1_000_000 / Int64(writer.fps)
    var pts: Int64 = 0
    var expected: [SyncStripe] = []
    for i in 0..<count {
        let stripe = SyncStripe(ordinal: ordinal, frameCounter: UInt32(i), trueCenterMicroseconds: 5_000_000_000 + pts)
        TestPattern.paint(into: frame, frameCounter: UInt32(i), ordinal: ordinal)
        stripe.paint(into: frame)
        try writer.write(frame, ptsMicroseconds: pts)
        expected.append(stripe)
        pts += step
        if repeatAfter.contains(i) {
            try writer.writeRepeat(ptsMicroseconds: pts)
            expected.append(stripe)
            pts += step
        }
    }
    return expected
}

@Suite struct MatroskaWriterTests {
    @Test(arguments: VideoCodec.allCases)
    func ffprobeCountsEveryFrameIncludingRepeats(codec: VideoCodec) throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let file = scratch.file("cam0-\(codec.rawValue).mkv")
        let writer = try MatroskaWriter(path: file, width: 320, height: 240, fps: 30, codec: codec)
        try writeTake(writer, count: 10, repeatAfter: [3, 4, 8])
        #expect(writer.framesWritten == 13)
        try writer.finish()
        let probed = try #require(try probe(file))
        #expect(probed.frames == 13)
        #expect(probed.codecName == (codec == .h264 ? "h264" : codec.rawValue))
        #expect(probed.width == 320 && probed.height == 240)
    }

    @Test(arguments: [VideoCodec.mjpeg, .ffv1, .h264])
    func stripesSurviveEncodingInOrder(codec: VideoCodec) throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let file = scratch.file("stripes.mkv")
        let writer = try MatroskaWriter(path: file, width: 640, height: 360, fps: 25, codec: codec, quality: 3)
        let expected = try writeTake(writer, count: 12, repeatAfter: [0, 5, 11])
        try writer.finish()
        let decoded = try decodeStripes(file, width: 640, height: 360)
        #expect(decoded == expected.map { Optional($0) })
    }

    @Test func packetTimesAreThePresentationTimesGiven() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let file = scratch.file("times.mkv")
        let writer = try MatroskaWriter(path: file, width: 160, height: 120, fps: 30, codec: .mjpeg)
        let frame = PlanarFrame(width: 160, height: 120)
        try writer.write(frame, ptsMicroseconds: 0)
        try writer.write(frame, ptsMicroseconds: 33_333)
        try writer.writeRepeat(ptsMicroseconds: 100_000)
        try writer.write(frame, ptsMicroseconds: 133_400)
        try writer.finish()
        let result = try run("ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries", "packet=pts",
                                         "-of", "csv=p=0", file])
        let pts = String(decoding: result.output, as: UTF8.self).split(whereSeparator: \.isNewline).map(String.init)
        #expect(pts == ["0", "33", "100", "133"])
    }

    @Test func subMillisecondSpacingIsAccepted() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let file = scratch.file("close.mkv")
        let writer = try MatroskaWriter(path: file, width: 160, height: 120, fps: 30, codec: .ffv1)
        let frame = PlanarFrame(width: 160, height: 120)
        try writer.write(frame, ptsMicroseconds: 10)
        try writer.write(frame, ptsMicroseconds: 400)  // both round to the same Matroska millisecond
        try writer.writeRepeat(ptsMicroseconds: 900)
        try writer.finish()
        #expect(try probe(file)?.frames == 3)
    }

    @Test func metadataIsWrittenIntoTheContainer() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let file = scratch.file("meta.mkv")
        let writer = try MatroskaWriter(path: file, width: 160, height: 120, fps: 30, codec: .ffv1,
                                        metadata: ["coord_take": "take-0042", "coord_camera": "cam1"])
        try writer.write(PlanarFrame(width: 160, height: 120), ptsMicroseconds: 0)
        try writer.finish()
        let result = try run("ffprobe", ["-v", "error", "-show_entries", "format_tags", "-of", "json", file])
        let json = try JSONSerialization.jsonObject(with: result.output) as? [String: Any]
        let tags = (json?["format"] as? [String: Any])?["tags"] as? [String: String] ?? [:]
        // Matroska stores tag names upper-cased.
        let upper = Dictionary(uniqueKeysWithValues: tags.map { ($0.key.uppercased(), $0.value) })
        #expect(upper["COORD_TAKE"] == "take-0042")
        #expect(upper["COORD_CAMERA"] == "cam1")
    }

    @Test func theTimecodeIsAGlobalAndAVideoTrackTag() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let file = scratch.file("timecode.mkv")
        let writer = try MatroskaWriter(path: file, width: 160, height: 120, fps: 30, codec: .mjpeg,
                                        metadata: ["coord_take": "take-0042", "timecode": "14:15:00:03"])
        try writeTake(writer, count: 3, repeatAfter: [])
        try writer.finish()
        let result = try run("ffprobe", ["-v", "error", "-show_entries", "format_tags:stream_tags", "-of", "json", file])
        #expect(result.status == 0)
        let json = try #require(try JSONSerialization.jsonObject(with: result.output) as? [String: Any])
        func upper(_ tags: Any?) -> [String: String] {
            Dictionary(uniqueKeysWithValues: ((tags as? [String: String]) ?? [:]).map { ($0.key.uppercased(), $0.value) })
        }
        #expect(upper((json["format"] as? [String: Any])?["tags"])["TIMECODE"] == "14:15:00:03")
        let stream = (json["streams"] as? [[String: Any]])?.first
        #expect(upper(stream?["tags"])["TIMECODE"] == "14:15:00:03")
        // Only the timecode is copied to the track; the take's own tags stay global.
        #expect(upper(stream?["tags"])["COORD_TAKE"] == nil)
    }

    @Test(arguments: VideoCodec.allCases)
    func anUnfinishedFileIsMostlyPlayable(codec: VideoCodec) throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let file = scratch.file("crash.mkv")
        let writer = try MatroskaWriter(path: file, width: 320, height: 240, fps: 30, codec: codec)
        try writeTake(writer, count: 60, repeatAfter: [])  // 2 s at 30 fps
        // What a crashed node would leave: the bytes on disk now, with no trailer and no cues.
        let snapshot = scratch.file("snapshot.mkv")
        try FileManager.default.copyItem(atPath: file, toPath: snapshot)
        try writer.finish()
        let probed = try #require(try probe(snapshot))
        // Only the open cluster is still in memory: a couple of small intra frames, or up to a second of h264.
        let lag = codec == .h264 ? 30 * MatroskaWriter.clusterMilliseconds / 1000 + 1 : 3
        #expect(probed.frames >= 60 - lag)
    }

    @Test func anUnwritablePathThrowsAnErrorNamingIt() throws {
        let path = "/nonexistent-coord-\(UUID().uuidString)/cam0.mkv"
        do {
            _ = try MatroskaWriter(path: path, width: 320, height: 240, fps: 30, codec: .mjpeg)
            Issue.record("opening \(path) should have failed")
        } catch let error as MediaError {
            #expect(error.path == path)
            // A recording's file is opened by the writer itself (it holds disk space past its end), not avio_open.
            #expect(error.call == "open")
            #expect(error.code == -2)  // AVERROR(ENOENT)
            #expect(error.description.contains(path))
            #expect(error.description.contains("open failed: No such file or directory"))
        }
    }

    @Test(arguments: [(321, 240), (320, 239), (0, 240), (-2, 240)])
    func badSizesAreRejectedBeforeCreatingAFile(size: (Int, Int)) throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let file = scratch.file("odd.mkv")
        let error = try #require(throws: MediaError.self) {
            try MatroskaWriter(path: file, width: size.0, height: size.1, fps: 30, codec: .mjpeg)
        }
        #expect(error.code == -22)
        #expect(error.description.contains(file))
        #expect(!FileManager.default.fileExists(atPath: file))
    }

    @Test func misuseThrowsInsteadOfCorruptingTheFile() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let file = scratch.file("misuse.mkv")
        let writer = try MatroskaWriter(path: file, width: 160, height: 120, fps: 30, codec: .mjpeg)
        #expect(throws: MediaError.self) { try writer.writeRepeat(ptsMicroseconds: 0) }
        #expect(throws: MediaError.self) { try writer.write(PlanarFrame(width: 320, height: 240), ptsMicroseconds: 0) }
        try writer.write(PlanarFrame(width: 160, height: 120), ptsMicroseconds: 1000)
        #expect(throws: MediaError.self) { try writer.write(PlanarFrame(width: 160, height: 120), ptsMicroseconds: 1000) }
        #expect(throws: MediaError.self) { try writer.writeRepeat(ptsMicroseconds: 500) }
        try writer.finish()
        try writer.finish()  // idempotent
        #expect(throws: MediaError.self) { try writer.write(PlanarFrame(width: 160, height: 120), ptsMicroseconds: 9000) }
        #expect(writer.framesWritten == 1)
        #expect(try probe(file)?.frames == 1)
    }

    @Test func mediaErrorDescriptionIsOneSentence() {
        let error = MediaError(operation: "create", path: "/x/cam0.mkv", call: "avio_open", code: -2,
                               reason: "No such file or directory")
        #expect(error.description == "cannot create /x/cam0.mkv: avio_open failed: No such file or directory (AVERROR -2).")
    }
}
