// The scripted driver's controls, its own bookkeeping (fds, threads) and its camera scripts, through V4L2Device.
import Foundation
import Testing
import V4L2
import V4L2Simulator

#if canImport(Glibc)
import Glibc
#endif

@Suite struct ScriptedDriverTests {
    // ---- controls ----

    @Test func lockControlsTurnsAutoOffAndSetsTheValues() throws {
        let (driver, log) = scripted(["/dev/video0": Scripted.uvcWebcam])
        let device = try V4L2Device(path: "/dev/video0", driver: driver)
        defer { device.close() }
        let before = try #require(try device.control(.exposureAuto))
        #expect(before.value == 3 && before.default == 3)  // aperture priority, the UVC default
        let notes = try device.lockControls(exposure100us: 100, whiteBalanceKelvin: 5000, focus: 30)
        #expect(notes == [])
        #expect(try device.control(.exposureAuto)?.value == 1)  // V4L2_EXPOSURE_MANUAL
        #expect(try device.control(.whiteBalanceAuto)?.value == 0)
        #expect(try device.control(.focusAuto)?.value == 0)
        let exposure = try #require(try device.control(.exposureAbsolute))
        #expect(exposure.value == 100 && exposure.min == 3 && exposure.max == 2047)
        let temperature = try #require(try device.control(.whiteBalanceTemperature))
        #expect(temperature.value == 5000 && temperature.min == 2000 && temperature.max == 6500)
        let focus = try #require(try device.control(.focusAbsolute))
        #expect(focus.value == 30 && focus.min == 0 && focus.max == 250)
        // The locked exposure is what the sensor uses: 100 × 100 µs.
        try device.setFormat(width: 640, height: 480, pixelFormat: mjpg)
        try device.startStreaming()
        _ = try capture(device, count: 2)
        #expect(log.all.prefix(2).allSatisfy { $0.exposureUs == 10_000 })
    }

    @Test func lockControlsReportsWhatTheCameraKeptOtherwise() throws {
        let (driver, _) = scripted(["/dev/video0": Scripted.uvcWebcam])
        let device = try V4L2Device(path: "/dev/video0", driver: driver)
        defer { device.close() }
        let notes = try device.lockControls(exposure100us: 5000, whiteBalanceKelvin: nil, focus: 33)
        #expect(notes.count == 2)
        #expect(notes.allSatisfy { $0.hasPrefix("/dev/video0 ") && $0.hasSuffix(".") })
        #expect(notes.contains { $0.contains("exposure_absolute to 2047, not the 5000 asked") })
        #expect(notes.contains { $0.contains("focus_absolute to 35, not the 33 asked") })  // a step of 5
        // White balance was not asked for, so it stays automatic.
        #expect(try device.control(.whiteBalanceAuto)?.value == 1)
    }

