/// A console Snap at a size other than the one a camera previews at (issue 39 item 2): that camera's node ends its
/// stream, opens the camera in the still's mode, restarts it on the grid (its start alignment and phase lock), keeps
/// the shot's frames and goes back to the preview's mode. Pure: which cameras switch, at what rate, how far ahead the
/// shot's first group must lie for the slowest restart, and that group.
public enum StillModeSwitch {
    /// One camera as the console previews it, and what it offers.
    public struct Camera: Sendable {
        public var node: String
        public var settings: CameraSettings
        public var capabilities: CameraCapabilities
        public init(node: String, settings: CameraSettings, capabilities: CameraCapabilities) {
            self.node = node; self.settings = settings; self.capabilities = capabilities
        }
    }

    /// A camera that switches for the shot: the still's size and the one group in `recordEvery` its sensor runs at.
    public struct Switch: Equatable, Sendable {
        public var node: String
        public var camera: String
        public var source: String
        public var width: Int
        public var height: Int
        public var recordEvery: Int
        /// The preview's size it comes from (and goes back to).
        public var fromWidth: Int
        public var fromHeight: Int
        public var mode: Mode { Mode(camera: camera, width: width, height: height, recordEvery: recordEvery) }
        public init(node: String, camera: String, source: String, width: Int, height: Int, recordEvery: Int, fromWidth: Int, fromHeight: Int) {
            self.node = node; self.camera = camera; self.source = source; self.width = width; self.height = height
            self.recordEvery = recordEvery; self.fromWidth = fromWidth; self.fromHeight = fromHeight
        }
    }

    /// One camera's mode for a shot's stills, as KeepStills carries it to its node.
    public struct Mode: Equatable, Sendable {
        public var camera: String
        public var width: Int
        public var height: Int
        public var recordEvery: Int
        public init(camera: String, width: Int, height: Int, recordEvery: Int) {
            self.camera = camera; self.width = width; self.height = height; self.recordEvery = recordEvery
        }
    }

    /// What ending a camera's stream and starting it again in another mode costs before its first frame on the
    /// grid, by camera kind (µs). Synthetic: the sensor is rebuilt at once, and the node's loaded control lane
    /// takes the rest (measured 20-60 ms on this 2-core machine, doubled and more for a busy box). V4L2:
    /// STREAMOFF, S_FMT, REQBUFS and STREAMON take 100-300 ms on a UVC camera and its first frames can come late;
    /// libcamera reconfigures its pipeline (about a second); GenICam reprograms the ROI and restarts acquisition.
    public static func restartMicroseconds(source: String) -> Int64 {
        switch source {
        case "synthetic": 250_000
        case "v4l2": 800_000
        case "libcamera": 1_500_000
        case "genicam": 1_000_000
        default: 1_500_000
        }
    }

    /// Pixels a second a switched camera's sensor is held to while it runs for the shot: the node renders or
    /// converts and copies every frame it delivers, on cores the other cameras share.
    public static let pixelRateLimit = 60_000_000

    /// The still's size for `camera` under `size` (nil: the preview's), or a sentence naming why it has none.
    public static func stillSize(of camera: Camera, size: SnapPlan.Size?, fps: Int) -> Result<(width: Int, height: Int), SnapProblem> {
        let s = camera.settings
        switch size {
        case nil:
            return .success((s.width, s.height))
        case .largest:
            guard let largest = largestSize(of: camera.capabilities, fps: fps) else {
                return .failure(SnapProblem("camera \(camera.node)/\(s.camera) offers no size at \(fps) fps or slower."))
            }
            return .success(largest)
        case .exactly(let w, let h):
            guard camera.capabilities.formats.contains(where: { $0.offers(width: w, height: h) }) else {
                let sizes = Set(camera.capabilities.formats.map { "\($0.width)x\($0.height)" }).sorted()
                return .failure(SnapProblem("camera \(camera.node)/\(s.camera) has no \(w)x\(h) mode (it offers \(sizes.joined(separator: ", ")))."))
            }
            return .success((w, h))
        }
    }

    /// The largest size `capabilities` offers at `fps` or any slower whole fraction of it (by area; even).
    public static func largestSize(of capabilities: CameraCapabilities, fps: Int) -> (width: Int, height: Int)? {
        let period = FrameGrid.period(fps: max(fps, 1))
        return capabilities.formats
            .filter { $0.maxFramePeriodMicroseconds >= period }
            .map { (width: $0.width - $0.width % 2, height: $0.height - $0.height % 2) }
            .max { $0.width * $0.height < $1.width * $1.height }
    }

