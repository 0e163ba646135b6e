import Foundation

// Times and figures as the page writes them.
extension SyncReportPage {
    /// One way of writing the times along an axis that reaches `reach` seconds either side of zero, and the unit its
    /// title names: seconds below ten minutes, m:ss below an hour, else h:mm:ss (never two styles on one axis).
    static func timeStyle(reach: Double) -> (unit: String, text: @Sendable (Double) -> String) {
        let a = reach.isFinite ? abs(reach) : 0
        guard a >= 600 else { return ("s", { seconds($0) }) }
        let hours = a >= 3600
        return (hours ? "h:mm:ss" : "m:ss", { s in
            guard s.isFinite, abs(s) < 1e9 else { return seconds(s) }
            let whole = Int(abs(s).rounded())
            let text = hours ? String(format: "%d:%02d:%02d", whole / 3600, whole / 60 % 60, whole % 60)
                : String(format: "%d:%02d", whole / 60, whole % 60)
            return (s < 0 && whole > 0 ? "−" : "") + text
        })
    }

    static func seconds(_ s: Double) -> String {
        let a = abs(s)
        guard a < 1e9 else { return a.isFinite ? String(format: "%.3g s", s) : "–" }
        if a >= 3600 {
            let whole = Int(a.rounded())
            return (s < 0 ? "−" : "") + String(format: "%d:%02d:%02d", whole / 3600, whole / 60 % 60, whole % 60)
        }
        if a >= 600 {
            let whole = Int(a.rounded())
            return (s < 0 ? "−" : "") + String(format: "%d:%02d", whole / 60, whole % 60)
        }
        let text = a >= 100 ? String(format: "%.0f s", a) : a >= 10 ? String(format: "%.1f s", a) : String(format: "%.2f s", a)
        return (s < 0 ? "−" : "") + text
    }

    /// A take's length for the figures at the top.
    static func duration(_ s: Double) -> String {
        s < 600 ? seconds(s) : s < 7200 ? String(format: "%.1f min", s / 60) : String(format: "%.1f h", s / 3600)
    }

    static func fixed(_ v: Double, _ digits: Int = 1) -> String { String(format: "%.\(digits)f", v) }
}
