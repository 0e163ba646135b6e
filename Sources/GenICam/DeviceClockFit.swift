/// Where a camera's own clock lies on the node's: a line through (device timestamp, local time the buffer arrived)
/// for its recent frames. The slope is the least-squares fit (the device clock's rate against the node's, measured,
/// as the microphones' `SampleClockFit` does); the offset is the lower envelope — the frame that arrived soonest
/// after its timestamp — because transport delay only ever adds to the arrival time. What remains is the smallest
/// delay seen (frame readout and transfer), a constant the line cannot know; docs/genicam.md says what hardware
/// trigger and PTP would do instead.
public struct DeviceClockFit: Sendable, Equatable {
    /// Points kept: a window of recent frames, so a slowly wandering device clock is followed.
    public let capacity: Int
    /// The first point: the line is kept relative to it so nanosecond counters of hours keep full precision.
    private var origin: (device: Double, local: Double)?
    private var points: [(device: Double, local: Double)] = []
    private var next = 0

    public init(capacity: Int = 256) { self.capacity = max(2, capacity) }

    public static func == (a: DeviceClockFit, b: DeviceClockFit) -> Bool {
        a.capacity == b.capacity && a.points.count == b.points.count
            && zip(a.points, b.points).allSatisfy { $0.device == $1.device && $0.local == $1.local }
    }

    public var count: Int { points.count }

    /// Adds one frame: its device timestamp (µs of the device clock) and the local time it arrived (µs).
    public mutating func add(deviceMicroseconds: Double, arrivedLocal: Double) {
        if origin == nil { origin = (deviceMicroseconds, arrivedLocal) }
        let point = (deviceMicroseconds - origin!.device, arrivedLocal - origin!.local)
        if points.count < capacity {
            points.append(point)
        } else {
            points[next] = point
            next = (next + 1) % capacity
        }
    }

    /// Local µs per device µs: least squares once the points span half a second, else 1 (the tick frequency
    /// already turned ticks into time); limited to ±1000 ppm, as a crystal is.
    public var slope: Double {
        guard points.count >= 8 else { return 1 }
        let n = Double(points.count)
        let mx = points.reduce(0) { $0 + $1.device } / n, my = points.reduce(0) { $0 + $1.local } / n
        var sxx = 0.0, sxy = 0.0
        for p in points {
            sxx += (p.device - mx) * (p.device - mx)
            sxy += (p.device - mx) * (p.local - my)
        }
        let span = (points.map { $0.device }.max() ?? 0) - (points.map { $0.device }.min() ?? 0)
        guard sxx > 0, span >= 500_000 else { return 1 }
        return min(max(sxy / sxx, 1 - 1e-3), 1 + 1e-3)
    }

    /// The local time (µs) of device time `deviceMicroseconds`, nil before the first frame.
    public func local(ofDevice deviceMicroseconds: Double) -> Double? {
        guard let origin, !points.isEmpty else { return nil }
        let b = slope
        let offset = points.map { $0.local - b * $0.device }.min()!
        return origin.local + offset + b * (deviceMicroseconds - origin.device)
    }

    /// The device clock's rate error against the node's, ppm (positive: the device clock runs slow).
    public var rateErrorPPM: Double { (slope - 1) * 1e6 }
}