    /// Every camera whose still is at another size than its preview, with the rate it runs at for the shot;
    /// or the first camera that cannot give the size, as a sentence.
    public static func switches(_ cameras: [Camera], plan: SnapPlan, fps: Int) throws(SnapProblem) -> [Switch] {
        var out: [Switch] = []
        for camera in cameras.map(deliverable) {
            let s = camera.settings
            let size: (width: Int, height: Int)
            switch stillSize(of: camera, size: plan.size, fps: fps) {
            case .success(let found): size = found
            case .failure(let problem): throw problem
            }
            guard size.width != s.width || size.height != s.height else { continue }
            guard let every = recordEvery(for: camera.capabilities, width: size.width, height: size.height, fps: fps, plan: plan) else {
                throw SnapProblem("camera \(camera.node)/\(s.camera) offers \(size.width)x\(size.height) at no rate that keeps every shot of the burst on a frame.")
            }
            out.append(Switch(node: camera.node, camera: s.camera, source: camera.capabilities.source, width: size.width, height: size.height,
                              recordEvery: every, fromWidth: s.width, fromHeight: s.height))
        }
        return out
    }

    /// The camera with only the formats its stills can come in: a JPEG stream is kept only where the camera's
    /// codec is mjpeg (muxed as it is); any other codec needs the camera's raw pixels, and the node never decodes a
    /// JPEG (a C920 offers 1920x1080 as MJPG at 30 fps but as YUYV only at 5).
    public static func deliverable(_ camera: Camera) -> Camera {
        guard camera.settings.codec != .mjpeg else { return camera }
        var raw = camera
        raw.capabilities.formats.removeAll { jpegPixelFormats.contains($0.pixelFormat) }
        return raw
    }

    /// Motion-JPEG's fourccs as V4L2 drivers name it.
    public static let jpegPixelFormats: Set<String> = ["MJPG", "JPEG"]

    /// The one group in k a camera runs at in the still's mode: a rate a format of that size offers, every shot on
    /// one of its frames (k divides the burst's stride), and the fastest such under the pixel-rate limit (else the
    /// slowest such: the shots come first).
    public static func recordEvery(for capabilities: CameraCapabilities, width: Int, height: Int, fps: Int, plan: SnapPlan) -> Int? {
        let period = FrameGrid.period(fps: max(fps, 1))
        let formats = capabilities.formats.filter { $0.offers(width: width, height: height) }
        let fits = (1...max(fps, 1)).filter { k in
            (plan.count == 1 || plan.stride % Int64(k) == 0)
                && formats.contains { format in
                    // Within 500 ppm, as the V4L2 path opens an interval: 6 × 33 333 µs is a 5 fps mode's 200 000.
                    let p = Double(period * Int64(k)), slack = 5e-4 * p
                    return p + slack >= Double(format.minFramePeriodMicroseconds) && p - slack <= Double(format.maxFramePeriodMicroseconds)
                }
        }
        let pixels = width * height * max(fps, 1)
        return fits.first { pixels / $0 <= pixelRateLimit } ?? fits.last
    }

    /// Frames a restarted camera runs before the shot's: a synthetic sensor starts at a random phase and a V4L2 one
    /// where its driver starts it, and the phase lock steers it onto the grid over its first frames (with one
    /// frame of room, shots 2.5 frames after the restart missed their group under load; after 4 frames at 6 fps
    /// the stills were 46-69 µs off the grid, after 10 up to 33 µs, after 14 2-33 µs, by the stripes on loopback).
    public static let lockFrames = 14

    /// How far ahead of now the shot's first group must lie: the warm lead, and with any switch the slowest
    /// camera's restart plus `lockFrames` of its sensor periods in the still's mode.
    public static func lead(warm: Int64, switches: [Switch], periodMicroseconds: Int64) -> Int64 {
        let slowest = switches.map { restartMicroseconds(source: $0.source) + Int64(lockFrames) * periodMicroseconds * Int64($0.recordEvery) }.max() ?? 0
        return warm + slowest
    }

    /// The shot's first group: the first at least `lead` after `now` that every switched camera's sensor delivers
    /// (a multiple of each one's k: its sensor runs on groups `n·k`).
    public static func group(now: Int64, lead: Int64, grid: FrameGrid, switches: [Switch]) -> Int64 {
        var group = WarmSnap.group(now: now, lead: lead, grid: grid)
        let every = switches.map { Int64($0.recordEvery) }.reduce(1) { lcm($0, $1) }
        if group % every != 0 { group += every - ((group % every) + every) % every }
        return group
    }

    private static func lcm(_ a: Int64, _ b: Int64) -> Int64 {
        var (x, y) = (a, b)
        while y != 0 { (x, y) = (y, x % y) }
        return a / x * b
    }
}
