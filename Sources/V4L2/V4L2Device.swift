// A V4L2 capture node as coord uses it. Every call goes to a V4L2Driver (libv4l2, or a script in tests) through
// `V4L2Device.call`, which retries EINTR and throws a V4L2Error carrying errno.
import CV4L2
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A V4L2 capture device node, opened through a V4L2Driver (libv4l2 unless a test scripts one).
public final class V4L2Device {
    /// The device path this was opened with.
    public let path: String
    /// What answers this device's calls.
    public let driver: V4L2Driver
    private var fd: Int32
    private var buffers: [(start: UnsafeMutableRawPointer, length: Int)] = []
    private var streaming = false

    /// Opens a V4L2 device node; throws if it is missing, not a character device or not a V4L2 device.
    public init(path: String, driver: V4L2Driver = LibV4L2Driver.shared) throws {
        self.path = path
        self.driver = driver
        self.fd = -1
        // Check first: libv4l2 would probe a non-device with an ioctl and log the failure to stderr.
        let kind = try Self.call(device: path, operation: "open") { driver.isCharacterDevice(path) }
        guard kind == 1 else {
            throw V4L2Error(device: path, operation: "open", errno: ENODEV,
                            detail: "it is not a character device, so not a V4L2 device")
        }
        self.fd = try Self.call(device: path, operation: "open") {
            driver.open(path, flags: O_RDWR | O_NONBLOCK | O_CLOEXEC)
        }
    }

    deinit {
        close()
    }

    /// Stops streaming, unmaps the buffers and closes the node; calling it again does nothing.
    public func close() {
        guard fd >= 0 else { return }
        if streaming { try? stopStreaming() }
        releaseBuffers()
        _ = driver.close(fd)  // the fd is gone whatever close returns; retrying could close a reused fd
        fd = -1
    }

    // ---- the funnel ----

    /// Runs one C call, retrying EINTR; a result of -1 becomes a V4L2Error with errno.
    @discardableResult
    static func call(device: String, operation: String, control: V4L2Control? = nil,
                     _ body: () -> Int32) throws -> Int32
    {
        while true {
            let result = body()
            if result != -1 { return result }
            let err = errno
            if err == EINTR { continue }
            throw V4L2Error(device: device, operation: operation, errno: err,
                            detail: V4L2Error.cameraDetail(operation: operation, errno: err), control: control?.name)
        }
    }

    /// One ioctl through the driver with `argument` as its C struct.
    @discardableResult
    private func ioctl<Argument>(_ request: V4L2Request, _ argument: inout Argument,
                                 control: V4L2Control? = nil) throws -> Int32
    {
        guard fd >= 0 else {
            throw V4L2Error(device: path, operation: request.rawValue, errno: EBADF, detail: "the device is closed",
                            control: control?.name)
        }
        let (fd, driver) = (self.fd, self.driver)
        return try Self.call(device: path, operation: request.rawValue, control: control) {
            withUnsafeMutableBytes(of: &argument) { driver.ioctl(fd, request, $0.baseAddress!) }
        }
    }

    /// Runs an enumerating ioctl; returns false when the driver says EINVAL (the end of the list).
    private func enumerate<Argument>(_ request: V4L2Request, _ argument: inout Argument) throws -> Bool {
        do {
            try ioctl(request, &argument)
            return true
        } catch let error as V4L2Error where error.errno == EINVAL {
            return false
        }
    }

    // ---- discovery ----

    /// VIDIOC_QUERYCAP.
    public func capabilities() throws -> V4L2Capabilities {
        var cap = v4l2_capability()
        try ioctl(.querycap, &cap)
        let caps = (cap.capabilities & CV4L2_CAP_DEVICE_CAPS) != 0 ? cap.device_caps : cap.capabilities
        return V4L2Capabilities(
            driver: Self.string(cap.driver),
            card: Self.string(cap.card),
            busInfo: Self.string(cap.bus_info),
            version: cap.version,
            deviceCapabilities: caps,
            isVideoCapture: (caps & CV4L2_CAP_VIDEO_CAPTURE) != 0,
            canStream: (caps & CV4L2_CAP_STREAMING) != 0)
    }

