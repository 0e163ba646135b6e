// A camera whose STREAMON uvcvideo refuses for bandwidth (ENOSPC) says so in one sentence naming the camera's
// device and the USB bus it shares (issue 36 item 4); other start failures keep their own sentence.
import Foundation
import Testing
import V4L2
import V4L2Simulator
@testable import Capture

#if canImport(Glibc)
import Glibc
#endif

struct V4L2BandwidthTests {
    @Test func aBandwidthRefusalNamesTheBusOfTheLabsDummyController() {
        let refused = V4L2Error(device: "/dev/video0", operation: "VIDIOC_STREAMON", errno: ENOSPC)
        let why = V4L2Camera.startProblem(refused, busInfo: "usb-dummy_hcd.0-1")
        #expect(why == "VIDIOC_STREAMON on /dev/video0 failed: not enough USB bandwidth left for this format and "
            + "frame rate on the bus of controller dummy_hcd.0 (usb-dummy_hcd.0-1), which the cameras already "
            + "streaming on it hold (No space left on device) (errno 28)")
    }

    @Test func aCameraBehindAHubNamesItsControllerNotItsPort() {
        let refused = V4L2Error(device: "/dev/video2", operation: "VIDIOC_STREAMON", errno: ENOSPC)
        let why = V4L2Camera.startProblem(refused, busInfo: "usb-0000:00:14.0-3.2")
        #expect(why.contains("on the bus of controller 0000:00:14.0 (usb-0000:00:14.0-3.2)"), "\(why)")
    }

    @Test(arguments: [("VIDIOC_STREAMON", EBUSY), ("VIDIOC_REQBUFS", ENOSPC)])
    func otherFailuresKeepTheirSentence(operation: String, code: Int32) {
        let error = V4L2Error(device: "/dev/video0", operation: operation, errno: code)
        #expect(V4L2Camera.startProblem(error, busInfo: "usb-dummy_hcd.0-1") == V4L2Camera.sentence(error))
    }

    @Test func aScriptedWebcamRefusedAtStreamOnNamesItsBus() throws {
        let device = ScriptedV4L2Driver.Device(streamonError: "ENOSPC")  // the uvc-webcam profile
        let driver = ScriptedV4L2Driver(script: .init(devices: ["/dev/video0": device]), seed: 7, painter: { _ in 0 })
        let camera = try V4L2Camera(path: "/dev/video0", driver: driver, width: 640, height: 480,
                                    periodMicroseconds: 1_000_000 / 30, codec: .mjpeg, localClock: { $0 })
        defer { camera.stop() }
        let bus = try #require(camera.identity.busInfo)
        do {
            try camera.start(alignedTo: nil)
            Issue.record("a refused STREAMON must throw")
        } catch {
            let why = "\(error)"
            #expect(why.contains("/dev/video0") && why.contains("not enough USB bandwidth") && why.contains(bus),
                    "\(why)")
            #expect(!why.contains("\n"))
        }
    }
}
