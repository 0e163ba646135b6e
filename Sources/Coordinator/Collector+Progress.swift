// The collector's progress on the console: each node's transfer meter and the rig's total.
import CoordCore
import Platform

extension Collector {

    func advance(_ node: String, _ bytes: UInt64) {
        progress.withLock { _ = $0.meters[node]?.add(bytes, at: MonotonicClock.now()) }
    }

    func showProgress() {
        let now = MonotonicClock.now()
        var lines: [String] = []
        var done: UInt64 = 0, total: UInt64 = 0, rate = 0.0
        progress.withLock { progress in
            for name in progress.nodeOrder {
                guard var meter = progress.meters[name], meter.total > 0 else { continue }
                meter.record(now)
                progress.meters[name] = meter
                done += meter.done
                total += meter.total
                rate += meter.rate ?? 0
                lines.append("  \(name): " + Self.progressFigures(done: meter.done, total: meter.total, rate: meter.rate, left: meter.secondsLeft))
            }
        }
        guard total > 0 else { return }
        let left: Double? = done >= total ? 0 : (rate > 0 ? Double(total - done) / rate : nil)
        lines.insert("collecting " + Self.progressFigures(done: done, total: total, rate: rate > 0 ? rate : nil, left: left), at: 0)
        console.progressBlock(lines)
    }

    /// "1.20 GiB / 2.00 GiB (60 %)  95.1 MiB/s  ETA 9 s"
    static func progressFigures(done: UInt64, total: UInt64, rate: Double?, left: Double?) -> String {
        let percent = total > 0 ? Int(Double(done) * 100 / Double(total)) : 100
        var text = "\(formatBytes(done)) / \(formatBytes(total)) (\(percent) %)"
        text += rate.map { "  \(formatBytes(UInt64($0)))/s" } ?? "  -"
        if done >= total { text += "  done" } else { text += left.map { "  ETA \(Budget.duration($0))" } ?? "  ETA -" }
        return text
    }
}
