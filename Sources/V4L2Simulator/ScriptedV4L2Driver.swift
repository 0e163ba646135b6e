// A V4L2 driver written in Swift for machines without cameras: it fills the same C structs a kernel driver fills,
// keeps real time (a frame is ready only once the clock has passed its readout) and fails the way uvcvideo fails,
// so V4L2Device's own code is what the tests exercise.
import CV4L2
import V4L2
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A scripted V4L2 driver: devices described by a Script answer every call like a driver with real time.
// @unchecked: every device, handle and mapping is under `condition`, as a kernel driver's state is under its own lock.
public final class ScriptedV4L2Driver: V4L2Driver, @unchecked Sendable {
    /// The devices this driver pretends exist.
    public struct Script: Codable, Sendable {
        /// Keyed by path, e.g. "/dev/video0".
        public var devices: [String: Device]

        public init(devices: [String: Device]) {
            self.devices = devices
        }

        public init(from decoder: Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            devices = try container.decodeIfPresent([String: Device].self, forKey: .devices) ?? [:]
        }
    }

    /// One device node: a profile and the faults to inject.
    public struct Device: Codable, Sendable {
        /// "uvc-webcam" (a Logitech C920-like UVC webcam) or "metadata-node" (UVC's second, non-capture node).
        public var profile: String
        /// "EBUSY", "ENODEV", "EACCES", ...: open fails with it.
        public var openError: String?
        /// After this many filled frames have been dequeued, the device vanishes at its next frame, as a yanked USB
        /// camera: poll and every ioctl fail with ENODEV, close still works, the node disappears from the path.
        public var unplugAfterFrames: Int?
        /// Sequence numbers captured but never delivered (the next buffer's sequence jumps).
        public var dropSequences: [UInt32]?
        /// "soe" (default): the timestamp is the start of exposure; "eof": the end of readout.
        public var timestampSource: String?
        /// Standard deviation of gaussian noise on the buffer timestamp, in microseconds; seeded.
        public var timestampJitterUs: Double?
        /// The sensor's clock error against CLOCK_MONOTONIC; positive runs fast, so frames come more often.
        public var rateErrorPPM: Double?
        /// Makes S_FMT fail with this errno name, e.g. "EBUSY" or "EINVAL" (without it, S_FMT adjusts as drivers do).
        public var sFmtError: String?
        /// Makes STREAMON fail with this errno name, e.g. "ENOSPC" (no USB bandwidth left) or "EBUSY".
        public var streamonError: String?
        /// From STREAMON to frame 0's start of exposure; default a seeded draw within one frame interval.
        public var startPhaseUs: Double?

        public init(profile: String = "uvc-webcam", openError: String? = nil, unplugAfterFrames: Int? = nil,
                    dropSequences: [UInt32]? = nil, timestampSource: String? = nil, timestampJitterUs: Double? = nil,
                    rateErrorPPM: Double? = nil, sFmtError: String? = nil, streamonError: String? = nil,
                    startPhaseUs: Double? = nil)
        {
            self.profile = profile
            self.openError = openError
            self.unplugAfterFrames = unplugAfterFrames
            self.dropSequences = dropSequences
            self.timestampSource = timestampSource
            self.timestampJitterUs = timestampJitterUs
            self.rateErrorPPM = rateErrorPPM
            self.sFmtError = sFmtError
            self.streamonError = streamonError
            self.startPhaseUs = startPhaseUs
        }

        public init(from decoder: Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            self.init(
                profile: try c.decodeIfPresent(String.self, forKey: .profile) ?? "uvc-webcam",
                openError: try c.decodeIfPresent(String.self, forKey: .openError),
                unplugAfterFrames: try c.decodeIfPresent(Int.self, forKey: .unplugAfterFrames),
                dropSequences: try c.decodeIfPresent([UInt32].self, forKey: .dropSequences),
                timestampSource: try c.decodeIfPresent(String.self, forKey: .timestampSource),
                timestampJitterUs: try c.decodeIfPresent(Double.self, forKey: .timestampJitterUs),
                rateErrorPPM: try c.decodeIfPresent(Double.self, forKey: .rateErrorPPM),
                sFmtError: try c.decodeIfPresent(String.self, forKey: .sFmtError),
                streamonError: try c.decodeIfPresent(String.self, forKey: .streamonError),
                startPhaseUs: try c.decodeIfPresent(Double.self, forKey: .startPhaseUs))
        }

        /// What is wrong with this device's description, as a clause, or nil.
        func problem(path: String) -> String? {
            if Profile.named(profile) == nil {
                return "names an unknown profile \"\(profile)\" for \(path) (known: \(Profile.names.joined(separator: ", ")))"
            }
            for (field, name) in [("openError", openError), ("sFmtError", sFmtError), ("streamonError", streamonError)] {
                if let name, ScriptedV4L2Driver.errnoNamed(name) == nil {
                    return "gives \(path) an unknown \(field) \"\(name)\" (known: \(ScriptedV4L2Driver.errnoNames))"
                }
            }
            if let source = timestampSource, source != "soe", source != "eof" {
                return "gives \(path) an unknown timestampSource \"\(source)\" (known: soe, eof)"
            }
            if let n = unplugAfterFrames, n < 0 {
                return "gives \(path) a negative unplugAfterFrames"
            }
            return nil
        }
    }

