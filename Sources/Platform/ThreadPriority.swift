#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization

/// Scheduling for the few threads whose wake-up latency is measured: the sockets that stamp clock probes.
/// Under load, a probe's timestamps wait for a busy CPU; if the node side waits longer than the coordinator
/// side, the offset estimate is biased by half the difference. A modest real-time priority makes both sides
/// wake within microseconds. Without the privilege (CAP_SYS_NICE or root) nothing changes.
public enum ThreadPriority {
    /// The SCHED_FIFO priority used: above every normal thread, far below the kernel's own real-time work.
    public static let realtime: Int32 = 10

    /// Whether this process may give its threads a real-time priority (checked once, on a scratch thread).
    public static let realtimeAllowed: Bool = {
        // Written by the scratch thread, read after it signalled.
        final class Answer: Sendable { let allowed = Mutex(false) }
        let answer = Answer()
        let done = DispatchSemaphore(value: 0)
        let probe = Thread {
            var param = sched_param()
            param.sched_priority = realtime
            let allowed = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) == 0
            answer.allowed.withLock { $0 = allowed }
            done.signal()
        }
        probe.start()
        done.wait()
        return answer.allowed.withLock { $0 }
    }()

    /// Raises the calling thread to SCHED_FIFO `realtime` if allowed; returns whether it did.
    @discardableResult
    public static func raiseCurrentThread() -> Bool {
        guard realtimeAllowed else { return false }
        var param = sched_param()
        param.sched_priority = realtime
        return pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) == 0
    }

    /// Puts the calling thread back under the normal scheduler. A thread inherits its creator's policy, so
    /// work started from a real-time thread (a camera armed from the socket thread) must call this first, or
    /// it would run at real-time priority and hold the socket thread off its core.
    public static func makeCurrentThreadNormal() {
        var param = sched_param()
        param.sched_priority = 0
        _ = pthread_setschedparam(pthread_self(), SCHED_OTHER, &param)
    }

    /// Runs `body` at real-time priority (if allowed), then puts the thread back under the scheduling it had:
    /// for a short wait whose wake-up must be on time (a camera's STREAMON at a grid instant).
    public static func withRealtime<T>(_ body: () throws -> T) rethrows -> T {
        var policy: Int32 = 0
        var previous = sched_param()
        let known = pthread_getschedparam(pthread_self(), &policy, &previous) == 0
        let raised = known && policy != SCHED_FIFO && raiseCurrentThread()
        defer { if raised { _ = pthread_setschedparam(pthread_self(), policy, &previous) } }
        return try body()
    }

    /// Names the calling thread as `top` and `ps -L` show it (at most 15 bytes).
    public static func nameCurrentThread(_ name: String) {
        try? Data(name.utf8.prefix(15)).write(to: URL(fileURLWithPath: "/proc/thread-self/comm"))
    }
}
