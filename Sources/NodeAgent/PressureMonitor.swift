import CoordCore
import Foundation

/// Samples the node's pressure factors (thermal zones, the staging disk, CPU load, frames the cameras could
/// not deliver) and judges them with `PressureGauge`. Called from the node's tick; not thread-safe on its own.
final class PressureMonitor {
    struct Counters {
        var bytesWritten: UInt64
        var frames: Int64
        var dropped: Int64
    }

    private struct Sample {
        var at: Int64
        var free: Double
        var counters: Counters
    }

    let probe: HostProbe
    let staging: URL
    /// Rates are judged over this span (µs): long enough to smooth the encoder's bursts.
    private let window: Int64 = 5_000_000
    private var samples: [Sample] = []
    private(set) var reading = PressureReading.nominal
    private(set) var resources = NodeResources()
    /// The staging disk's write rate as last measured (bytes/s): the node's own files, or faster if something
    /// else fills the disk too.
    private(set) var writeBytesPerSecond: Double = 0

    init(probe: HostProbe, staging: URL) {
        self.probe = probe
        self.staging = staging
    }

    /// Takes one sample at `now` (monotonic µs) and returns the node's pressure.
    @discardableResult
    func sample(now: Int64, counters: Counters, calibration: Calibration?, buses: [Bus]) -> PressureReading {
        resources = probe.resources(staging: staging, calibration: calibration, buses: buses)
        let free = Double(resources.freeDiskBytes)
        // A counter that went back (a new take) starts the window over.
        if let last = samples.last, counters.bytesWritten < last.counters.bytesWritten || counters.frames < last.counters.frames {
            samples.removeAll()
        }
        samples.append(Sample(at: now, free: free, counters: counters))
        while let first = samples.first, now - first.at > window, samples.count > 2 { samples.removeFirst() }

        var dropped = 0.0
        writeBytesPerSecond = 0
        if let first = samples.first, now > first.at {
            let seconds = Double(now - first.at) / 1e6
            let own = Double(counters.bytesWritten - first.counters.bytesWritten) / seconds
            let fill = (first.free - free) / seconds
            writeBytesPerSecond = max(own, fill, 0)
            let frames = counters.frames - first.counters.frames
            if frames > 0 { dropped = Double(counters.dropped - first.counters.dropped) / Double(frames) }
        }
        reading = PressureGauge.combine([
            PressureGauge.thermal(resources.thermalZones),
            PressureGauge.disk(freeBytes: free, writeBytesPerSecond: writeBytesPerSecond),
            PressureGauge.cpu(load: resources.cpuLoad, droppedFraction: dropped),
        ])
        return reading
    }
}
