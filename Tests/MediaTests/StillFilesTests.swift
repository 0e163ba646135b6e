import CoordCore
import Foundation
import Testing
@testable import LibAV
import Pixels

/// A shot's stills kept from a lossless recording (issue 39): the chosen frames, each at its size, every pixel the
/// recorded picture's, read back by ffmpeg.
@Suite struct StillFilesTests {
    func scratch() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("stills-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    /// Frame k: a luma ramp shifted by k, neutral chroma, and the stripe carrying k as the sensor's frame counter.
    func recording(at path: String, frames: Int, width: Int = 320, height: Int = 240) throws {
        let writer = try MatroskaWriter(path: path, width: width, height: height, fps: 30, codec: .ffv1)
        for k in 0..<frames {
            let frame = PlanarFrame(width: width, height: height)
            for i in 0..<(width * height) { frame.luma[i] = UInt8(16 + (i + k * 7) % 220) }
            frame.cb.update(repeating: 128)
            frame.cr.update(repeating: 128)
            SyncStripe(ordinal: 3, frameCounter: UInt32(k), trueCenterMicroseconds: 1_000_000 + Int64(k) * 33_333).paint(into: frame)
            try writer.write(frame, ptsMicroseconds: Int64(k) * 33_333)
        }
        try writer.finish()
    }

    /// The image as ffmpeg decodes it, 8-bit RGB.
    func rgb(_ path: String) throws -> [UInt8] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["ffmpeg", "-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", "rgb24", "-"]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        return [UInt8](data)
    }

    @Test(arguments: [SnapPlan.Format.png, .tiff])
    func theChosenFramesAreKeptPixelForPixel(format: SnapPlan.Format) throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let mkv = dir.appendingPathComponent("cam0.mkv").path
        try recording(at: mkv, frames: 8)
        let outputs = [2: dir.appendingPathComponent("cam0_0.\(format.fileExtension)").path,
                       6: dir.appendingPathComponent("cam0_1.\(format.fileExtension)").path]
        let sizes = try StillFiles.write(from: mkv, outputs: outputs, format: format)
        #expect(sizes.keys.sorted() == [2, 6] && sizes.values.allSatisfy { $0 == (320, 240) })
        for (k, path) in outputs {
            let pixels = try rgb(path)
            #expect(pixels.count == 320 * 240 * 3)
            // Neutral chroma: R = G = B = the luma in full range, exactly (FFV1 and PNG/TIFF lose nothing).
            var luma = [UInt8](repeating: 0, count: 320 * 240)
            var exact = true
            for i in 0..<(320 * 240) {
                let (r, g, b) = (pixels[3 * i], pixels[3 * i + 1], pixels[3 * i + 2])
                if r != g || g != b { exact = false }
                luma[i] = r
            }
            #expect(exact)
            // The stripe's blocks decode from the still: this frame's counter, from the camera's ordinal.
            let recovered = luma.map { UInt8(16 + (Int($0) * 219 + 127) / 255) }
            let stripe = recovered.withUnsafeBufferPointer { SyncStripe.decode(luma: $0, stride: 320) }
            #expect(stripe?.frameCounter == UInt32(k) && stripe?.ordinal == 3)
            // A pixel of the ramp outside the stripe is the recorded luma, mapped to full range.
            let i = 200 * 320 + 200
            let y = 16 + (i + k * 7) % 220
            #expect(Int(luma[i]) == min(255, max(0, ((y - 16) * 76_309 + 32_768) >> 16)))
        }
    }

    @Test func aFrameTheRecordingDoesNotHoldIsOneSentence() throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let mkv = dir.appendingPathComponent("cam1.mkv").path
        try recording(at: mkv, frames: 4)
        #expect(throws: StillFiles.Failure("\(mkv) holds 4 frames, so frame 9 of the shot is not in it.")) {
            try StillFiles.write(from: mkv, outputs: [9: dir.appendingPathComponent("x.png").path], format: .png)
        }
        #expect(throws: StillFiles.Failure("cannot open \(dir.path)/none.mkv to take its stills from.")) {
            try StillFiles.write(from: dir.appendingPathComponent("none.mkv").path, outputs: [0: "/dev/null"], format: .png)
        }
    }
}