    /// What the painter gets for each frame: fill `buffer` with an image in `fourcc` at `width`x`height` and return the bytes used.
    public struct Frame {
        /// The pixel format S_FMT chose, e.g. "MJPG" or "YUYV".
        public var fourcc: String
        public var width: Int
        public var height: Int
        /// The sequence number the buffer will carry.
        public var sequence: UInt32
        /// The true start of exposure on CLOCK_MONOTONIC, before any timestamp jitter.
        public var startOfExposureUs: Int64
        /// Half the frame interval, or exposure_absolute × 100 µs in manual exposure.
        public var exposureUs: Int64
        /// The whole driver buffer (sizeimage bytes).
        public var buffer: UnsafeMutableRawBufferPointer
    }

    /// A script that cannot be used, rendered as one sentence naming the file.
    public struct ScriptError: Error, CustomStringConvertible, Sendable {
        /// The script's path.
        public var file: String
        /// What is wrong, as the rest of the sentence after the file's name.
        public var reason: String

        public var description: String { "the camera script \(file) \(reason)." }
    }

    /// The default profile, for tests.
    public static let uvcWebcam = Device()
    /// UVC's metadata node (the second /dev/videoN of every UVC camera), for tests.
    public static let metadataNode = Device(profile: "metadata-node")

    /// Reads a JSON script; one sentence naming the file on error.
    public static func load(_ url: URL) throws -> Script {
        let file = url.path
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            let reason = (error as NSError).localizedDescription.trimmingCharacters(in: CharacterSet(charactersIn: "."))
            throw ScriptError(file: file, reason: "cannot be read: \(reason)")
        }
        let script: Script
        do {
            script = try JSONDecoder().decode(Script.self, from: data)
        } catch let error as DecodingError {
            throw ScriptError(file: file, reason: "is not a valid camera script: \(Self.describe(error))")
        }
        for path in script.devices.keys.sorted() {
            if let problem = script.devices[path]!.problem(path: path) {
                throw ScriptError(file: file, reason: problem)
            }
        }
        return script
    }

    private static func describe(_ error: DecodingError) -> String {
        let context: DecodingError.Context
        switch error {
        case .typeMismatch(_, let c), .valueNotFound(_, let c), .keyNotFound(_, let c), .dataCorrupted(let c):
            context = c
        @unknown default:
            return String(describing: error)
        }
        let path = context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
        let what = context.debugDescription.trimmingCharacters(in: CharacterSet(charactersIn: "."))
        return path.isEmpty ? what : "at \(path), \(what)"
    }

    // ---- state, all behind `condition` ----

    /// The one lock; poll and a blocking DQBUF sleep on it until a frame is due or another thread changes the queue.
    private let condition = NSCondition()
    private var devices: [String: DeviceState] = [:]
    private var handles: [Int32: Handle] = [:]
    private var mappings: [UnsafeMutableRawPointer: Mapping] = [:]
    /// High so a scripted fd is never mistaken for one of the process's real fds in a log.
    private var nextFd: Int32 = 1000
    private let painter: (Frame) -> Int

    /// Every device in `script` is plugged in; `seed` makes start phases and timestamp jitter reproducible.
    /// Traps on a device a Script from `load` would have refused (an unknown profile or errno name).
    public init(script: Script, seed: UInt64 = 1, painter: @escaping (Frame) -> Int) {
        self.painter = painter
        for (path, device) in script.devices {
            if let problem = device.problem(path: path) { preconditionFailure("the camera script \(problem)") }
            devices[path] = DeviceState(path: path, script: device, profile: Profile.named(device.profile)!,
                                        seed: seed ^ Self.fnv1a(path))
        }
    }

    /// A control's current value on a device (what VIDIOC_G_CTRL would answer), for tests.
    public func controlValue(_ id: UInt32, path: String) -> Int32? {
        condition.lock()
        defer { condition.unlock() }
        guard let device = devices[path], let control = device.profile.control(id) else { return nil }
        return device.controls[id] ?? control.defaultValue
    }

    /// Yanks a device now, as pulling its USB cable would.
    public func unplug(_ path: String) {
        condition.lock()
        defer { condition.unlock() }
        devices[path]?.unplugged = true
        condition.broadcast()
    }

    // ---- V4L2Driver ----

    /// 1 for a scripted device that is plugged in; a path outside the script is not a character device (0) if it
    /// exists on this machine's filesystem, else ENOENT, so the script owns every camera there is.
    public func isCharacterDevice(_ path: String) -> Int32 {
        var kind: Int32 = 0
        let err: Int32 = locked {
            if let device = devices[path] {
                if device.unplugged { return ENOENT }  // udev removes the node of a yanked camera
                kind = 1
                return 0
            }
            return access(path, F_OK) == 0 ? 0 : ENOENT
        }
        return finish(err, kind)
    }

    public func open(_ path: String, flags: Int32) -> Int32 {
        var fd: Int32 = -1
        let err: Int32 = locked {
            guard let device = devices[path] else {
                return access(path, F_OK) == 0 ? ENOTTY : ENOENT  // ENOTTY: libv4l2's QUERYCAP probe of a non-V4L2 node
            }
            if device.unplugged { return ENOENT }
            if let name = device.script.openError { return Self.errnoNamed(name)! }
            fd = nextFd
            nextFd += 1
            handles[fd] = Handle(device: device, nonBlocking: (flags & O_NONBLOCK) != 0)
            return 0
        }
        return finish(err, fd)
    }

    public func close(_ fd: Int32) -> Int32 {
        let err: Int32 = locked {
            guard let handle = handles.removeValue(forKey: fd) else { return EBADF }
            let device = handle.device
            if device.owner == fd {
                // The kernel stops the stream and frees the queue when its owner closes; mappings outlive it.
                device.stop()
                device.releaseBuffers()
            }
            condition.broadcast()
            return 0
        }
        return finish(err, 0)
    }

    public func ioctl(_ fd: Int32, _ request: V4L2Request, _ argument: UnsafeMutableRawPointer) -> Int32 {
        let err: Int32 = locked {
            guard let handle = handles[fd] else { return EBADF }
            let device = handle.device
            device.advance(now: Self.nowUs(), painter: painter)
            if device.unplugged { return ENODEV }
            return answer(request, fd: fd, handle: handle, device: device, argument: argument)
        }
        return finish(err, 0)
    }

    public func mmap(_ fd: Int32, length: Int, offset: Int64) -> UnsafeMutableRawPointer? {
        var start: UnsafeMutableRawPointer?
        let err: Int32 = locked {
            guard let handle = handles[fd] else { return EBADF }
            let device = handle.device
            if device.unplugged { return ENODEV }
            guard length > 0,
                  let index = device.buffers.firstIndex(where: { Int64($0.offset) == offset }),
                  length <= device.buffers[index].storage.length
            else { return EINVAL }
            let storage = device.buffers[index].storage
            device.buffers[index].mapCount += 1
            mappings[storage.pointer, default: Mapping(storage: storage, device: device, count: 0)].count += 1
            start = storage.pointer
            return 0
        }
        if err != 0 { errno = err }
        return start
    }

    public func munmap(_ start: UnsafeMutableRawPointer, length: Int) -> Int32 {
        let err: Int32 = locked {
            guard var mapping = mappings[start] else { return EINVAL }
            mapping.count -= 1
            mappings[start] = mapping.count > 0 ? mapping : nil
            // An orphaned buffer (freed by REQBUFS 0 while mapped) is no longer in the device's list.
            if let index = mapping.device.buffers.firstIndex(where: { $0.storage === mapping.storage }) {
                mapping.device.buffers[index].mapCount -= 1
            }
            return 0
        }
        return finish(err, 0)
    }

    public func poll(_ fd: Int32, timeoutMs: Int32) -> Int32 {
        var ready: Int32 = 0
        let err: Int32 = locked {
            let deadline = timeoutMs < 0 ? Double.infinity : Self.nowUs() + Double(timeoutMs) * 1000
            while true {
                guard let handle = handles[fd] else { return EBADF }
                let device = handle.device
                let now = Self.nowUs()
                device.advance(now: now, painter: painter)
                if device.unplugged { return ENODEV }
                // Not streaming is POLLERR in vb2, which a caller reads as "go and ask DQBUF".
                if !device.streaming || !device.done.isEmpty {
                    ready = 1
                    return 0
                }
                if now >= deadline { return 0 }
                wait(until: min(deadline, device.pending?.readyAt ?? deadline), now: now)
            }
        }
        return finish(err, ready)
    }

    // ---- ioctls ----

    private func answer(_ request: V4L2Request, fd: Int32, handle: Handle, device: DeviceState,
                        argument: UnsafeMutableRawPointer) -> Int32
    {
        let profile = device.profile
        switch request {
        case .querycap:
            let cap = argument.assumingMemoryBound(to: v4l2_capability.self)
            cap.pointee = v4l2_capability()
            Self.write(profile.driver, into: &cap.pointee.driver)
            Self.write(profile.card, into: &cap.pointee.card)
            Self.write(profile.busInfo, into: &cap.pointee.bus_info)
            cap.pointee.version = Profile.kernelVersion
            cap.pointee.capabilities = profile.capabilities
            cap.pointee.device_caps = profile.deviceCaps
            return 0

        case .enumFmt:
            let desc = argument.assumingMemoryBound(to: v4l2_fmtdesc.self)
            guard desc.pointee.type == CV4L2_BUF_TYPE_VIDEO_CAPTURE, Int(desc.pointee.index) < profile.formats.count
            else { return EINVAL }
            let format = profile.formats[Int(desc.pointee.index)]
            desc.pointee.flags = format.compressed ? CV4L2_FMT_FLAG_COMPRESSED : 0
            desc.pointee.pixelformat = format.pixelFormat
            Self.write(format.description, into: &desc.pointee.description)
            return 0

        case .enumFramesizes:
            let size = argument.assumingMemoryBound(to: v4l2_frmsizeenum.self)
            guard let format = profile.format(size.pointee.pixel_format),
                  Int(size.pointee.index) < format.sizes.count
            else { return EINVAL }
            let s = format.sizes[Int(size.pointee.index)]
            size.pointee.type = CV4L2_FRMSIZE_TYPE_DISCRETE
            size.pointee.discrete.width = s.width
            size.pointee.discrete.height = s.height
            return 0

        case .enumFrameintervals:
            let ival = argument.assumingMemoryBound(to: v4l2_frmivalenum.self)
            guard let format = profile.format(ival.pointee.pixel_format),
                  let s = format.sizes.first(where: { $0.width == ival.pointee.width && $0.height == ival.pointee.height }),
                  Int(ival.pointee.index) < s.fps.count
            else { return EINVAL }
            ival.pointee.type = CV4L2_FRMIVAL_TYPE_DISCRETE
            ival.pointee.discrete.numerator = 1
            ival.pointee.discrete.denominator = s.fps[Int(ival.pointee.index)]
            return 0

        case .gFmt, .sFmt:
            let format = argument.assumingMemoryBound(to: v4l2_format.self)
            guard profile.isCapture, format.pointee.type == CV4L2_BUF_TYPE_VIDEO_CAPTURE else { return EINVAL }
            if request == .sFmt {
                if let name = device.script.sFmtError { return Self.errnoNamed(name)! }
                // vb2_is_busy: the format cannot change under allocated buffers.
                if !device.buffers.isEmpty { return EBUSY }
                device.setFormat(pixelFormat: format.pointee.fmt.pix.pixelformat,
                                 width: format.pointee.fmt.pix.width, height: format.pointee.fmt.pix.height)
            }
            format.pointee.fmt.pix = device.pixFormat()
            return 0

        case .gParm, .sParm:
            let parm = argument.assumingMemoryBound(to: v4l2_streamparm.self)
            guard profile.isCapture else { return ENOTTY }
            guard parm.pointee.type == CV4L2_BUF_TYPE_VIDEO_CAPTURE else { return EINVAL }
            if request == .sParm {
                if device.streaming { return EBUSY }
                let t = parm.pointee.parm.capture.timeperframe
                device.setInterval(numerator: t.numerator, denominator: t.denominator)
            }
            parm.pointee.parm.capture = v4l2_captureparm()
            parm.pointee.parm.capture.capability = CV4L2_CAP_TIMEPERFRAME
            parm.pointee.parm.capture.timeperframe.numerator = 1
            parm.pointee.parm.capture.timeperframe.denominator = device.fps
            return 0

        case .reqbufs:
            let req = argument.assumingMemoryBound(to: v4l2_requestbuffers.self)
            guard profile.isCapture, req.pointee.type == CV4L2_BUF_TYPE_VIDEO_CAPTURE,
                  req.pointee.memory == CV4L2_MEMORY_MMAP
            else { return EINVAL }
            if let owner = device.owner, owner != fd { return EBUSY }
            if device.streaming { return EBUSY }
            device.releaseBuffers()
            if req.pointee.count == 0 {
                device.owner = nil
                return 0
            }
            device.allocateBuffers(count: min(req.pointee.count, 32))  // VIDEO_MAX_FRAME
            device.owner = fd
            req.pointee.count = UInt32(device.buffers.count)
            return 0

        case .querybuf, .qbuf, .dqbuf:
            let buf = argument.assumingMemoryBound(to: v4l2_buffer.self)
            guard profile.isCapture, buf.pointee.type == CV4L2_BUF_TYPE_VIDEO_CAPTURE,
                  buf.pointee.memory == CV4L2_MEMORY_MMAP
            else { return EINVAL }
            if let owner = device.owner, owner != fd, request != .querybuf { return EBUSY }
            switch request {
            case .querybuf:
                guard Int(buf.pointee.index) < device.buffers.count else { return EINVAL }
            case .qbuf:
                let index = Int(buf.pointee.index)
                guard index < device.buffers.count, device.buffers[index].state == .dequeued else { return EINVAL }
                device.buffers[index].state = .queued
                device.buffers[index].queuedAtUs = Self.nowUs()
                device.queued.append(index)
                condition.broadcast()
            default:
                guard device.streaming else { return EINVAL }
                while device.done.isEmpty {
                    if handle.nonBlocking { return EAGAIN }
                    // A blocking fd sleeps in DQBUF until a frame is done, the stream stops or the device goes.
                    let now = Self.nowUs()
                    wait(until: device.pending?.readyAt ?? .infinity, now: now)
                    guard handles[fd] != nil else { return EBADF }
                    device.advance(now: Self.nowUs(), painter: painter)
                    if device.unplugged { return ENODEV }
                    guard device.streaming else { return EINVAL }
                }
                let index = device.done.removeFirst()
                device.buffers[index].state = .dequeued
                device.dequeued += 1
                buf.pointee.index = UInt32(index)
            }
            device.describe(buffer: Int(buf.pointee.index), into: buf)
            return 0

        case .streamon, .streamoff:
            let type = argument.assumingMemoryBound(to: Int32.self).pointee
            guard profile.isCapture, type == Int32(bitPattern: CV4L2_BUF_TYPE_VIDEO_CAPTURE) else { return EINVAL }
            if let owner = device.owner, owner != fd { return EBUSY }
            if request == .streamoff {
                device.stop()
                condition.broadcast()
                return 0
            }
            guard device.owner != nil else { return EINVAL }  // no buffers requested
            if let name = device.script.streamonError { return Self.errnoNamed(name)! }
            if !device.streaming { device.start(now: Self.nowUs()) }
            condition.broadcast()
            return 0

        case .queryctrl:
            let query = argument.assumingMemoryBound(to: v4l2_queryctrl.self)
            guard profile.isCapture else { return ENOTTY }  // the metadata node has no control handler
            let id = query.pointee.id
            let control: ControlSpec?
            if (id & CV4L2_CTRL_FLAG_NEXT_CTRL) != 0 {
                let after = id & 0x0fff_ffff
                control = profile.controls.filter { $0.id > after }.min { $0.id < $1.id }
            } else {
                control = profile.control(id)
            }
            guard let control else { return EINVAL }
            query.pointee = v4l2_queryctrl()
            query.pointee.id = control.id
            query.pointee.type = control.type
            Self.write(control.name, into: &query.pointee.name)
            query.pointee.minimum = control.minimum
            query.pointee.maximum = control.maximum
            query.pointee.step = control.step
            query.pointee.default_value = control.defaultValue
            query.pointee.flags = device.isActive(control) ? 0 : CV4L2_CTRL_FLAG_INACTIVE
            return 0

        case .gCtrl, .sCtrl:
            let value = argument.assumingMemoryBound(to: v4l2_control.self)
            guard profile.isCapture else { return ENOTTY }
            guard let control = profile.control(value.pointee.id) else { return EINVAL }
            if request == .sCtrl {
                // UVC's "wrong state": the camera refuses a manual value while its auto mode runs.
                guard device.isActive(control) else { return EACCES }
                switch control.validate(value.pointee.value) {
                case .success(let kept):
                    device.controls[control.id] = kept
                case .failure(let err):
                    return err.code
                }
            }
            value.pointee.value = device.controls[control.id] ?? control.defaultValue
            return 0
        }
    }

    // ---- helpers ----

    /// Runs `body` under the lock and returns its errno (0 for success).
    private func locked(_ body: () -> Int32) -> Int32 {
        condition.lock()
        defer { condition.unlock() }
        return body()
    }

    /// Sets errno after the lock is released (unlocking must not be able to clobber it) and returns like C.
    private func finish(_ err: Int32, _ success: Int32) -> Int32 {
        guard err != 0 else { return success }
        errno = err
        return -1
    }

    /// Sleeps on the condition until the CLOCK_MONOTONIC instant `untilUs` (or a broadcast); the lock must be held.
    private func wait(until untilUs: Double, now: Double) {
        if untilUs == .infinity {
            condition.wait()
        } else if untilUs > now {
            // NSCondition takes a wall-clock Date; only the remaining duration is carried over.
            _ = condition.wait(until: Date(timeIntervalSinceNow: (untilUs - now) / 1_000_000))
        }
    }

    static func nowUs() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) * 1_000_000 + Double(ts.tv_nsec) / 1000
    }

    /// Copies a string into a fixed-size, NUL-terminated C char array (imported as a tuple).
    static func write<T>(_ string: String, into tuple: inout T) {
        withUnsafeMutableBytes(of: &tuple) { raw in
            for i in raw.indices { raw[i] = 0 }
            for (i, byte) in string.utf8.prefix(raw.count - 1).enumerated() { raw[i] = byte }
        }
    }

    private static let errnos: [String: Int32] = [
        "EACCES": EACCES, "EAGAIN": EAGAIN, "EBUSY": EBUSY, "EINVAL": EINVAL, "EIO": EIO, "ENODEV": ENODEV,
        "ENOENT": ENOENT, "ENOMEM": ENOMEM, "ENOSPC": ENOSPC, "ENOTTY": ENOTTY, "ENXIO": ENXIO, "EPERM": EPERM,
        "EPIPE": EPIPE, "EPROTO": EPROTO, "ERANGE": ERANGE, "ETIMEDOUT": ETIMEDOUT,
    ]
    static var errnoNames: String { errnos.keys.sorted().joined(separator: ", ") }
    static func errnoNamed(_ name: String) -> Int32? { errnos[name] }

    /// A stable hash of the path, so each device draws its own numbers from one seed.
    static func fnv1a(_ string: String) -> UInt64 {
        string.utf8.reduce(0xcbf2_9ce4_8422_2325) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 }
    }
}

