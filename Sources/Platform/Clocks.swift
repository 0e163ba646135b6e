#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// The host's CLOCK_MONOTONIC in microseconds: the rig timebase on the coordinator, and the "true" clock
/// synthetic sensors run on.
public enum MonotonicClock {
    public static func now() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1_000
    }

    /// Sleeps until the host's CLOCK_MONOTONIC reaches `microseconds` (absolute), resuming after signals.
    public static func sleep(until microseconds: Int64) {
        var ts = timespec(tv_sec: Int(microseconds / 1_000_000), tv_nsec: Int((microseconds % 1_000_000) * 1_000))
        // An absolute sleep is made again after a signal; any other failure (EINVAL) returns at once, as before.
        try? POSIX.returningErrno("clock_nanosleep") { clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) }
    }
}

/// The wall clock, for take ids and the manifest's start time.
public enum WallClock {
    /// RFC 3339 in UTC with microseconds, e.g. `2026-11-21T16:45:00.123456Z`.
    public static func rfc3339(_ date: Date = Date()) -> String {
        let seconds = date.timeIntervalSince1970
        var whole = time_t(seconds.rounded(.down))
        let micros = Int(((seconds - Double(whole)) * 1_000_000).rounded(.down))
        var parts = tm()
        gmtime_r(&whole, &parts)
        func pad(_ v: Int, _ w: Int) -> String { let s = String(v); return String(repeating: "0", count: max(0, w - s.count)) + s }
        return "\(pad(Int(parts.tm_year) + 1900, 4))-\(pad(Int(parts.tm_mon) + 1, 2))-\(pad(Int(parts.tm_mday), 2))T"
            + "\(pad(Int(parts.tm_hour), 2)):\(pad(Int(parts.tm_min), 2)):\(pad(Int(parts.tm_sec), 2)).\(pad(micros, 6))Z"
    }

    /// UTC calendar fields (year, month, day, hour, minute, second).
    public static func utcFields(_ date: Date = Date()) -> (Int, Int, Int, Int, Int, Int) {
        var whole = time_t(date.timeIntervalSince1970.rounded(.down))
        var p = tm()
        gmtime_r(&whole, &p)
        return (Int(p.tm_year) + 1900, Int(p.tm_mon) + 1, Int(p.tm_mday), Int(p.tm_hour), Int(p.tm_min), Int(p.tm_sec))
    }
}
