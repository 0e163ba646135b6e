import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Where the coordinator tells the operator what is happening: progress to stderr (rewritten in place on a
/// terminal, plain lines otherwise), results to stdout.
public final class Console: @unchecked Sendable {
    private let lock = NSLock()
    private let interactive: Bool
    private var progressShown = false
    public var quiet = false

    public init() {
        interactive = isatty(STDERR_FILENO) == 1
    }

    /// A line of progress; on a terminal it replaces the previous progress line.
    public func progress(_ text: String) {
        guard !quiet else { return }
        lock.lock(); defer { lock.unlock() }
        if interactive {
            FileHandle.standardError.write(Data("\r\u{1B}[2K\(text)".utf8))
            progressShown = true
        } else {
            FileHandle.standardError.write(Data("\(text)\n".utf8))
        }
    }

    /// A step worth keeping on screen.
    public func step(_ text: String) {
        guard !quiet else { return }
        lock.lock(); defer { lock.unlock() }
        endProgress()
        FileHandle.standardError.write(Data("\(text)\n".utf8))
    }

    /// Results, on stdout.
    public func result(_ text: String) {
        lock.lock(); defer { lock.unlock() }
        endProgress()
        FileHandle.standardOutput.write(Data("\(text)\n".utf8))
    }

    private func endProgress() {
        if progressShown {
            FileHandle.standardError.write(Data("\n".utf8))
            progressShown = false
        }
    }
}
