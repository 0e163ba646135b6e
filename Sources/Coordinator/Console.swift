import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Where the coordinator tells the operator what is happening: progress to stderr (rewritten in place when
/// both stdout and stderr are a terminal, plain lines otherwise, so a log or a pipe gets whole lines), results
/// to stdout.
public final class Console: Sendable {
    private struct Drawn {
        var progressShown = false
        /// Lines of the progress block last drawn (a terminal only), redrawn in place.
        var blockLines = 0
    }
    private let drawn = Mutex(Drawn())
    public let interactive: Bool
    /// Nothing is printed (tests that drive a take in-process).
    public let quiet: Bool
    /// Also told every step (the live console shows them as events).
    private let onStep: (@Sendable (String) -> Void)?

    public init(quiet: Bool = false, onStep: (@Sendable (String) -> Void)? = nil) {
        interactive = isatty(STDERR_FILENO) == 1 && isatty(STDOUT_FILENO) == 1
        self.quiet = quiet
        self.onStep = onStep
    }

    /// Several lines of progress (e.g. one per node and a total); on a terminal they replace the previous block.
    public func progressBlock(_ lines: [String]) {
        guard !quiet else { return }
        guard interactive else {
            FileHandle.standardError.write(Data(lines.map { "\($0)\n" }.joined().utf8))
            return
        }
        drawn.withLock { drawn in
            var text = drawn.progressShown ? "\r\u{1B}[2K" : ""
            if drawn.blockLines > 1 { text += "\u{1B}[\(drawn.blockLines - 1)A" }
            text += lines.map { "\r\u{1B}[2K\($0)" }.joined(separator: "\n")
            // A shorter block than last time: clear the lines left below it.
            if drawn.blockLines > lines.count {
                for _ in lines.count..<drawn.blockLines { text += "\n\r\u{1B}[2K" }
                text += "\u{1B}[\(drawn.blockLines - lines.count)A"
            }
            FileHandle.standardError.write(Data(text.utf8))
            drawn.progressShown = true
            drawn.blockLines = lines.count
        }
    }

    /// A line of progress; on a terminal it replaces the previous progress line.
    public func progress(_ text: String) {
        guard !quiet else { return }
        drawn.withLock { drawn in
            if interactive {
                FileHandle.standardError.write(Data("\r\u{1B}[2K\(text)".utf8))
                drawn.progressShown = true
                drawn.blockLines = 1
            } else {
                FileHandle.standardError.write(Data("\(text)\n".utf8))
            }
        }
    }

    /// A step worth keeping on screen.
    public func step(_ text: String) {
        onStep?(text)
        guard !quiet else { return }
        drawn.withLock { drawn in
            Self.endProgress(&drawn)
            FileHandle.standardError.write(Data("\(text)\n".utf8))
        }
    }

    /// Results, on stdout.
    public func result(_ text: String) {
        drawn.withLock { drawn in
            Self.endProgress(&drawn)
            FileHandle.standardOutput.write(Data("\(text)\n".utf8))
        }
    }

    private static func endProgress(_ drawn: inout Drawn) {
        if drawn.progressShown {
            FileHandle.standardError.write(Data("\n".utf8))
            drawn = Drawn()
        }
    }
}
