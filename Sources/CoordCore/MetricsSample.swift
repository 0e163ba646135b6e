/// What a node's Prometheus metrics are made from, read at each scrape (CONTRACT §7): its cameras' take
/// counters, its clock, pressure and disk, and its life totals. The node fills it from its own state; `coord
/// console` fills what the node's status tells (nil where it does not).
public struct NodeMetricsSample: Sendable, Equatable {
    public struct Camera: Sendable, Equatable {
        public var camera: String
        /// The take these counts belong to: counts restart with each take, the exported totals do not.
        public var takeID: String
        public var frames: UInt64
        /// Groups filled with a repeated frame, and frames the sensor lost.
        public var dups: UInt64
        public var drops: UInt64
        public var bytesWritten: UInt64
        /// The newest frame's centre minus its grid instant (µs); nil before the first frame.
        public var phaseErrorMicroseconds: Double?

        public init(camera: String, takeID: String, frames: UInt64 = 0, dups: UInt64 = 0, drops: UInt64 = 0,
                    bytesWritten: UInt64 = 0, phaseErrorMicroseconds: Double? = nil) {
            self.camera = camera; self.takeID = takeID; self.frames = frames; self.dups = dups; self.drops = drops
            self.bytesWritten = bytesWritten; self.phaseErrorMicroseconds = phaseErrorMicroseconds
        }
    }

    public var node: String
    public var reachable = true
    /// nil: not recording (no take's cameras).
    public var cameras: [Camera] = []
    public var recording = false
    public var clockUncertaintyMicroseconds: Double?
    public var pressure: PressureLevel?
    public var freeDiskBytes: UInt64?
    /// Life totals of the node process.
    public var takesRecorded: UInt64?
    public var bytesServed: UInt64?

    public init(node: String) { self.node = node }
}