// ---- the driver's model of one device ----

/// One open fd.
private final class Handle {
    let device: DeviceState
    let nonBlocking: Bool

    init(device: DeviceState, nonBlocking: Bool) {
        self.device = device
        self.nonBlocking = nonBlocking
    }
}

/// A driver buffer's memory; freed when neither the queue nor a mapping holds it.
private final class Storage {
    let pointer: UnsafeMutableRawPointer
    let length: Int

    init(length: Int) {
        self.length = length
        pointer = UnsafeMutableRawPointer.allocate(byteCount: max(length, 1), alignment: 4096)
        pointer.initializeMemory(as: UInt8.self, repeating: 0, count: max(length, 1))
    }

    deinit { pointer.deallocate() }
}

private struct Mapping {
    let storage: Storage
    let device: DeviceState
    var count: Int
}

private struct Buffer {
    enum State { case dequeued, queued, done }
    let storage: Storage
    let offset: UInt32
    var state = State.dequeued
    var mapCount = 0
    var queuedAtUs = 0.0
    var bytesUsed: UInt32 = 0
    var sequence: UInt32 = 0
    var timestampUs: Int64 = 0
}

/// A frame the sensor will produce: its true times on CLOCK_MONOTONIC, in microseconds.
private struct PendingFrame {
    var sequence: UInt32
    var startOfExposure: Double
    var exposure: Double
    /// When the driver needs a queued buffer: readout begins at the end of exposure.
    var fillStart: Double { startOfExposure + exposure }
    /// End of readout: the buffer is done and the EOF timestamp taken.
    var readyAt: Double
}

