// The seam between V4L2Device and whatever answers its calls: libv4l2 on a real box, a script in tests.
import CV4L2

/// The one interface every V4L2 call goes through: the real one calls libv4l2 through the shims, a scripted
/// one answers like a driver. Every method returns like the C call (-1 with errno set on failure).
public protocol V4L2Driver: AnyObject {
    /// 1 if `path` is a character device, 0 if it exists but is something else, -1 with errno if stat fails.
    func isCharacterDevice(_ path: String) -> Int32
    /// Opens a device node; the fd, or -1 with errno.
    func open(_ path: String, flags: Int32) -> Int32
    /// Closes an fd from `open`; the fd is gone whatever this returns.
    func close(_ fd: Int32) -> Int32
    /// One ioctl; `argument` points at the C struct the request takes (an Int32 buffer type for STREAMON/OFF).
    func ioctl(_ fd: Int32, _ request: V4L2Request, _ argument: UnsafeMutableRawPointer) -> Int32
    /// Maps a driver buffer read/write shared at the offset VIDIOC_QUERYBUF gave; nil with errno on failure.
    func mmap(_ fd: Int32, length: Int, offset: Int64) -> UnsafeMutableRawPointer?
    /// Unmaps a buffer from `mmap`.
    func munmap(_ start: UnsafeMutableRawPointer, length: Int) -> Int32
    /// Waits up to `timeoutMs` for a filled buffer: 1 readable, 0 timeout, -1 with errno (a vanished device: ENODEV).
    func poll(_ fd: Int32, timeoutMs: Int32) -> Int32
}

/// The ioctls coord issues, named as the kernel names them (the raw value is the name errors show).
public enum V4L2Request: String, Sendable, CaseIterable {
    case querycap = "VIDIOC_QUERYCAP"
    case enumFmt = "VIDIOC_ENUM_FMT"
    case enumFramesizes = "VIDIOC_ENUM_FRAMESIZES"
    case enumFrameintervals = "VIDIOC_ENUM_FRAMEINTERVALS"
    case gFmt = "VIDIOC_G_FMT"
    case sFmt = "VIDIOC_S_FMT"
    case gParm = "VIDIOC_G_PARM"
    case sParm = "VIDIOC_S_PARM"
    case reqbufs = "VIDIOC_REQBUFS"
    case querybuf = "VIDIOC_QUERYBUF"
    case qbuf = "VIDIOC_QBUF"
    case dqbuf = "VIDIOC_DQBUF"
    case streamon = "VIDIOC_STREAMON"
    case streamoff = "VIDIOC_STREAMOFF"
    case queryctrl = "VIDIOC_QUERYCTRL"
    case gCtrl = "VIDIOC_G_CTRL"
    case sCtrl = "VIDIOC_S_CTRL"
}

/// The controls coord locks across a rig.
public enum V4L2Control: String, Sendable, CaseIterable {
    case exposureAuto, exposureAbsolute, whiteBalanceAuto, whiteBalanceTemperature, focusAuto, focusAbsolute, gain

    /// The V4L2_CID_* the kernel knows it by.
    public var id: UInt32 {
        switch self {
        case .exposureAuto: CV4L2_CID_EXPOSURE_AUTO
        case .exposureAbsolute: CV4L2_CID_EXPOSURE_ABSOLUTE
        case .whiteBalanceAuto: CV4L2_CID_AUTO_WHITE_BALANCE
        case .whiteBalanceTemperature: CV4L2_CID_WHITE_BALANCE_TEMPERATURE
        case .focusAuto: CV4L2_CID_FOCUS_AUTO
        case .focusAbsolute: CV4L2_CID_FOCUS_ABSOLUTE
        case .gain: CV4L2_CID_GAIN
        }
    }

    /// The name `v4l2-ctl --list-ctrls` shows, used in sentences for the operator.
    public var name: String {
        switch self {
        case .exposureAuto: "exposure_auto"
        case .exposureAbsolute: "exposure_absolute"
        case .whiteBalanceAuto: "white_balance_temperature_auto"
        case .whiteBalanceTemperature: "white_balance_temperature"
        case .focusAuto: "focus_auto"
        case .focusAbsolute: "focus_absolute"
        case .gain: "gain"
        }
    }

    /// The control with this V4L2_CID_*, if coord knows it.
    public init?(id: UInt32) {
        guard let control = Self.allCases.first(where: { $0.id == id }) else { return nil }
        self = control
    }
}
