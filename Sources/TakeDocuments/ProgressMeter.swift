import Foundation
import Synchronization

/// Bytes done out of a total, as `coord deliver: 12.3/45.6 MB, 20.1 MB/s, ETA 2 s` on stderr, at most twice a second.
package final class ProgressMeter: Sendable {
    private struct State { var done: Int64 = 0; var lastPrint: TimeInterval = 0 }
    private let what: String
    private let total: Int64
    private let started = Date().timeIntervalSinceReferenceDate
    private let status: @Sendable (String) -> Void
    private let state = Mutex(State())

    package init(what: String, total: Int64, status: @escaping @Sendable (String) -> Void) {
        self.what = what; self.total = max(total, 1); self.status = status
    }

    package func add(_ bytes: Int64) {
        let now = Date().timeIntervalSinceReferenceDate
        let line: String? = state.withLock { s in
            s.done += bytes
            guard now - s.lastPrint >= 0.5 else { return nil }
            s.lastPrint = now
            return text(done: s.done, now: now)
        }
        if let line { status(line) }
    }

    /// The last line: all done (containers count fewer payload bytes than the files hold).
    package func finish() {
        let now = Date().timeIntervalSinceReferenceDate
        status(text(done: total, now: now))
    }

    private func text(done: Int64, now: TimeInterval) -> String {
        let elapsed = max(now - started, 1e-3)
        let rate = Double(done) / elapsed
        let eta = rate > 0 ? Double(max(total - done, 0)) / rate : 0
        func mb(_ b: Double) -> String { String(format: "%.1f", b / 1e6) }
        return "\(what): \(mb(Double(done)))/\(mb(Double(total))) MB, \(mb(rate)) MB/s, ETA \(Int(eta.rounded(.up))) s"
    }
}