private final class DeviceState {
    let path: String
    let script: ScriptedV4L2Driver.Device
    let profile: Profile
    var rng: SplitMix64
    var formatIndex = 0
    var sizeIndex = 0
    var fps: UInt32
    var controls: [UInt32: Int32] = [:]
    var owner: Int32?
    var buffers: [Buffer] = []
    var queued: [Int] = []
    var done: [Int] = []
    var streaming = false
    var pending: PendingFrame?
    var filled = 0
    var dequeued = 0
    var unplugged = false
    let drops: Set<UInt32>

    init(path: String, script: ScriptedV4L2Driver.Device, profile: Profile, seed: UInt64) {
        self.path = path
        self.script = script
        self.profile = profile
        rng = SplitMix64(seed: seed)
        fps = profile.formats.first?.sizes.first?.fps.first ?? 30
        drops = Set(script.dropSequences ?? [])
        for control in profile.controls { controls[control.id] = control.defaultValue }
    }

    var format: FormatSpec { profile.formats[formatIndex] }
    var size: SizeSpec { format.sizes[sizeIndex] }

    // ---- format and interval, snapped as uvcvideo snaps them ----

    /// An unknown fourcc falls back to the first format; the size is the offered one closest in area overlap
    /// (uvc_v4l2_try_format's metric), and the interval resets to that size's default (its fastest).
    func setFormat(pixelFormat: UInt32, width: UInt32, height: UInt32) {
        formatIndex = profile.formats.firstIndex { $0.pixelFormat == pixelFormat } ?? 0
        var best = (index: 0, distance: Int64.max)
        for (i, s) in format.sizes.enumerated() {
            let (w, h, rw, rh) = (Int64(s.width), Int64(s.height), Int64(width), Int64(height))
            let overlap = min(w, rw) * min(h, rh)
            let distance = w * h + rw * rh - 2 * overlap
            if distance < best.distance { best = (i, distance) }
        }
        sizeIndex = best.index
        fps = size.fps[0]
    }

