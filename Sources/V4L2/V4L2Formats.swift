// What a V4L2 device reports: its capabilities, formats, frame sizes and intervals, and a captured frame.
import CV4L2

/// What VIDIOC_QUERYCAP reports about a device node.
public struct V4L2Capabilities: Equatable, Sendable {
    public var driver: String
    public var card: String
    public var busInfo: String
    /// The kernel version the driver was built for, as KERNEL_VERSION(a, b, c).
    public var version: UInt32
    /// The capabilities of this device node (device_caps when the driver sets it, else the whole device's).
    public var deviceCapabilities: UInt32
    /// The node captures single-planar video.
    public var isVideoCapture: Bool
    /// The node supports mmap streaming I/O.
    public var canStream: Bool
}

/// How a driver enumerates a range: a list of values, or a minimum and maximum (with a step).
public enum V4L2RangeKind: String, Equatable, Sendable {
    case discrete, stepwise, continuous
}

/// A frame period as the fraction of a second V4L2 uses (1/30 is 30 frames per second).
public struct V4L2FrameInterval: Equatable, Sendable {
    public var numerator: UInt32
    public var denominator: UInt32

    public init(numerator: UInt32, denominator: UInt32) {
        self.numerator = numerator
        self.denominator = denominator
    }

    /// The period in microseconds, or nil if the denominator is 0.
    public var periodUs: Double? {
        denominator == 0 ? nil : Double(numerator) * 1_000_000 / Double(denominator)
    }
}

/// One frame size of a pixel format and the frame intervals the driver offers at it.
public struct V4L2FrameSize: Equatable, Sendable {
    public var width: UInt32
    public var height: UInt32
    /// Discrete: every interval offered. Stepwise/continuous: the shortest and the longest.
    public var intervals: [V4L2FrameInterval]
    public var intervalKind: V4L2RangeKind

    public init(width: UInt32, height: UInt32, intervals: [V4L2FrameInterval], intervalKind: V4L2RangeKind) {
        self.width = width
        self.height = height
        self.intervals = intervals
        self.intervalKind = intervalKind
    }
}

/// One pixel format a capture node offers.
public struct V4L2Format: Equatable, Sendable {
    /// The four-character code, e.g. "YUYV" or "MJPG".
    public var fourcc: String
    public var pixelFormat: UInt32
    /// The driver's description, e.g. "YUYV 4:2:2".
    public var description: String
    public var isCompressed: Bool
    /// Converted by libv4l2 rather than produced by the driver.
    public var isEmulated: Bool
    /// Discrete: every size offered. Stepwise/continuous: the smallest and the largest.
    public var sizes: [V4L2FrameSize]
    public var sizeKind: V4L2RangeKind

    public init(fourcc: String, pixelFormat: UInt32, description: String, isCompressed: Bool, isEmulated: Bool,
                sizes: [V4L2FrameSize], sizeKind: V4L2RangeKind)
    {
        self.fourcc = fourcc
        self.pixelFormat = pixelFormat
        self.description = description
        self.isCompressed = isCompressed
        self.isEmulated = isEmulated
        self.sizes = sizes
        self.sizeKind = sizeKind
    }
}

/// Where the driver takes a buffer's timestamp.
public enum V4L2TimestampSource: Equatable, Sendable {
    case endOfFrame, startOfExposure, other(UInt32)
}

/// One captured frame, valid until it is handed back with `V4L2Device.requeue(_:)`.
public struct V4L2Frame {
    public var index: UInt32
    public var sequence: UInt32
    /// The buffer timestamp in microseconds of the driver's clock.
    public var timestampUs: Int64
    /// The timestamp is on CLOCK_MONOTONIC.
    public var timestampIsMonotonic: Bool
    public var timestampSource: V4L2TimestampSource
    /// The driver flagged the buffer as damaged.
    public var hasError: Bool
    /// The frame's bytes, inside the driver's mapped buffer.
    public var bytes: UnsafeRawBufferPointer
}

