// The error every V4L2 call throws: device, operation and errno, rendered as one sentence.
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A failed V4L2 call, rendered as one sentence naming the device, the operation and errno.
public struct V4L2Error: Error, CustomStringConvertible, Equatable, Sendable {
    /// The device path, e.g. "/dev/video0".
    public var device: String
    /// "open" or the ioctl's name, e.g. "VIDIOC_QUERYCAP".
    public var operation: String
    /// The errno the call left behind.
    public var errno: Int32
    /// Replaces the strerror text when the cause was found by us rather than reported by the kernel.
    public var detail: String?
    /// The control a VIDIOC_*_CTRL was about, by its v4l2-ctl name, e.g. "exposure_absolute".
    public var control: String?

    public init(device: String, operation: String, errno: Int32, detail: String? = nil, control: String? = nil) {
        self.device = device
        self.operation = operation
        self.errno = errno
        self.detail = detail
        self.control = control
    }

    /// The reason in words: `detail`, or the C library's text for `errno`.
    public var reason: String {
        if let detail { return detail }
        return String(cString: strerror(errno))
    }

    public var description: String {
        if operation == "open" {
            return "cannot open \(device): \(reason) (errno \(errno))."
        }
        let what = control.map { "\(operation) of \($0)" } ?? operation
        return "\(what) on \(device) failed: \(reason) (errno \(errno))."
    }

    /// What an errno means coming from a camera, where strerror's words mislead the operator.
    static func cameraDetail(operation: String, errno: Int32) -> String? {
        switch (operation, errno) {
        case ("open", _): return nil
        // uvcvideo answers STREAMON with ENOSPC when the USB bus has no isochronous bandwidth left.
        case ("VIDIOC_STREAMON", ENOSPC):
            return "not enough USB bandwidth left for this format and frame rate (No space left on device)"
        // After a USB disconnect the node is unregistered and every call but close answers ENODEV.
        case (_, ENODEV): return "No such device, the camera was unplugged or reset"
        default: return nil
        }
    }
}