    /// The offered interval nearest the one asked, by period; 0 in either term means the default.
    func setInterval(numerator: UInt32, denominator: UInt32) {
        guard numerator != 0, denominator != 0 else {
            fps = size.fps[0]
            return
        }
        let asked = Double(numerator) / Double(denominator)
        fps = size.fps.min { abs(1 / Double($0) - asked) < abs(1 / Double($1) - asked) }!
    }

    func pixFormat() -> v4l2_pix_format {
        var pix = v4l2_pix_format()
        pix.width = size.width
        pix.height = size.height
        pix.pixelformat = format.pixelFormat
        pix.field = CV4L2_FIELD_NONE
        pix.bytesperline = format.compressed ? 0 : size.width * 2
        pix.sizeimage = sizeImage
        pix.colorspace = CV4L2_COLORSPACE_SRGB
        return pix
    }

    /// YUYV is two bytes a pixel; uvcvideo reports the same bound (dwMaxVideoFrameSize) for MJPG.
    var sizeImage: UInt32 { size.width * size.height * 2 }

    // ---- buffers ----

    func allocateBuffers(count: UInt32) {
        let length = Int(sizeImage)
        let stride = (length + 4095) / 4096 * 4096  // offsets are page-aligned cookies, as vb2 hands them out
        buffers = (0..<Int(count)).map { Buffer(storage: Storage(length: length), offset: UInt32($0 * stride)) }
    }

