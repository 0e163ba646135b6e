import CoordCore
import Foundation
import Platform
import V4L2

/// uvcvideo's module parameters as sysfs shows them: the thin shell of `BufferStampChoice` (issue 36).
public enum UVCParameters {
    public static let hwTimestampsPath = "/sys/module/uvcvideo/parameters/hwtimestamps"

    /// `hwtimestamps` (uvcvideo reads it at every frame, so it can change under a streaming camera; the node reads
    /// it as the camera opens); nil when uvcvideo is not loaded, 0 (its default) when loaded but unreadable.
    public static func hwTimestamps(path: String = hwTimestampsPath) -> Int? {
        guard FileManager.default.fileExists(atPath: "/sys/module/uvcvideo") else { return nil }
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return 0 }
        // Y/N on kernels that made it a bool; a number on 6.1.
        switch text.trimmingCharacters(in: .whitespacesAndNewlines) {
        case "Y", "y": return 1
        case "N", "n": return 0
        case let t: return Int(t) ?? 0
        }
    }
}

extension V4L2Camera {
    public var stampChoice: BufferStampChoice? { bufferStamp }

    /// The stamp a camera of `driver` is read by, decided as it opens (its buffers, not yet streaming, are taken
    /// as CLOCK_MONOTONIC; a frame that says otherwise is taken at its arrival, `stamped`).
    static func chooseStamp(driver: String, periodMicroseconds: Double) -> BufferStampChoice {
        BufferStampChoice.choose(driver: driver, hwTimestamps: driver == "uvcvideo" ? UVCParameters.hwTimestamps() : nil,
                                 monotonic: true, marks: nil, periodMicroseconds: periodMicroseconds)
    }

    /// A frame's stamp on the node's clock and what it marks: the driver's, unless it is on another clock or (a
    /// device-clock stamp) later than the frame's arrival, when the arrival stands in for its end of frame.
    func stamped(_ frame: V4L2Frame) -> (local: Int64, meaning: TimestampMeaning) {
        let arrival = MonotonicClock.now()
        guard frame.timestampIsMonotonic,
              bufferStamp.trusts(stampMicroseconds: frame.timestampUs, arrivalMicroseconds: arrival) else {
            return (localClock(arrival), .endOfFrame(readoutMicroseconds: assumedReadoutMicroseconds))
        }
        return (localClock(frame.timestampUs), meaning(of: frame.timestampSource))
    }
}
