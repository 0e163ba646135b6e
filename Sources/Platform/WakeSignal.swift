#if canImport(Glibc)
import Glibc
#endif

/// A pipe another thread writes to, waking a thread blocked in `ZMQSocket.poll(wakeFD:)`.
// Sendable: two file descriptors (`let`s), written and read with atomic system calls.
public final class WakeSignal: Sendable {
    /// The end to poll for readability.
    public let fd: Int32
    private let writeFD: Int32

    public init() {
        var fds: [Int32] = [0, 0]
        // Only fd exhaustion fails here, before any take: there is nothing to carry on with.
        do { try POSIX.retryingEINTR("pipe") { pipe(&fds) } } catch { preconditionFailure("\(error)") }
        fd = fds[0]
        writeFD = fds[1]
    }

    public func signal() {
        var one: UInt8 = 1
        _ = try? POSIX.retryingEINTR("write") { write(writeFD, &one, 1) }
    }

    /// Clears pending signals; call only after a poll reported `fd` readable (so the read cannot block).
    public func drain() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        _ = try? POSIX.retryingEINTR("read") { read(fd, &buffer, buffer.count) }
    }

    deinit {
        close(fd)
        close(writeFD)
    }
}
