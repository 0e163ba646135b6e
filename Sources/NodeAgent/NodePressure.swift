import CoordCore
import Foundation
import Platform

/// The node's pressure: sampled every half second on `pressureQueue` (the monitor is only touched there) and
/// judged by the take, which says a change as an event and, at shutdown level, stops every recorder a few groups
/// ahead so the files are finalized while the disk still has room.
extension NodeAgent {
    func samplePressure() {
        let now = MonotonicClock.now()
        let due = pressureRoom.withLock { s -> Bool in
            guard now - s.lastSample >= 500_000 else { return false }
            s.lastSample = now
            return true
        }
        guard due else { return }
        let counters = takeRoom.withLock { s in
            let progress = s.recorders.cameras.map(\.snapshot)
            return PressureMonitor.Counters(bytesWritten: progress.map(\.bytesWritten).reduce(0, +),
                                            frames: progress.map(\.frames).reduce(0, +),
                                            dropped: progress.map(\.dropped).reduce(0, +))
        }
        let buses = buses
        let (reading, resources) = monitor.withLock { monitor in
            (monitor.sample(now: now, counters: counters, calibration: nil, buses: buses), monitor.resources)
        }
        pressureRoom.withLock { $0.resources = resources }
        report(.pressure(reading, localNow: localNow()))
    }
}
