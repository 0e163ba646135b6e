// A V4L2 driver written in Swift for machines without cameras: it fills the same C structs a kernel driver fills,
// keeps real time (a frame is ready only once the clock has passed its readout) and fails the way uvcvideo fails,
// so V4L2Device's own code is what the tests exercise.
import CV4L2
import CoordCore
import Foundation
import Platform
import V4L2

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A scripted V4L2 driver: devices described by a Script answer every call like a driver with real time.
// @unchecked: every device, handle and mapping is under `condition`, as a kernel driver's state is under its own lock.
public final class ScriptedV4L2Driver: V4L2Driver, @unchecked Sendable {
    // ---- state, all behind `condition` ----

    /// The one lock; poll and a blocking DQBUF sleep on it until a frame is due or another thread changes the queue.
    let condition = NSCondition()
    var devices: [String: DeviceState] = [:]
    var handles: [Int32: Handle] = [:]
    var mappings: [UnsafeMutableRawPointer: Mapping] = [:]
    /// High so a scripted fd is never mistaken for one of the process's real fds in a log.
    var nextFd: Int32 = 1000
    let painter: (Frame) -> Int

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

    // ---- helpers ----

    /// Runs `body` under the lock and returns its errno (0 for success).
    func locked(_ body: () -> Int32) -> Int32 {
        condition.lock()
        defer { condition.unlock() }
        return body()
    }

    /// Sets errno after the lock is released (unlocking must not be able to clobber it) and returns like C.
    func finish(_ err: Int32, _ success: Int32) -> Int32 {
        guard err != 0 else { return success }
        errno = err
        return -1
    }

    /// Sleeps on the condition until the CLOCK_MONOTONIC instant `untilUs` (or a broadcast); the lock must be held.
    func wait(until untilUs: Double, now: Double) {
        if untilUs == .infinity {
            condition.wait()
        } else if untilUs > now {
            // NSCondition takes a wall-clock Date; only the remaining duration is carried over.
            _ = condition.wait(until: Date(timeIntervalSinceNow: (untilUs - now) / 1_000_000))
        }
    }

    /// CLOCK_MONOTONIC in microseconds, as the platform's clock reads it.
    static func nowUs() -> Double { Double(MonotonicClock.now()) }

    /// Copies a string into a fixed-size, NUL-terminated C char array (imported as a tuple).
    static func write<T>(_ string: String, into tuple: inout T) {
        withUnsafeMutableBytes(of: &tuple) { raw in
            for i in raw.indices { raw[i] = 0 }
            for (i, byte) in string.utf8.prefix(raw.count - 1).enumerated() { raw[i] = byte }
        }
    }

    static let errnos: [String: Int32] = [
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
