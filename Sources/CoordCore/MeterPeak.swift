/// A microphone's level as the console's meter shows it: the peak since about a second ago (what one status a
/// second holds), so a short click between two statuses is not missed, as the newest buffer's level alone misses it.
public struct MeterPeak: Sendable, Equatable {
    public static let windowMicroseconds: Int64 = 1_000_000
    /// The peaks of the window under way and of the one before it (dBFS; −100 is silence).
    private var current = -100.0
    private var previous = -100.0
    private var windowStart: Int64?

    public init() {}

    /// A buffer whose peak is `level` dBFS arrived at `now` (µs).
    public mutating func add(_ level: Double, now: Int64) {
        if let start = windowStart, now - start < Self.windowMicroseconds {
            current = max(current, level)
            return
        }
        // A window with no buffer since (the sound stopped) leaves nothing behind.
        previous = windowStart.map { now - $0 < 2 * Self.windowMicroseconds } == true ? current : -100
        current = level
        windowStart = now
    }

    /// The peak over the last one to two seconds, dBFS.
    public var level: Double { max(current, previous) }
}
