// The one funnel for POSIX calls on files and sockets, as swift-nio's System.swift: a call interrupted by a
// signal (EINTR) is made again, any other failure becomes a `POSIXFailure` naming the call and carrying errno.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A system call that failed: its name, what it was about and the errno it left; renders as one sentence.
public struct POSIXFailure: Error, Equatable, Sendable, CustomStringConvertible {
    /// The call, e.g. "open" or "sendto".
    public var call: String
    /// What the call was about (a path, "a UDP socket"), if anything.
    public var subject: String?
    public var errno: Int32

    public init(_ call: String, _ subject: String? = nil, errno: Int32) {
        self.call = call
        self.subject = subject
        self.errno = errno
    }

    /// The C library's words for `errno`, e.g. "No space left on device".
    public var reason: String { POSIX.text(errno) }

    /// "open of /srv/takes/a.mkv failed: No such file or directory (errno 2)."
    public var description: String {
        "\(call)\(subject.map { " of \($0)" } ?? "") failed: \(reason) (errno \(errno))."
    }
}

public enum POSIX {
    /// Makes `body` (a call returning -1 and setting errno on failure) until it is not interrupted; returns what
    /// it returned, or throws a `POSIXFailure` for `call` on `subject` with the errno it left.
    @discardableResult
    public static func retryingEINTR<Result: BinaryInteger>(_ call: String, _ subject: String? = nil,
                                                          _ body: () -> Result) throws(POSIXFailure) -> Result {
        while true {
            let result = body()
            if result != -1 { return result }
            let code = lastErrno
            if code == EINTR { continue }
            throw POSIXFailure(call, subject, errno: code)
        }
    }

    /// For calls that return the error number itself (0 on success) rather than setting errno: posix_memalign,
    /// posix_fallocate, pthread_*. EINTR is retried like `retryingEINTR`.
    public static func returningErrno(_ call: String, _ subject: String? = nil, _ body: () -> Int32) throws(POSIXFailure) {
        while true {
            let code = body()
            if code == 0 { return }
            if code == EINTR { continue }
            throw POSIXFailure(call, subject, errno: code)
        }
    }

    /// The errno the last failed call left on this thread.
    public static var lastErrno: Int32 { errno }

    /// The C library's words for an errno.
    public static func text(_ code: Int32) -> String { String(cString: strerror(code)) }
}
