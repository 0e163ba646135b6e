/// What a node has to spend on a take: its buses, its calibrated disk and encoder, free disk, CPUs and
/// thermal zones, as it reports them in the handshake. The cost model (`Budget`) weighs a plan against it.
public struct NodeResources: Equatable, Sendable {
    /// Buses the node's cameras sit on (a USB root hub, a CSI link); a camera names its bus by `id`.
    public var buses: [Bus]
    /// Measured once by `coord-node calibrate`; nil when the node was never calibrated.
    public var calibration: Calibration?
    /// Free bytes on the filesystem holding the staging directory (what an unprivileged writer may use).
    public var freeDiskBytes: UInt64
    public var diskTotalBytes: UInt64
    /// Identifies the staging filesystem across nodes: nodes on one host writing to one disk share it.
    public var diskID: String
    public var cpuCount: Int
    /// 1-minute load average divided by the CPU count (1.0 = every CPU busy).
    public var cpuLoad: Double
    public var thermalZones: [ThermalZone]
    /// Identifies the machine and its boot: nodes reporting the same id share CPUs (the demo's nodes do).
    public var hostID: String

    public init(buses: [Bus] = [], calibration: Calibration? = nil, freeDiskBytes: UInt64 = 0, diskTotalBytes: UInt64 = 0,
                diskID: String = "", cpuCount: Int = 1, cpuLoad: Double = 0, thermalZones: [ThermalZone] = [], hostID: String = "") {
        self.buses = buses; self.calibration = calibration; self.freeDiskBytes = freeDiskBytes; self.diskTotalBytes = diskTotalBytes
        self.diskID = diskID; self.cpuCount = cpuCount; self.cpuLoad = cpuLoad; self.thermalZones = thermalZones; self.hostID = hostID
    }
}

/// A bus several cameras may share: its usable bandwidth is what their streams together may not exceed.
public struct Bus: Equatable, Sendable {
    /// `usb3` (USB bus number 3), `csi0`, or a synthetic camera's declared bus.
    public var id: String
    /// `usb2`, `usb3`, `csi`, `synthetic`: what kind of link, for the operator.
    public var kind: String
    /// Usable bytes per second for camera streams (for USB: the periodic share of the link rate).
    public var bandwidthBytesPerSecond: Double

    public init(id: String, kind: String, bandwidthBytesPerSecond: Double) {
        self.id = id; self.kind = kind; self.bandwidthBytesPerSecond = bandwidthBytesPerSecond
    }

    /// USB reserves at most 80 % of a high-speed-or-faster link for periodic (isochronous) transfers; a
    /// camera's stream also pays packet overhead, so the usable share is taken as 80 % of the link rate.
    public static func usb(number: Int, megabitsPerSecond: Double) -> Bus {
        let kind = megabitsPerSecond >= 5000 ? "usb3" : megabitsPerSecond >= 480 ? "usb2" : "usb1"
        return Bus(id: "usb\(number)", kind: kind, bandwidthBytesPerSecond: megabitsPerSecond * 1e6 / 8 * 0.8)
    }
}

/// Capacities measured on the node by `coord-node calibrate` and stored as JSON next to its staging area.
public struct Calibration: Codable, Equatable, Sendable {
    public static let formatV1 = "coord.calibration/1"

    public var format: String = Calibration.formatV1
    /// Sustained write rate to the staging filesystem, synced to the device (bytes/s).
    public var diskWriteBytesPerSecond: Double
    /// Per codec ("mjpeg", "ffv1", "h264"): pixels/s the node encodes with every CPU busy, and the bytes each
    /// pixel costs on disk (measured on the synthetic test pattern).
    public var encode: [String: CodecRate]
    /// How fast the hottest thermal zone rose while every CPU encoded (°C/s); nil without thermal zones.
    public var heatingCelsiusPerSecond: Double?
    public var cpuCount: Int
    /// RFC 3339 time of the measurement.
    public var measuredAt: String

    public struct CodecRate: Codable, Equatable, Sendable {
        public var pixelsPerSecond: Double
        public var bytesPerPixel: Double
        public init(pixelsPerSecond: Double, bytesPerPixel: Double) {
            self.pixelsPerSecond = pixelsPerSecond; self.bytesPerPixel = bytesPerPixel
        }
        enum CodingKeys: String, CodingKey { case pixelsPerSecond = "pixels_per_s", bytesPerPixel = "bytes_per_pixel" }
    }

    enum CodingKeys: String, CodingKey {
        case format, diskWriteBytesPerSecond = "disk_write_bytes_per_s", encode
        case heatingCelsiusPerSecond = "heating_c_per_s", cpuCount = "cpu_count", measuredAt = "measured_at"
    }

    public init(diskWriteBytesPerSecond: Double, encode: [String: CodecRate], heatingCelsiusPerSecond: Double? = nil,
                cpuCount: Int, measuredAt: String) {
        self.diskWriteBytesPerSecond = diskWriteBytesPerSecond; self.encode = encode
        self.heatingCelsiusPerSecond = heatingCelsiusPerSecond; self.cpuCount = cpuCount; self.measuredAt = measuredAt
    }
}

/// One thermal zone as the kernel reports it (`/sys/class/thermal/thermal_zoneN`).
public struct ThermalZone: Equatable, Sendable {
    /// The zone's `type`, e.g. `cpu-thermal`, `x86_pkg_temp`.
    public var name: String
    public var celsius: Double
    /// The lowest `passive` trip point (the kernel starts throttling), if the zone has one.
    public var passiveCelsius: Double?
    /// The `critical` trip point (the kernel shuts the machine down), if the zone has one.
    public var criticalCelsius: Double?

    public init(name: String, celsius: Double, passiveCelsius: Double? = nil, criticalCelsius: Double? = nil) {
        self.name = name; self.celsius = celsius; self.passiveCelsius = passiveCelsius; self.criticalCelsius = criticalCelsius
    }
}

/// How many bytes one pixel of a camera's raw stream takes on its bus.
public enum PixelFormats {
    public static func bytesPerPixel(_ pixelFormat: String) -> Double {
        if let genicam = genicamBytesPerPixel(pixelFormat) { return genicam }
        switch pixelFormat.lowercased() {
        case "yuyv", "yuyv422", "uyvy", "uyvy422", "yuv422p", "nv16", "rgb565": return 2
        case "yuv420p", "nv12", "nv21", "yu12", "yv12", "i420": return 1.5
        case "rgb24", "bgr24": return 3
        case "grey", "gray", "y8": return 1
        // A compressed stream: a UVC camera's MJPEG at high quality runs near 0.5 bytes per pixel.
        case "mjpeg", "mjpg", "jpeg": return 0.5
        default: return 2
        }
    }
}