    @Test func manualValuesAreRefusedWhileAutoIsOn() throws {
        let (driver, _) = scripted(["/dev/video0": Scripted.uvcWebcam])
        let device = try V4L2Device(path: "/dev/video0", driver: driver)
        defer { device.close() }
        let refused = try #require(v4l2Error { try device.setControl(.exposureAbsolute, 100) })
        #expect(refused.errno == EACCES)
        #expect(refused.control == "exposure_absolute")
        expectOneSentence(refused, device: "/dev/video0", operation: "VIDIOC_S_CTRL")
        #expect(refused.description
            == "VIDIOC_S_CTRL of exposure_absolute on /dev/video0 failed: Permission denied (errno 13).")
        let notAMode = try #require(v4l2Error { try device.setControl(.exposureAuto, 2) })  // shutter priority: not offered
        #expect(notAMode.errno == EINVAL)
        let outOfRange = try #require(v4l2Error { try device.setControl(.exposureAuto, 9) })
        #expect(outOfRange.errno == ERANGE)
        #expect(try device.setControl(.exposureAuto, 1) == 1)
        #expect(try device.setControl(.exposureAbsolute, 1) == 3)  // clamped to the minimum
    }

    @Test func lockControlsOnTheMetadataNodeNamesWhatItLacks() throws {
        let (driver, _) = scripted(["/dev/video1": Scripted.metadataNode])
        let device = try V4L2Device(path: "/dev/video1", driver: driver)
        defer { device.close() }
        #expect(try device.control(.exposureAuto) == nil)
        let notes = try device.lockControls(exposure100us: 100, whiteBalanceKelvin: 5000, focus: 30)
        #expect(notes == [
            "/dev/video1 has no exposure_auto control, so its exposure is not locked.",
            "/dev/video1 has no exposure_absolute control, so its exposure is not locked.",
            "/dev/video1 has no white_balance_temperature_auto control, so its white balance is not locked.",
            "/dev/video1 has no white_balance_temperature control, so its white balance is not locked.",
            "/dev/video1 has no focus_auto control, so its focus is not locked.",
            "/dev/video1 has no focus_absolute control, so its focus is not locked.",
        ])
    }

    @Test func lockControlsThrowsWhenTheCameraIsGone() throws {
        let (driver, _) = scripted(["/dev/video0": Scripted.uvcWebcam])
        let device = try V4L2Device(path: "/dev/video0", driver: driver)
        defer { device.close() }
        driver.unplug("/dev/video0")
        let error = try #require(v4l2Error { _ = try device.lockControls(exposure100us: 100, whiteBalanceKelvin: nil, focus: nil) })
        #expect(error.errno == ENODEV)
        expectOneSentence(error, device: "/dev/video0", operation: "VIDIOC_QUERYCTRL")
    }

    // ---- the driver itself ----

    @Test func callsOnAnUnknownFdAreEBADF() throws {
        let (driver, _) = scripted(["/dev/video0": Scripted.uvcWebcam])
        var type = Int32(1)
        errno = 0
        #expect(driver.ioctl(4242, .streamon, &type) == -1)
        #expect(errno == EBADF)
        #expect(driver.poll(4242, timeoutMs: 0) == -1)
        #expect(errno == EBADF)
        #expect(driver.close(4242) == -1)
        #expect(errno == EBADF)
        #expect(driver.mmap(4242, length: 4096, offset: 0) == nil)
        #expect(errno == EBADF)
        let fd = driver.open("/dev/video0", flags: O_RDWR | O_NONBLOCK)
        #expect(fd >= 0)
        #expect(driver.close(fd) == 0)
        #expect(driver.ioctl(fd, .streamon, &type) == -1)
        #expect(errno == EBADF)
    }

    @Test func twoCamerasStreamAtOnceFromTwoThreads() throws {
        let (driver, log) = scripted(["/dev/video0": Scripted.uvcWebcam, "/dev/video2": Scripted.uvcWebcam])
        let counts = Counts()
        DispatchQueue.concurrentPerform(iterations: 2) { i in
            let path = i == 0 ? "/dev/video0" : "/dev/video2"
            do {
                let device = try V4L2Device(path: path, driver: driver)
                defer { device.close() }
                try device.setFormat(width: 640, height: 480, pixelFormat: i == 0 ? mjpg : yuyv)
                try device.startStreaming(bufferCount: 8)
                let frames = try capture(device, count: 10)
                counts.set(path, frames.map(\.sequence))
            } catch {
                Issue.record("\(path): \(error)")
            }
        }
        #expect(counts.get("/dev/video0") == Array(0..<10))
        #expect(counts.get("/dev/video2") == Array(0..<10))
        #expect(Set(log.all.map(\.fourcc)) == ["MJPG", "YUYV"])
    }

    // ---- scripts ----

    @Test func loadsAScriptFromJSON() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("cameras-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: url) }
        try Data("""
            {"devices": {
              "/dev/video0": {"unplugAfterFrames": 90, "dropSequences": [10, 11], "timestampSource": "eof",
                              "timestampJitterUs": 120, "rateErrorPPM": -35.5},
              "/dev/video1": {"profile": "metadata-node"},
              "/dev/video2": {"profile": "uvc-webcam", "streamonError": "ENOSPC", "openError": "EBUSY"}
            }}
            """.utf8).write(to: url)
        let script = try Scripted.load(url)
        #expect(script.devices.count == 3)
        let video0 = try #require(script.devices["/dev/video0"])
        #expect(video0.profile == "uvc-webcam")
        #expect(video0.unplugAfterFrames == 90)
        #expect(video0.dropSequences == [10, 11])
        #expect(video0.timestampSource == "eof")
        #expect(video0.rateErrorPPM == -35.5)
        #expect(script.devices["/dev/video1"]?.profile == "metadata-node")
        #expect(script.devices["/dev/video2"]?.streamonError == "ENOSPC")
    }

    @Test(arguments: [
        (#"{"devices": {"/dev/video0": {"profile": "gopro"}}}"#, #"names an unknown profile "gopro" for /dev/video0"#),
        (#"{"devices": {"/dev/video0": {"openError": "EWHATEVER"}}}"#, #"unknown openError "EWHATEVER""#),
        (#"{"devices": {"/dev/video0": {"unplugAfterFrames": "soon"}}}"#, "is not a valid camera script: the value of devices"),
        ("{not json", "is not a valid camera script"),
    ])
    func aBadScriptIsOneSentenceNamingTheFile(json: String, words: String) throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("cameras-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: url) }
        try Data(json.utf8).write(to: url)
        do {
            _ = try Scripted.load(url)
            Issue.record("\(json) loaded")
        } catch {
            let text = "\(error)"
            #expect(text.hasPrefix("the camera script \(url.path) "), "\(text)")
            #expect(text.contains(words), "\(text)")
            #expect(text.hasSuffix("."), "\(text)")
            #expect(!text.contains("\n"), "\(text)")
        }
    }

    @Test func aMissingScriptNamesTheFile() throws {
        let url = URL(fileURLWithPath: "/nonexistent-\(UUID().uuidString)/cameras.json")
        do {
            _ = try Scripted.load(url)
            Issue.record("a missing file loaded")
        } catch {
            let text = "\(error)"
            #expect(text.hasPrefix("the camera script \(url.path) cannot be read"), "\(text)")
            #expect(text.hasSuffix("."))
        }
    }
}
