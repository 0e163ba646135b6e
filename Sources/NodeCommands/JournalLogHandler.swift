import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// Log lines as journald wants them when stderr is the journal: a `<N>` priority prefix (sd-daemon(3)) and no
/// timestamp of our own (the journal stamps each line).
struct JournalLogHandler: LogHandler {
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    let label: String

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Whether stderr is the journal: $JOURNAL_STREAM names its device and inode (systemd.exec(5)).
    static func stderrIsTheJournal(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        guard let stream = environment["JOURNAL_STREAM"] else { return false }
        var info = stat()
        guard fstat(2, &info) == 0 else { return false }
        return stream == "\(info.st_dev):\(info.st_ino)"
    }

    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: return 7
        case .info: return 6
        case .notice: return 5
        case .warning: return 4
        case .error: return 3
        case .critical: return 2
        }
    }

    func log(level: Logger.Level, message: Logger.Message, metadata extra: Logger.Metadata?, source: String,
             file: String, function: String, line: UInt) {
        let all = metadata.merging(extra ?? [:]) { $1 }
        let fields = all.isEmpty ? "" : " " + all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        // One line per message: a newline inside would start an unprefixed journal entry.
        let text = "<\(Self.priority(level))>\(label): \(message)\(fields)".replacingOccurrences(of: "\n", with: " ") + "\n"
        FileHandle.standardError.write(Data(text.utf8))
    }
}