    /// Frees the queue; a buffer still mapped lives on with its mapping (vb2 orphans it).
    func releaseBuffers() {
        buffers = []
        queued = []
        done = []
    }

    func describe(buffer index: Int, into buf: UnsafeMutablePointer<v4l2_buffer>) {
        let b = buffers[index]
        var out = v4l2_buffer()
        out.index = UInt32(index)
        out.type = CV4L2_BUF_TYPE_VIDEO_CAPTURE
        out.memory = CV4L2_MEMORY_MMAP
        out.m.offset = b.offset
        out.length = UInt32(b.storage.length)
        out.field = CV4L2_FIELD_NONE
        out.bytesused = b.bytesUsed
        out.sequence = b.sequence
        out.timestamp.tv_sec = Int(b.timestampUs / 1_000_000)
        out.timestamp.tv_usec = Int(b.timestampUs % 1_000_000)
        out.flags = CV4L2_BUF_FLAG_TIMESTAMP_MONOTONIC | timestampSourceFlag
        if b.mapCount > 0 { out.flags |= CV4L2_BUF_FLAG_MAPPED }
        switch b.state {
        case .queued: out.flags |= CV4L2_BUF_FLAG_QUEUED
        case .done: out.flags |= CV4L2_BUF_FLAG_DONE
        case .dequeued: break
        }
        buf.pointee = out
    }

    var timestampIsEOF: Bool { script.timestampSource == "eof" }
    var timestampSourceFlag: UInt32 { timestampIsEOF ? CV4L2_BUF_FLAG_TSTAMP_SRC_EOF : CV4L2_BUF_FLAG_TSTAMP_SRC_SOE }

    // ---- controls ----

    /// A manual value is accepted only while its auto control is off (the control framework's INACTIVE flag).
    func isActive(_ control: ControlSpec) -> Bool {
        guard let auto = control.autoID else { return true }
        return control.activeWhen.contains(controls[auto] ?? 0)
    }

    // ---- streaming, in real time ----

    /// The frame period the sensor actually runs at, by CLOCK_MONOTONIC.
    var truePeriodUs: Double { 1_000_000 / Double(fps) / (1 + (script.rateErrorPPM ?? 0) * 1e-6) }

    /// Half the frame interval unless exposure_absolute rules (manual or shutter priority), in 100 µs units.
    var exposureUs: Double {
        let mode = controls[CV4L2_CID_EXPOSURE_AUTO]
        if mode == CV4L2_EXPOSURE_MANUAL || mode == CV4L2_EXPOSURE_SHUTTER_PRIORITY,
           let value = controls[CV4L2_CID_EXPOSURE_ABSOLUTE]
        {
            return Double(value) * 100
        }
        return 500_000 / Double(fps)
    }

