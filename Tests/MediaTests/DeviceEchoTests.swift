import CoordCore
import Foundation
import Capture
import Testing
import V4L2

/// A device id from the command line or a node file is repeated in a sentence cut short, its control characters
/// escaped (issue 34 item 7: a 10 kB device id was echoed whole, a newline in it split the sentence).
@Suite("Device ids in sentences")
struct DeviceEchoTests {
    static let long = "/dev/" + String(repeating: "v", count: 10_000)

    static func readable(_ sentence: String) -> Bool {
        sentence.utf8.count < 400 && !sentence.contains("\n") && !sentence.contains("\r")
    }

    @Test func aV4L2DeviceThatCannotBeOpenedIsNamedShort() {
        for errno in [ENOENT, EACCES, EBUSY, ENAMETOOLONG] {
            let sentence = V4L2Camera.openProblem(path: Self.long, error: V4L2Error(device: Self.long, operation: "open", errno: errno))
            #expect(Self.readable(sentence), "\(sentence.prefix(300))")
            #expect(sentence.contains("… (10005 bytes)"), "\(sentence.prefix(300))")
        }
        let newline = "/dev/vid\neo0"
        let sentence = V4L2Camera.openProblem(path: newline, error: V4L2Error(device: newline, operation: "open", errno: ENOTTY))
        #expect(sentence == #"cannot open /dev/vid\neo0: Inappropriate ioctl for device (errno 25)"#)
        #expect(V4L2Camera.openProblem(path: newline, error: V4L2Error(device: newline, operation: "open", errno: ENOENT))
                == #"/dev/vid\neo0 does not exist (is the camera plugged in?)"#)
    }

    @Test func aFailedCallOnALongDevicePathNamesItShort() {
        let error = V4L2Error(device: Self.long, operation: "VIDIOC_S_FMT", errno: EINVAL)
        let sentence = V4L2Camera.openProblem(path: Self.long, error: error)
        #expect(Self.readable(sentence) && sentence.hasPrefix("VIDIOC_S_FMT on /dev/vvv"), "\(sentence.prefix(300))")
    }

    @Test func anALSADeviceThatCannotBeOpenedIsNamedShortWithItsReason() {
        for device in ["hw:" + String(repeating: "9", count: 10_000), "hw:nosuch\ncard"] {
            do {
                try ALSAMicrophone(device: device, localClock: { $0 }).start()
                Issue.record("an ALSA device named \(device.prefix(20)) opened")
            } catch {
                let sentence = "\(error)"
                #expect(Self.readable(sentence), "\(sentence.prefix(300))")
                #expect(sentence.hasPrefix("cannot open ALSA capture device hw:"), "\(sentence.prefix(300))")
                // The reason survives the cut (ALSA's own words after the name).
                #expect(sentence.range(of: #": [A-Za-z]"#, options: .regularExpression, range: sentence.index(sentence.startIndex, offsetBy: 32)..<sentence.endIndex) != nil,
                        "\(sentence)")
            }
        }
    }
}