    /// Every capture pixel format with its frame sizes and frame intervals.
    public func formats() throws -> [V4L2Format] {
        var result: [V4L2Format] = []
        var index: UInt32 = 0
        while true {
            var desc = v4l2_fmtdesc()
            desc.index = index
            desc.type = CV4L2_BUF_TYPE_VIDEO_CAPTURE
            guard try enumerate(.enumFmt, &desc) else { break }
            let (kind, sizes) = try frameSizes(pixelFormat: desc.pixelformat)
            result.append(V4L2Format(
                fourcc: Self.fourcc(desc.pixelformat),
                pixelFormat: desc.pixelformat,
                description: Self.string(desc.description),
                isCompressed: (desc.flags & CV4L2_FMT_FLAG_COMPRESSED) != 0,
                isEmulated: (desc.flags & CV4L2_FMT_FLAG_EMULATED) != 0,
                sizes: sizes,
                sizeKind: kind))
            index += 1
        }
        return result
    }

    private func frameSizes(pixelFormat: UInt32) throws -> (V4L2RangeKind, [V4L2FrameSize]) {
        var sizes: [V4L2FrameSize] = []
        var index: UInt32 = 0
        while true {
            var size = v4l2_frmsizeenum()
            size.index = index
            size.pixel_format = pixelFormat
            guard try enumerate(.enumFramesizes, &size) else { break }
            if size.type == CV4L2_FRMSIZE_TYPE_DISCRETE {
                let (w, h) = (size.discrete.width, size.discrete.height)
                let (kind, intervals) = try frameIntervals(pixelFormat: pixelFormat, width: w, height: h)
                sizes.append(V4L2FrameSize(width: w, height: h, intervals: intervals, intervalKind: kind))
                index += 1
                continue
            }
            // Stepwise or continuous: a single entry describes the whole range.
            let s = size.stepwise
            let kind: V4L2RangeKind = size.type == CV4L2_FRMSIZE_TYPE_STEPWISE ? .stepwise : .continuous
            for (w, h) in [(s.min_width, s.min_height), (s.max_width, s.max_height)] {
                let (ikind, intervals) = try frameIntervals(pixelFormat: pixelFormat, width: w, height: h)
                sizes.append(V4L2FrameSize(width: w, height: h, intervals: intervals, intervalKind: ikind))
            }
            return (kind, sizes)
        }
        return (.discrete, sizes)
    }

    private func frameIntervals(pixelFormat: UInt32, width: UInt32, height: UInt32) throws
        -> (V4L2RangeKind, [V4L2FrameInterval])
    {
        var intervals: [V4L2FrameInterval] = []
        var index: UInt32 = 0
        while true {
            var ival = v4l2_frmivalenum()
            ival.index = index
            ival.pixel_format = pixelFormat
            ival.width = width
            ival.height = height
            guard try enumerate(.enumFrameintervals, &ival) else { break }
            if ival.type == CV4L2_FRMIVAL_TYPE_DISCRETE {
                intervals.append(V4L2FrameInterval(numerator: ival.discrete.numerator,
                                                   denominator: ival.discrete.denominator))
                index += 1
                continue
            }
            let s = ival.stepwise
            let kind: V4L2RangeKind = ival.type == CV4L2_FRMIVAL_TYPE_STEPWISE ? .stepwise : .continuous
            return (kind, [V4L2FrameInterval(numerator: s.min.numerator, denominator: s.min.denominator),
                           V4L2FrameInterval(numerator: s.max.numerator, denominator: s.max.denominator)])
        }
        return (.discrete, intervals)
    }