    /// Exposure, then a readout of half the frame period: at the default exposure the frame ends one interval
    /// after it began.
    func frame(sequence: UInt32, startOfExposure: Double) -> PendingFrame {
        let exposure = exposureUs
        return PendingFrame(sequence: sequence, startOfExposure: startOfExposure, exposure: exposure,
                            readyAt: startOfExposure + exposure + truePeriodUs / 2)
    }

    func start(now: Double) {
        streaming = true
        let phase = script.startPhaseUs ?? rng.uniform() * truePeriodUs
        pending = frame(sequence: 0, startOfExposure: now + phase)
    }

    /// STREAMOFF: the sensor stops and every buffer comes back to the application, done or not.
    func stop() {
        streaming = false
        pending = nil
        for i in buffers.indices { buffers[i].state = .dequeued }
        queued = []
        done = []
    }

    /// Captures every frame whose readout has ended by `now`: into the oldest buffer queued before the readout
    /// began, else dropped (the sequence still counts it, so the consumer sees the gap).
    func advance(now: Double, painter: (ScriptedV4L2Driver.Frame) -> Int) {
        guard streaming, !unplugged else { return }
        while let f = pending, f.readyAt <= now {
            if let limit = script.unplugAfterFrames, filled >= limit {
                // Yanked between frames, once the consumer holds every frame it was promised.
                if dequeued >= limit { unplugged = true }
                return
            }
            // A long exposure stretches the frame, as UVC cameras lower their rate in manual exposure.
            pending = frame(sequence: f.sequence &+ 1, startOfExposure: f.startOfExposure + max(truePeriodUs, f.exposure))
            if drops.contains(f.sequence) { continue }
            guard let index = queued.first, buffers[index].queuedAtUs <= f.fillStart else { continue }
            queued.removeFirst()
            let storage = buffers[index].storage
            let used = painter(ScriptedV4L2Driver.Frame(
                fourcc: V4L2Device.fourcc(format.pixelFormat), width: Int(size.width), height: Int(size.height),
                sequence: f.sequence, startOfExposureUs: Int64(f.startOfExposure.rounded()),
                exposureUs: Int64(f.exposure.rounded()),
                buffer: UnsafeMutableRawBufferPointer(start: storage.pointer, count: storage.length)))
            let jitter = (script.timestampJitterUs ?? 0) > 0 ? rng.gaussian() * script.timestampJitterUs! : 0
            let stamp = (timestampIsEOF ? f.readyAt : f.startOfExposure) + jitter
            buffers[index].bytesUsed = UInt32(min(max(used, 0), storage.length))
            buffers[index].sequence = f.sequence
            buffers[index].timestampUs = Int64(stamp.rounded())
            buffers[index].state = .done
            done.append(index)
            filled += 1
        }
    }
}

// ---- profiles: what real devices answer ----

private struct SizeSpec {
    var width: UInt32
    var height: UInt32
    /// Frame rates offered, fastest first, as uvcvideo lists the intervals (1/fps).
    var fps: [UInt32]
}

private struct FormatSpec {
    var pixelFormat: UInt32
    var description: String
    var compressed: Bool
    var sizes: [SizeSpec]
}

private struct ControlError: Error {
    var code: Int32
}

private struct ControlSpec {
    var id: UInt32
    var type: UInt32
    var name: String
    var minimum: Int32
    var maximum: Int32
    var step: Int32
    var defaultValue: Int32
    /// Menu items the device offers (others in range are EINVAL), for menu controls.
    var menuItems: [Int32] = []
    /// The auto control that governs this one, and the values of it under which this one may be set.
    var autoID: UInt32?
    var activeWhen: [Int32] = []

    /// What the control framework does with a value: integers clamp and round to the step, menus must name an item.
    func validate(_ value: Int32) -> Result<Int32, ControlError> {
        if type == CV4L2_CTRL_TYPE_MENU {
            guard value >= minimum, value <= maximum else { return .failure(ControlError(code: ERANGE)) }
            return menuItems.contains(value) ? .success(value) : .failure(ControlError(code: EINVAL))
        }
        let clamped = min(max(Int64(value), Int64(minimum)), Int64(maximum))
        let step = Int64(max(step, 1))
        let rounded = Int64(minimum) + (clamped - Int64(minimum) + step / 2) / step * step
        return .success(Int32(min(rounded, Int64(maximum))))
    }
}

private struct Profile {
    var driver: String
    var card: String
    var busInfo: String
    var capabilities: UInt32
    var deviceCaps: UInt32
    var formats: [FormatSpec]
    var controls: [ControlSpec]

    var isCapture: Bool { (deviceCaps & CV4L2_CAP_VIDEO_CAPTURE) != 0 }

    func format(_ pixelFormat: UInt32) -> FormatSpec? { formats.first { $0.pixelFormat == pixelFormat } }
    func control(_ id: UInt32) -> ControlSpec? { controls.first { $0.id == id } }

    /// KERNEL_VERSION(6, 8, 0): what QUERYCAP reports on a current Ubuntu LTS.
    static let kernelVersion: UInt32 = (6 << 16) | (8 << 8) | 0

    static let names = ["metadata-node", "uvc-webcam"]

