/// Which instant a V4L2 camera's frame centres are computed from, and how far the node trusts it (issue 36).
///
/// uvcvideo stamps a buffer in one of two ways, by its `hwtimestamps` module parameter: 0 (Debian's default) gives
/// the host's time when the frame's first USB packet completed, after the exposure ended and behind whatever the
/// camera and the bus held it; 1 gives the device's own start-of-exposure PTS, put on CLOCK_MONOTONIC by uvcvideo's
/// clock recovery from the device's SCR. Both are flagged `TSTAMP_SRC_SOE`, so the flags alone cannot tell them
/// apart. The node's own arrival stamp (when it dequeued the buffer) is later than either by the frame's transfer,
/// so it is used only when the driver's stamp is on another clock. The first-packet stamp's lateness cannot be
/// measured from the host; the node does not move its centres by a guess, it states the most it believes and
/// widens the camera's centre uncertainty so the sync report's bound (±2σ) covers it.
public struct BufferStampChoice: Codable, Equatable, Sendable {
    public enum Stamp: String, Codable, Sendable {
        /// uvcvideo, hwtimestamps=1: the device's start-of-exposure clock through uvcvideo's clock recovery.
        case deviceClock = "device-clock"
        /// uvcvideo, hwtimestamps=0: the host's time at the frame's first USB packet, after its exposure.
        case firstPacket = "first-packet"
        /// Another driver's stamp, meaning what its TSTAMP_SRC flag says.
        case driver
        /// The time the node dequeued the buffer (the driver's stamp is not CLOCK_MONOTONIC).
        case arrival
    }

    /// What the stamp marks, so the centre is `t + exposure/2` (start of exposure), `t − exposure/2` (end of
    /// exposure) or `t − readout − exposure/2` (end of frame, readout assumed by the camera).
    public enum Marks: String, Codable, Sendable {
        case startOfExposure, endOfExposure, endOfFrame
    }

    /// Figures measured through the real driver in the lab (bench/vmlab_usb.py): first-packet stamps up to +211.6 ms
    /// late by the old reading (bench/results/vmlab-usb-stamps.json, README "vmlab-usb-stamps"), and up to +334 ms
    /// against the lab's clock truth at load 9-13 (docs/vmlab.md "true phase"), taken as 500 ms;
    /// device-clock p99 1–4 ms in quiet runs (vmlab-usb.json, LAB-PROBE), taken as 2 ms. TCG figures, not hardware's.
    public struct Figures: Equatable, Sendable {
        /// The largest lateness of first-packet centres seen against the stripes' truth (µs).
        public var firstPacketLateMax: Double
        /// The 99th percentile of |device-clock centre − truth| (µs).
        public var deviceClockP99: Double
        public init(firstPacketLateMax: Double, deviceClockP99: Double) {
            self.firstPacketLateMax = firstPacketLateMax; self.deviceClockP99 = deviceClockP99
        }
        /// Gadget webcams through uvcvideo on the lab's dummy_hcd under TCG, a loaded host (issue 36's runs).
        public static let lab = Figures(firstPacketLateMax: 500_000, deviceClockP99: 2_000)
    }

    public var stamp: Stamp
    public var marks: Marks
    /// The most the node believes its centres are late by this stamp (µs); the centres are not moved by it.
    public var lateMicroseconds: Double
    /// One sigma the stamp adds to the camera's centre uncertainty (µs): the report's ±2σ covers `late`.
    public var uncertaintyMicroseconds: Double
    /// uvcvideo's `hwtimestamps` as the node read it (nil: not a uvcvideo camera, or unreadable).
    public var hwTimestamps: Int?

    public init(stamp: Stamp, marks: Marks, lateMicroseconds: Double, uncertaintyMicroseconds: Double, hwTimestamps: Int? = nil) {
        self.stamp = stamp; self.marks = marks; self.lateMicroseconds = lateMicroseconds
        self.uncertaintyMicroseconds = uncertaintyMicroseconds; self.hwTimestamps = hwTimestamps
    }

