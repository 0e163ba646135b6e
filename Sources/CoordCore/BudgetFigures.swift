// Budget figures as the operator reads them: fixed decimals, rates, bytes and durations.

/// Figures as the operator reads them, without Foundation's locale-dependent formatting.
enum BudgetFigures {
    /// `x` rounded to `decimals` places.
    static func fixed(_ x: Double, _ decimals: Int) -> String {
        guard x.isFinite else { return x.isNaN ? "?" : (x > 0 ? "∞" : "-∞") }
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let r = (abs(x) * scale).rounded()
        guard r < 9e18 else { return String(x) }
        let n = Int64(r), s = Int64(scale)
        var text = String(n / s)
        if decimals > 0 {
            let f = String(n % s)
            text += "." + String(repeating: "0", count: decimals - f.count) + f
        }
        return (x < 0 && n != 0 ? "-" : "") + text
    }

    /// Decimals that show about three significant figures of a value of this size.
    static func decimals(for x: Double) -> Int { abs(x) >= 99.95 ? 0 : abs(x) >= 9.995 ? 1 : 2 }

    static func sig3(_ x: Double) -> String { fixed(x, decimals(for: x)) }

    static func scale(_ x: Double, _ unit: ResourceLoad.Unit) -> (Double, String) {
        let names = unit == .bytesPerSecond ? ["GB/s", "MB/s", "kB/s", "B/s"] : ["Gpx/s", "Mpx/s", "kpx/s", "px/s"]
        let a = x.isFinite ? abs(x) : 0
        if a >= 1e9 { return (1e9, names[0]) }
        if a >= 1e6 { return (1e6, names[1]) }
        if a >= 1e3 { return (1e3, names[2]) }
        return (1, names[3])
    }

    static func rate(_ x: Double, _ unit: ResourceLoad.Unit) -> String {
        let (s, name) = scale(x, unit)
        return "\(sig3(x / s)) \(name)"
    }

    /// Two rates in one unit and precision, chosen by the larger, so they compare at a glance.
    static func ratePair(_ a: Double, _ b: Double, _ unit: ResourceLoad.Unit) -> (String, String) {
        let big = max(a.isFinite ? abs(a) : 0, b.isFinite ? abs(b) : 0)
        let (s, name) = scale(big, unit)
        let d = decimals(for: big / s)
        return ("\(fixed(a / s, d)) \(name)", "\(fixed(b / s, d)) \(name)")
    }

    /// The table's fixed units, MB/s and Mpx/s, so a column compares down the page.
    static func tableRate(_ x: Double, _ unit: ResourceLoad.Unit) -> String {
        "\(fixed(x / 1e6, 1)) \(unit == .bytesPerSecond ? "MB/s" : "Mpx/s")"
    }

    /// Free space as `df -h` shows it, in powers of 1024.
    static func binaryBytes(_ x: Double) -> String {
        let k = 1024.0
        if x >= k * k * k { return "\(sig3(x / (k * k * k))) GiB" }
        if x >= k * k { return "\(sig3(x / (k * k))) MiB" }
        if x >= k { return "\(sig3(x / k)) KiB" }
        return "\(fixed(x, 0)) B"
    }

    /// `45 s`, `12 min 30 s`, `2 h 5 min`; whole seconds rounded down, so a forecast never promises too much.
    static func duration(_ seconds: Double) -> String {
        // Beyond a million years (a node's figures can say so) is forever too; Int(_:) would trap far beyond it.
        guard seconds.isFinite, seconds < 3e13 else { return "forever" }
        let t = max(0, Int(seconds.rounded(.down)))
        if t < 60 { return "\(t) s" }
        if t < 3600 { return t % 60 == 0 ? "\(t / 60) min" : "\(t / 60) min \(t % 60) s" }
        let m = (t % 3600) / 60
        return m == 0 ? "\(t / 3600) h" : "\(t / 3600) h \(m) min"
    }

    /// `a`, `a and b`, `a, b and c`.
    static func list(_ items: [String]) -> String {
        guard items.count > 1 else { return items.first ?? "" }
        return items.dropLast().joined(separator: ", ") + " and " + items.last!
    }
}
