import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Where the coordinator tells the operator what is happening: progress to stderr (rewritten in place when
/// both stdout and stderr are a terminal, plain lines otherwise, so a log or a pipe gets whole lines), results
/// to stdout.
// @unchecked: what is drawn is under `lock`; `quiet` is set once, before any task prints.
public final class Console: @unchecked Sendable {
    private let lock = NSLock()
    public let interactive: Bool
    private var progressShown = false
    /// Lines of the progress block last drawn (a terminal only), redrawn in place.
    private var blockLines = 0
    public var quiet = false

    public init() {
        interactive = isatty(STDERR_FILENO) == 1 && isatty(STDOUT_FILENO) == 1
    }

    /// Several lines of progress (e.g. one per node and a total); on a terminal they replace the previous block.
    public func progressBlock(_ lines: [String]) {
        guard !quiet else { return }
        lock.lock(); defer { lock.unlock() }
        guard interactive else {
            FileHandle.standardError.write(Data(lines.map { "\($0)\n" }.joined().utf8))
            return
        }
        var text = progressShown ? "\r\u{1B}[2K" : ""
        if blockLines > 1 { text += "\u{1B}[\(blockLines - 1)A" }
        text += lines.map { "\r\u{1B}[2K\($0)" }.joined(separator: "\n")
        // A shorter block than last time: clear the lines left below it.
        if blockLines > lines.count {
            for _ in lines.count..<blockLines { text += "\n\r\u{1B}[2K" }
            text += "\u{1B}[\(blockLines - lines.count)A"
        }
        FileHandle.standardError.write(Data(text.utf8))
        progressShown = true
        blockLines = lines.count
    }

    /// A line of progress; on a terminal it replaces the previous progress line.
    public func progress(_ text: String) {
        guard !quiet else { return }
        lock.lock(); defer { lock.unlock() }
        if interactive {
            FileHandle.standardError.write(Data("\r\u{1B}[2K\(text)".utf8))
            progressShown = true
            blockLines = 1
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
            blockLines = 0
        }
    }
}