    enum CodingKeys: String, CodingKey {
        case stamp, marks, lateMicroseconds = "late_us", uncertaintyMicroseconds = "uncertainty_us", hwTimestamps = "hwtimestamps"
    }

    /// The choice for a camera of `driver` whose buffers are flagged `monotonic` and `marks` (nil: a source the
    /// flags do not name), with uvcvideo's `hwTimestamps` as read (nil: uvcvideo is not loaded on this box, so the
    /// device only says it is uvcvideo, as a scripted one does: its flags are taken as they are).
    public static func choose(driver: String, hwTimestamps: Int?, monotonic: Bool, marks: Marks?, periodMicroseconds: Double,
                              figures: Figures = .lab) -> BufferStampChoice {
        let uvc = driver == "uvcvideo"
        let firstPacketLate = max(figures.firstPacketLateMax, 2 * periodMicroseconds)
        guard monotonic else {
            // Dequeued after the whole frame arrived: later than the first packet by up to a frame's transfer.
            let late = firstPacketLate + periodMicroseconds
            return BufferStampChoice(stamp: .arrival, marks: .endOfFrame, lateMicroseconds: late, uncertaintyMicroseconds: late / 2,
                                     hwTimestamps: uvc ? hwTimestamps : nil)
        }
        guard uvc, let hwTimestamps else {
            return BufferStampChoice(stamp: .driver, marks: marks ?? .endOfFrame, lateMicroseconds: 0, uncertaintyMicroseconds: 0)
        }
        if hwTimestamps != 0 {
            return BufferStampChoice(stamp: .deviceClock, marks: .startOfExposure, lateMicroseconds: 0,
                                     uncertaintyMicroseconds: figures.deviceClockP99 / 2, hwTimestamps: hwTimestamps)
        }
        // The first packet leaves after the exposure ends: the centre is at least half an exposure before it.
        return BufferStampChoice(stamp: .firstPacket, marks: .endOfExposure, lateMicroseconds: firstPacketLate,
                                 uncertaintyMicroseconds: firstPacketLate / 2, hwTimestamps: hwTimestamps)
    }

    /// A device-clock stamp after the buffer reached the node is impossible (uvcvideo's clock recovery jumped):
    /// that frame is taken at its arrival instead.
    public func trusts(stampMicroseconds: Int64, arrivalMicroseconds: Int64) -> Bool {
        stamp != .deviceClock || stampMicroseconds <= arrivalMicroseconds
    }

    /// The arm warning's sentence for camera `node/camera`, or nil when the driver's stamp is taken as it is.
    public func warning(node: String, camera: String) -> String? {
        let ms = { (us: Double) in String(format: "%.1f ms", us / 1000) }
        switch stamp {
        case .driver: return nil
        case .deviceClock:
            return "camera \(node)/\(camera) is stamped by its own clock (uvcvideo hwtimestamps=\(hwTimestamps ?? 1)): its centres are believed late by 0 ms, within \(ms(2 * uncertaintyMicroseconds)) (the lab's p99), and a stamp later than its frame's arrival is replaced by the arrival."
        case .firstPacket:
            return "camera \(node)/\(camera) is stamped when its first USB packet arrives (uvcvideo hwtimestamps=\(hwTimestamps ?? 0)): its centres may be up to \(ms(lateMicroseconds)) late and its centre uncertainty is widened to \(ms(uncertaintyMicroseconds)) so the sync report's bound holds; load uvcvideo with hwtimestamps=1 for the camera's own clock (docs/node-guide.md)."
        case .arrival:
            return "camera \(node)/\(camera) stamps its buffers on another clock: the node takes each frame at its arrival, up to \(ms(lateMicroseconds)) late, and widens its centre uncertainty to \(ms(uncertaintyMicroseconds))."
        }
    }
}
