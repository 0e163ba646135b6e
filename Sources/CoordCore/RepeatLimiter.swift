/// Says whether a repeated log line should be written: the first of each kind is, then at most one per
/// `interval`, which also counts how many were held back. Memory is bounded (`capacity` kinds; the oldest is
/// forgotten), so a stream of ever-new kinds — a stranger cycling addresses — cannot grow it.
public struct RepeatLimiter: Sendable {
    public let interval: Duration
    public let capacity: Int
    private var entries: [String: Entry] = [:]
    private struct Entry: Sendable {
        var lastLogged: Int64
        var heldBack: Int
    }

    /// `admit`'s `now` is µs on the caller's clock.
    public init(interval: Duration = .seconds(60), capacity: Int = 256) {
        self.interval = interval
        self.capacity = max(1, capacity)
    }

    public enum Admission: Equatable, Sendable {
        /// Write the line; `heldBack` like it were not written since the last one.
        case log(heldBack: Int)
        case holdBack
    }

    public mutating func admit(_ kind: String, now: Int64) -> Admission {
        if var entry = entries[kind] {
            guard now - entry.lastLogged >= interval.microseconds else {
                entry.heldBack += 1
                entries[kind] = entry
                return .holdBack
            }
            entries[kind] = Entry(lastLogged: now, heldBack: 0)
            return .log(heldBack: entry.heldBack)
        }
        if entries.count >= capacity, let oldest = entries.min(by: { $0.value.lastLogged < $1.value.lastLogged })?.key {
            entries[oldest] = nil
        }
        entries[kind] = Entry(lastLogged: now, heldBack: 0)
        return .log(heldBack: 0)
    }

    public var kinds: Int { entries.count }
}
