// What can run without a camera: the error paths of opening, device listing and fourcc naming.
import Foundation
import Testing
import V4L2

#if canImport(Glibc)
import Glibc
#endif

private func makeTempDir() throws -> String {
    let dir = FileManager.default.temporaryDirectory
        .appendingPathComponent("v4l2-tests-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    return dir
}

private func openError(_ path: String) -> V4L2Error? {
    do {
        let device = try V4L2Device(path: path)
        device.close()
        return nil
    } catch let error as V4L2Error {
        return error
    } catch {
        Issue.record("expected a V4L2Error, got \(error)")
        return nil
    }
}

@Suite struct V4L2DeviceTests {
    @Test(.enabled(if: !FileManager.default.fileExists(atPath: "/dev/video0"), "this machine has a /dev/video0"))
    func openingAbsentVideo0ThrowsENOENT() throws {
        let error = try #require(openError("/dev/video0"))
        #expect(error.device == "/dev/video0")
        #expect(error.operation == "open")
        #expect(error.errno == ENOENT)
        #expect(error.description == "cannot open /dev/video0: No such file or directory (errno 2).")
    }

    @Test func openingAMissingPathThrowsENOENT() throws {
        let dir = try makeTempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/video0"
        let error = try #require(openError(path))
        #expect(error.device == path)
        #expect(error.errno == ENOENT)
        #expect(error.description.contains(path))
    }

    @Test func openingARegularFileThrowsAClearError() throws {
        let dir = try makeTempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/video0"
        try Data("not a camera".utf8).write(to: URL(fileURLWithPath: path))
        let error = try #require(openError(path))
        #expect(error.device == path)
        #expect(error.operation == "open")
        #expect(error.errno == ENODEV)
        #expect(error.description == "cannot open \(path): it is not a character device, so not a V4L2 device (errno 19).")
    }

    @Test func openingADirectoryThrows() throws {
        let dir = try makeTempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let error = try #require(openError(dir))
        #expect(error.errno == ENODEV)
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/dev/null")))
    func openingACharacterDeviceThatIsNotV4L2Throws() throws {
        // libv4l2 probes the node with VIDIOC_QUERYCAP, which /dev/null refuses.
        let error = try #require(openError("/dev/null"))
        #expect(error.device == "/dev/null")
        #expect(error.errno != 0)
        #expect(error.description.hasPrefix("cannot open /dev/null: "))
    }

    @Test func listDevicesOnAnEmptyDirectoryIsEmpty() throws {
        let dir = try makeTempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(V4L2Device.listDevices(devRoot: dir) == [])
    }

    @Test func listDevicesOnAMissingDirectoryIsEmpty() throws {
        #expect(V4L2Device.listDevices(devRoot: "/nonexistent-\(UUID().uuidString)") == [])
    }

    @Test func listDevicesKeepsVideoNodesInNumericOrder() throws {
        let dir = try makeTempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for name in ["video10", "video2", "video0", "videoX", "video", "media0", "v4l-subdev0"] {
            #expect(FileManager.default.createFile(atPath: dir + "/" + name, contents: nil))
        }
        #expect(V4L2Device.listDevices(devRoot: dir) == [dir + "/video0", dir + "/video2", dir + "/video10"])
    }

    @Test func errorsRenderAsOneSentence() {
        let error = V4L2Error(device: "/dev/video0", operation: "VIDIOC_QUERYCAP", errno: ENOTTY)
        #expect(error.description == "VIDIOC_QUERYCAP on /dev/video0 failed: Inappropriate ioctl for device (errno 25).")
    }

    @Test func fourccNamesPixelFormats() {
        #expect(V4L2Device.fourcc(0x5659_5559) == "YUYV")
        #expect(V4L2Device.fourcc(0x4750_4A4D) == "MJPG")
        #expect(V4L2Device.fourcc(0x3231_564E) == "NV12")
    }

    @Test func frameIntervalPeriod() {
        #expect(V4L2FrameInterval(numerator: 1, denominator: 30).periodUs! == 1_000_000.0 / 30)
        #expect(V4L2FrameInterval(numerator: 1, denominator: 0).periodUs == nil)
    }
}
