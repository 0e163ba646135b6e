// The only Swift file that calls libv4l2 (through the cv4l2_* shims in Sources/CV4L2/shim.h).
import CV4L2

/// The real driver: every call goes to libv4l2 (which converts formats the hardware lacks) and the kernel.
// @unchecked: stateless; every call goes to libv4l2, which is thread-safe per file descriptor.
public final class LibV4L2Driver: V4L2Driver, @unchecked Sendable {
    /// Stateless, so one instance serves every device.
    public static let shared = LibV4L2Driver()

    private init() {}

    public func isCharacterDevice(_ path: String) -> Int32 {
        cv4l2_is_char_device(path)
    }

    public func open(_ path: String, flags: Int32) -> Int32 {
        cv4l2_open(path, flags)
    }

    public func close(_ fd: Int32) -> Int32 {
        cv4l2_close(fd)
    }

    public func ioctl(_ fd: Int32, _ request: V4L2Request, _ argument: UnsafeMutableRawPointer) -> Int32 {
        switch request {
        case .querycap: cv4l2_ioctl_querycap(fd, argument.assumingMemoryBound(to: v4l2_capability.self))
        case .enumFmt: cv4l2_ioctl_enum_fmt(fd, argument.assumingMemoryBound(to: v4l2_fmtdesc.self))
        case .enumFramesizes: cv4l2_ioctl_enum_framesizes(fd, argument.assumingMemoryBound(to: v4l2_frmsizeenum.self))
        case .enumFrameintervals:
            cv4l2_ioctl_enum_frameintervals(fd, argument.assumingMemoryBound(to: v4l2_frmivalenum.self))
        case .gFmt: cv4l2_ioctl_g_fmt(fd, argument.assumingMemoryBound(to: v4l2_format.self))
        case .sFmt: cv4l2_ioctl_s_fmt(fd, argument.assumingMemoryBound(to: v4l2_format.self))
        case .gParm: cv4l2_ioctl_g_parm(fd, argument.assumingMemoryBound(to: v4l2_streamparm.self))
        case .sParm: cv4l2_ioctl_s_parm(fd, argument.assumingMemoryBound(to: v4l2_streamparm.self))
        case .reqbufs: cv4l2_ioctl_reqbufs(fd, argument.assumingMemoryBound(to: v4l2_requestbuffers.self))
        case .querybuf: cv4l2_ioctl_querybuf(fd, argument.assumingMemoryBound(to: v4l2_buffer.self))
        case .qbuf: cv4l2_ioctl_qbuf(fd, argument.assumingMemoryBound(to: v4l2_buffer.self))
        case .dqbuf: cv4l2_ioctl_dqbuf(fd, argument.assumingMemoryBound(to: v4l2_buffer.self))
        case .streamon: cv4l2_ioctl_streamon(fd, argument.assumingMemoryBound(to: Int32.self))
        case .streamoff: cv4l2_ioctl_streamoff(fd, argument.assumingMemoryBound(to: Int32.self))
        case .queryctrl: cv4l2_ioctl_queryctrl(fd, argument.assumingMemoryBound(to: v4l2_queryctrl.self))
        case .gCtrl: cv4l2_ioctl_g_ctrl(fd, argument.assumingMemoryBound(to: v4l2_control.self))
        case .sCtrl: cv4l2_ioctl_s_ctrl(fd, argument.assumingMemoryBound(to: v4l2_control.self))
        }
    }

    public func mmap(_ fd: Int32, length: Int, offset: Int64) -> UnsafeMutableRawPointer? {
        guard let start = cv4l2_mmap(fd, length, offset), cv4l2_map_failed(start) == 0 else { return nil }
        return start
    }

    public func munmap(_ start: UnsafeMutableRawPointer, length: Int) -> Int32 {
        cv4l2_munmap(start, length)
    }

    public func poll(_ fd: Int32, timeoutMs: Int32) -> Int32 {
        cv4l2_poll(fd, timeoutMs)
    }
}