    /// The video* nodes under `devRoot`, as full paths in numeric order (video2 before video10).
    public static func listDevices(devRoot: String = "/dev") -> [String] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: devRoot) else { return [] }
        let numbered: [(Int, String)] = names.compactMap { name in
            guard name.hasPrefix("video") else { return nil }
            let digits = name.dropFirst("video".count)
            guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let n = Int(digits) else { return nil }
            return (n, name)
        }
        let root = devRoot.hasSuffix("/") ? String(devRoot.dropLast()) : devRoot
        return numbered.sorted { $0.0 < $1.0 }.map { "\(root)/\($0.1)" }
    }

    // ---- capture ----

    /// VIDIOC_S_FMT for single-planar capture; returns what the driver actually chose.
    @discardableResult
    public func setFormat(width: UInt32, height: UInt32, pixelFormat: UInt32) throws
        -> (width: UInt32, height: UInt32, pixelFormat: UInt32, bytesPerLine: UInt32, sizeImage: UInt32)
    {
        var format = v4l2_format()
        format.type = CV4L2_BUF_TYPE_VIDEO_CAPTURE
        format.fmt.pix.width = width
        format.fmt.pix.height = height
        format.fmt.pix.pixelformat = pixelFormat
        format.fmt.pix.field = CV4L2_FIELD_ANY
        try ioctl(.sFmt, &format)
        let pix = format.fmt.pix
        return (pix.width, pix.height, pix.pixelformat, pix.bytesperline, pix.sizeimage)
    }

    /// VIDIOC_G_FMT for single-planar capture: the format the device is set to now.
    public func currentFormat() throws
        -> (width: UInt32, height: UInt32, pixelFormat: UInt32, bytesPerLine: UInt32, sizeImage: UInt32)
    {
        var format = v4l2_format()
        format.type = CV4L2_BUF_TYPE_VIDEO_CAPTURE
        try ioctl(.gFmt, &format)
        let pix = format.fmt.pix
        return (pix.width, pix.height, pix.pixelformat, pix.bytesperline, pix.sizeimage)
    }

    /// VIDIOC_G_PARM: the current frame interval, or nil if the driver cannot set one.
    public func frameInterval() throws -> V4L2FrameInterval? {
        var parm = v4l2_streamparm()
        parm.type = CV4L2_BUF_TYPE_VIDEO_CAPTURE
        try ioctl(.gParm, &parm)
        guard (parm.parm.capture.capability & CV4L2_CAP_TIMEPERFRAME) != 0 else { return nil }
        let t = parm.parm.capture.timeperframe
        return V4L2FrameInterval(numerator: t.numerator, denominator: t.denominator)
    }

    /// VIDIOC_S_PARM; returns the interval the driver actually chose.
    @discardableResult
    public func setFrameInterval(_ interval: V4L2FrameInterval) throws -> V4L2FrameInterval {
        var parm = v4l2_streamparm()
        parm.type = CV4L2_BUF_TYPE_VIDEO_CAPTURE
        parm.parm.capture.timeperframe.numerator = interval.numerator
        parm.parm.capture.timeperframe.denominator = interval.denominator
        try ioctl(.sParm, &parm)
        let t = parm.parm.capture.timeperframe
        return V4L2FrameInterval(numerator: t.numerator, denominator: t.denominator)
    }

    /// Requests, maps and queues `bufferCount` mmap buffers, then VIDIOC_STREAMON.
    public func startStreaming(bufferCount: UInt32 = 4) throws {
        guard !streaming else { return }
        var req = v4l2_requestbuffers()
        req.count = bufferCount
        req.type = CV4L2_BUF_TYPE_VIDEO_CAPTURE
        req.memory = CV4L2_MEMORY_MMAP
        try ioctl(.reqbufs, &req)
        guard req.count > 0 else {
            throw V4L2Error(device: path, operation: "VIDIOC_REQBUFS", errno: ENOMEM,
                            detail: "the driver granted no buffers")
        }
        do {
            for index in 0..<req.count {
                var buf = Self.captureBuffer(index: index)
                try ioctl(.querybuf, &buf)
                let length = Int(buf.length)
                guard let start = driver.mmap(fd, length: length, offset: Int64(buf.m.offset)) else {
                    let err = errno
                    throw V4L2Error(device: path, operation: "mmap", errno: err,
                                    detail: V4L2Error.cameraDetail(operation: "mmap", errno: err))
                }
                buffers.append((start, length))
                try ioctl(.qbuf, &buf)
            }
            var type = Int32(bitPattern: CV4L2_BUF_TYPE_VIDEO_CAPTURE)
            try ioctl(.streamon, &type)
        } catch {
            releaseBuffers()
            throw error
        }
        streaming = true
    }

    /// Waits up to `timeoutMs` for a filled buffer; nil on timeout. Hand the frame back with `requeue`.
    public func dequeueFrame(timeoutMs: Int32) throws -> V4L2Frame? {
        guard streaming else {
            throw V4L2Error(device: path, operation: "VIDIOC_DQBUF", errno: EINVAL, detail: "the device is not streaming")
        }
        let (fd, driver) = (self.fd, self.driver)
        let ready = try Self.call(device: path, operation: "poll") { driver.poll(fd, timeoutMs: timeoutMs) }
        if ready == 0 { return nil }
        var buf = Self.captureBuffer(index: 0)
        do {
            try ioctl(.dqbuf, &buf)
        } catch let error as V4L2Error where error.errno == EAGAIN {
            return nil
        }
        let index = Int(buf.index)
        guard index < buffers.count else {
            throw V4L2Error(device: path, operation: "VIDIOC_DQBUF", errno: EINVAL,
                            detail: "the driver returned buffer \(index) of \(buffers.count)")
        }
        let used = min(Int(buf.bytesused), buffers[index].length)
        let source: V4L2TimestampSource
        switch buf.flags & CV4L2_BUF_FLAG_TSTAMP_SRC_MASK {
        case CV4L2_BUF_FLAG_TSTAMP_SRC_EOF: source = .endOfFrame
        case CV4L2_BUF_FLAG_TSTAMP_SRC_SOE: source = .startOfExposure
        case let other: source = .other(other)
        }
        return V4L2Frame(
            index: buf.index,
            sequence: buf.sequence,
            timestampUs: Int64(buf.timestamp.tv_sec) * 1_000_000 + Int64(buf.timestamp.tv_usec),
            timestampIsMonotonic:
                (buf.flags & CV4L2_BUF_FLAG_TIMESTAMP_MASK) == CV4L2_BUF_FLAG_TIMESTAMP_MONOTONIC,
            timestampSource: source,
            hasError: (buf.flags & CV4L2_BUF_FLAG_ERROR) != 0,
            bytes: UnsafeRawBufferPointer(start: buffers[index].start, count: used))
    }

    /// Hands a dequeued frame's buffer back to the driver.
    public func requeue(_ frame: V4L2Frame) throws {
        var buf = Self.captureBuffer(index: frame.index)
        try ioctl(.qbuf, &buf)
    }

    /// VIDIOC_STREAMOFF and releases the buffers; frames handed out before are no longer valid.
    public func stopStreaming() throws {
        guard streaming else { return }
        streaming = false
        defer { releaseBuffers() }
        var type = Int32(bitPattern: CV4L2_BUF_TYPE_VIDEO_CAPTURE)
        try ioctl(.streamoff, &type)
    }

    private func releaseBuffers() {
        for buffer in buffers {
            _ = driver.munmap(buffer.start, length: buffer.length)
        }
        buffers.removeAll()
        guard fd >= 0 else { return }
        // Frees the driver's buffers so the format can change later; failure here changes nothing for us.
        var req = v4l2_requestbuffers()
        req.count = 0
        req.type = CV4L2_BUF_TYPE_VIDEO_CAPTURE
        req.memory = CV4L2_MEMORY_MMAP
        _ = try? ioctl(.reqbufs, &req)
    }

    // ---- controls ----

    /// VIDIOC_QUERYCTRL and VIDIOC_G_CTRL; nil when the device lacks the control (EINVAL, ENOTTY or disabled).
    public func control(_ id: V4L2Control) throws -> (value: Int32, min: Int32, max: Int32, default: Int32)? {
        var query = v4l2_queryctrl()
        query.id = id.id
        do {
            try ioctl(.queryctrl, &query, control: id)
        } catch let error as V4L2Error where error.errno == EINVAL || error.errno == ENOTTY {
            // EINVAL: no such control; ENOTTY: a node without controls at all, as UVC's metadata node.
            return nil
        }
        guard (query.flags & CV4L2_CTRL_FLAG_DISABLED) == 0 else { return nil }
        var value = v4l2_control()
        value.id = id.id
        try ioctl(.gCtrl, &value, control: id)
        return (value.value, query.minimum, query.maximum, query.default_value)
    }

    /// VIDIOC_S_CTRL; returns the value the driver kept (drivers clamp to the range and round to the step).
    @discardableResult
    public func setControl(_ id: V4L2Control, _ value: Int32) throws -> Int32 {
        var control = v4l2_control()
        control.id = id.id
        control.value = value
        try ioctl(.sCtrl, &control, control: id)
        return control.value
    }

    /// Locks exposure, white balance and focus identically across a rig: auto off, then the given values; returns
    /// one sentence per control the device lacks or refused (never throws for a missing control). A nil value
    /// leaves that pair as it is; throws only when the device itself fails (gone or closed).
    public func lockControls(exposure100us: Int32?, whiteBalanceKelvin: Int32?, focus: Int32?) throws -> [String] {
        var notes: [String] = []
        let pairs: [(auto: V4L2Control, manual: Int32, value: V4L2Control, target: Int32?, what: String)] = [
            (.exposureAuto, CV4L2_EXPOSURE_MANUAL, .exposureAbsolute, exposure100us, "exposure"),
            (.whiteBalanceAuto, 0, .whiteBalanceTemperature, whiteBalanceKelvin, "white balance"),
            (.focusAuto, 0, .focusAbsolute, focus, "focus"),
        ]
        for pair in pairs {
            guard let target = pair.target else { continue }
            // Auto first: many UVC cameras refuse a manual value (EACCES) while their auto mode is on.
            for (control, value) in [(pair.auto, pair.manual), (pair.value, target)] {
                if let note = try lock(control, to: value, what: pair.what) { notes.append(note) }
            }
        }
        return notes
    }

    /// Sets one control for `lockControls`; a sentence when the device lacks it, refused it or kept another value.
    private func lock(_ control: V4L2Control, to value: Int32, what: String) throws -> String? {
        do {
            guard let current = try self.control(control) else {
                return "\(path) has no \(control.name) control, so its \(what) is not locked."
            }
            let kept = try setControl(control, value)
            if kept != value {
                return "\(path) set \(control.name) to \(kept), not the \(value) asked "
                    + "(its range is \(current.min)...\(current.max)), so its \(what) differs from the rig's."
            }
            return nil
        } catch let error as V4L2Error where error.errno != ENODEV && error.errno != EBADF {
            return "\(path) refused \(control.name) = \(value), so its \(what) is not locked: "
                + "\(error.reason) (errno \(error.errno))."
        }
    }

    // ---- conversions ----

    private static func captureBuffer(index: UInt32) -> v4l2_buffer {
        var buf = v4l2_buffer()
        buf.index = index
        buf.type = CV4L2_BUF_TYPE_VIDEO_CAPTURE
        buf.memory = CV4L2_MEMORY_MMAP
        return buf
    }

    /// A NUL-terminated fixed-size C array (imported as a tuple) as a String.
    static func string<T>(_ tuple: T) -> String {
        withUnsafeBytes(of: tuple) { raw in
            let bytes = raw.prefix { $0 != 0 }
            return String(decoding: bytes, as: UTF8.self)
        }
    }

    /// "YUYV" for V4L2_PIX_FMT_YUYV: the four bytes, least significant first.
    public static func fourcc(_ code: UInt32) -> String {
        let bytes = (0..<4).map { UInt8((code >> (8 * UInt32($0))) & 0xff) }
        return String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespaces)
    }

    /// V4L2_PIX_FMT_MJPEG for "MJPG": the inverse of `fourcc(_:)` (short codes are padded with spaces).
    public static func pixelFormat(_ fourcc: String) -> UInt32 {
        let bytes = Array(fourcc.utf8.prefix(4)) + Array(repeating: UInt8(ascii: " "), count: max(0, 4 - fourcc.utf8.count))
        return bytes.enumerated().reduce(0) { $0 | (UInt32($1.element) << (8 * UInt32($1.offset))) }
    }
}