    static func named(_ name: String) -> Profile? {
        switch name {
        case "uvc-webcam": uvcWebcam
        case "metadata-node": metadataNode
        default: nil
        }
    }

    /// The whole UVC device: a video node and a metadata node (what QUERYCAP's `capabilities` reports on both).
    static let uvcDeviceCaps = CV4L2_CAP_VIDEO_CAPTURE | CV4L2_CAP_META_CAPTURE | CV4L2_CAP_STREAMING
        | CV4L2_CAP_EXT_PIX_FORMAT | CV4L2_CAP_DEVICE_CAPS

    /// A Logitech C920 as uvcvideo presents it (trimmed to three sizes).
    static let uvcWebcam = Profile(
        driver: "uvcvideo", card: "HD Pro Webcam C920", busInfo: "usb-0000:00:14.0-1",
        capabilities: uvcDeviceCaps,
        deviceCaps: CV4L2_CAP_VIDEO_CAPTURE | CV4L2_CAP_STREAMING | CV4L2_CAP_EXT_PIX_FORMAT,
        formats: [
            // Uncompressed 1080p needs more USB 2.0 bandwidth than 30 fps allows, hence the slow rates.
            FormatSpec(pixelFormat: CV4L2_PIX_FMT_YUYV, description: "YUYV 4:2:2", compressed: false, sizes: [
                SizeSpec(width: 640, height: 480, fps: [30, 24, 20, 15, 10, 5]),
                SizeSpec(width: 1280, height: 720, fps: [10, 5]),
                SizeSpec(width: 1920, height: 1080, fps: [5]),
            ]),
            FormatSpec(pixelFormat: CV4L2_PIX_FMT_MJPEG, description: "Motion-JPEG", compressed: true, sizes: [
                SizeSpec(width: 640, height: 480, fps: [30, 24, 20, 15, 10, 5]),
                SizeSpec(width: 1280, height: 720, fps: [30, 24, 20, 15, 10, 5]),
                SizeSpec(width: 1920, height: 1080, fps: [30, 24, 20, 15, 10, 5]),
            ]),
        ],
        controls: [
            ControlSpec(id: CV4L2_CID_AUTO_WHITE_BALANCE, type: CV4L2_CTRL_TYPE_BOOLEAN,
                        name: "White Balance Temperature, Auto", minimum: 0, maximum: 1, step: 1, defaultValue: 1),
            ControlSpec(id: CV4L2_CID_WHITE_BALANCE_TEMPERATURE, type: CV4L2_CTRL_TYPE_INTEGER,
                        name: "White Balance Temperature", minimum: 2000, maximum: 6500, step: 1, defaultValue: 4000,
                        autoID: CV4L2_CID_AUTO_WHITE_BALANCE, activeWhen: [0]),
            ControlSpec(id: CV4L2_CID_EXPOSURE_AUTO, type: CV4L2_CTRL_TYPE_MENU, name: "Exposure, Auto",
                        minimum: 0, maximum: 3, step: 1, defaultValue: CV4L2_EXPOSURE_APERTURE_PRIORITY,
                        menuItems: [CV4L2_EXPOSURE_MANUAL, CV4L2_EXPOSURE_APERTURE_PRIORITY]),
            ControlSpec(id: CV4L2_CID_EXPOSURE_ABSOLUTE, type: CV4L2_CTRL_TYPE_INTEGER, name: "Exposure (Absolute)",
                        minimum: 3, maximum: 2047, step: 1, defaultValue: 250,
                        autoID: CV4L2_CID_EXPOSURE_AUTO,
                        activeWhen: [CV4L2_EXPOSURE_MANUAL, CV4L2_EXPOSURE_SHUTTER_PRIORITY]),
            ControlSpec(id: CV4L2_CID_FOCUS_ABSOLUTE, type: CV4L2_CTRL_TYPE_INTEGER, name: "Focus (absolute)",
                        minimum: 0, maximum: 250, step: 5, defaultValue: 0,
                        autoID: CV4L2_CID_FOCUS_AUTO, activeWhen: [0]),
            ControlSpec(id: CV4L2_CID_FOCUS_AUTO, type: CV4L2_CTRL_TYPE_BOOLEAN, name: "Focus, Auto",
                        minimum: 0, maximum: 1, step: 1, defaultValue: 1),
            ControlSpec(id: CV4L2_CID_GAIN, type: CV4L2_CTRL_TYPE_INTEGER, name: "Gain",
                        minimum: 0, maximum: 255, step: 1, defaultValue: 0),
        ])

    /// UVC's second node: same camera, metadata only; capture ioctls are EINVAL, parm and controls ENOTTY.
    static let metadataNode = Profile(
        driver: "uvcvideo", card: "HD Pro Webcam C920", busInfo: "usb-0000:00:14.0-1",
        capabilities: uvcDeviceCaps,
        deviceCaps: CV4L2_CAP_META_CAPTURE | CV4L2_CAP_STREAMING | CV4L2_CAP_EXT_PIX_FORMAT,
        formats: [], controls: [])
}

/// A small seeded generator (SplitMix64), so a script replays the same phases and jitter.
private struct SplitMix64 {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    mutating func uniform() -> Double { Double(next() >> 11) / Double(1 << 53) }

    /// Standard normal, by Box–Muller.
    mutating func gaussian() -> Double {
        let u1 = max(uniform(), .leastNonzeroMagnitude)
        return (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * uniform())
    }
}
