/// A shot of synchronized stills (CONTRACT §18), as arithmetic on the take's grid: which groups its shots are, how
/// many groups the cameras must run through to reach the last one, what each still is called and how many bytes
/// the shot takes. Pure: the shell records the span and keeps the shots' frames.
public struct SnapPlan: Equatable, Sendable {
    /// The image format a still is written in.
    public enum Format: String, CaseIterable, Sendable {
        case png, tiff, jpeg
        /// The file name's extension.
        public var fileExtension: String { self == .jpeg ? "jpg" : rawValue }
        /// Whether the still holds the frame's pixels exactly (JPEG does not).
        public var isLossless: Bool { self != .jpeg }
    }

    /// The size the stills are taken at: the take's (nil), one size for every camera, or each camera's largest.
    public enum Size: Equatable, Sendable {
        case exactly(width: Int, height: Int)
        case largest
    }

    /// How many shots; shot k is group `firstGroup + k × stride`.
    public let count: Int
    /// Groups between shots (1 for a single shot).
    public let stride: Int64
    /// The first shot's group, counted from the span's group 0.
    public let firstGroup: Int64
    public let format: Format
    public let size: Size?

    /// The most shots one command takes: a burst longer than this is a take.
    public static let mostShots = 1000

    /// Checks the operator's figures; the failure is one sentence naming the flag (`prefix` "": the console's field).
    public init(count: Int = 1, everyMilliseconds: Int? = nil, fps: Int, size: String? = nil, format: String = "png",
                firstGroup: Int64 = 0, prefix: String = "--") throws(SnapProblem) {
        guard (1...Self.mostShots).contains(count) else {
            throw SnapProblem("\(prefix)count must be between 1 and \(Self.mostShots) shots (got \(count)).")
        }
        guard let format = Format(rawValue: format.lowercased()) else {
            throw SnapProblem("\(prefix)format must be png, tiff or jpeg (got \"\(format)\").")
        }
        guard fps > 0 else { throw SnapProblem("the frame rate must be positive (got \(fps)).") }
        var stride: Int64 = 1
        if let every = everyMilliseconds {
            // A shot between two frames would not be a group: MS must be a whole number of frame periods.
            let frames = Int64(every) * Int64(fps)
            guard every > 0, frames % 1000 == 0 else {
                let period = 1000.0 / Double(fps)
                throw SnapProblem("\(prefix)every \(every) ms is not a whole number of frame periods at \(fps) fps (one frame is \(Self.text(period)) ms; try \(Self.nearestWhole(every, fps: fps)) ms).")
            }
            stride = frames / 1000
        }
        var parsed: Size?
        if let size {
            if size.lowercased() == "max" {
                parsed = .largest
            } else if let (w, h) = RigSpec.parseSize(size), w % 2 == 0, h % 2 == 0, w >= 104, h >= 64 {
                parsed = .exactly(width: w, height: h)
            } else {
                throw SnapProblem("\(prefix)size must be max or an even WxH from 104x64 to 16384x16384, e.g. 1920x1080 (got \(size)).")
            }
        }
        self.count = count
        self.stride = stride
        self.firstGroup = firstGroup
        self.format = format
        self.size = parsed
    }

    /// Every shot's group, in order.
    public var groups: [Int64] { (0..<Int64(count)).map { firstGroup + $0 * stride } }

    /// Groups the cameras must record for the last shot to be in: from group 0 through it.
    public var spanGroups: Int64 { firstGroup + Int64(count - 1) * stride + 1 }

    /// One group in this many is taken from each sensor while the span records: a divisor of the stride (every shot
    /// is a real frame) that runs the sensors at about 15 fps or more, so encoding the span costs less while the
    /// phase lock keeps enough frames to hold the grid (at 5 fps the stills' true spread doubled).
    public func recordEvery(fps: Int) -> Int {
        let slowest = max(1, fps / 15)
        guard count > 1 else { return slowest }
        return (1...slowest).last { stride % Int64($0) == 0 } ?? 1
    }

    /// The first shot's group for a cold shot: about half a second into the span, on a group every sensor delivers,
    /// so the phase lock has run on the take's grid before the shot (group 0 was the worst-synchronized shot).
    public static func settledFirstGroup(fps: Int, count: Int = 1, everyMilliseconds: Int? = nil) -> Int64 {
        guard let probe = try? SnapPlan(count: count, everyMilliseconds: everyMilliseconds, fps: fps) else { return 0 }
        let every = Int64(probe.recordEvery(fps: fps))
        return (Int64(fps / 2) + every - 1) / every * every
    }

    /// Which shot (0-based) `group` is, or nil when no shot falls on it.
    public func shot(ofGroup group: Int64) -> Int? {
        guard group >= firstGroup, (group - firstGroup) % stride == 0 else { return nil }
        let k = (group - firstGroup) / stride
        return k < Int64(count) ? Int(k) : nil
    }

    /// `<node>/<camera>[_<n>].<ext>`: the shot's number only in a burst.
    public func path(node: String, camera: String, shot: Int) -> String {
        "\(node)/\(camera)\(count > 1 ? "_\(shot)" : "").\(format.fileExtension)"
    }

    /// The most one still of `width`×`height` takes on disk: 8-bit RGB uncompressed plus the container's headers (a
    /// PNG or TIFF of noise does not compress; a JPEG is far smaller).
    public func stillBytes(width: Int, height: Int) -> Int64 {
        let raw = Int64(width) * Int64(height) * 3
        return format == .jpeg ? raw / 4 + 4096 : raw + raw / 100 + 4096
    }

    /// The whole shot's bytes across `cameras` (each camera's size): what collection brings home.
    public func shotBytes(sizes: [(width: Int, height: Int)]) -> Int64 {
        sizes.map { stillBytes(width: $0.width, height: $0.height) }.reduce(0, +) * Int64(count)
    }

    private static func text(_ v: Double) -> String {
        let rounded = (v * 1000).rounded() / 1000
        return rounded == rounded.rounded() ? String(Int(rounded)) : String(rounded)
    }

    /// The nearest whole number of frames to `every` ms, in ms (at least one frame; whole ms only when it is).
    private static func nearestWhole(_ every: Int, fps: Int) -> String {
        let frames = max(1, (Double(every) * Double(fps) / 1000).rounded())
        return text(frames * 1000 / Double(fps))
    }
}

/// A shot's figures that cannot be taken, as one sentence for the operator.
public struct SnapProblem: Error, Equatable, Sendable, CustomStringConvertible {
    public let sentence: String
    public init(_ sentence: String) { self.sentence = sentence }
    public var description: String { sentence }
}

/// One still of a shot, as the manifest's `stills` list holds it (CONTRACT §18).
public struct StillRecord: Codable, Equatable, Sendable {
    public var node: String
    public var camera: String
    public var shot: Int
    public var group: Int64
    public var centerMicroseconds: Int64
    public var width: Int
    public var height: Int
    public var path: String
    public var bytes: UInt64
    public var xxh128: String
    /// A console Snap's still taken through a mode switch (its camera restarted at the still's size): not from the
    /// preview's exposure timing, and its phase error (centre less the group's instant) as measured. nil otherwise.
    public var modeSwitch: Bool?
    public var phaseErrorMicroseconds: Int64?
    enum CodingKeys: String, CodingKey {
        case node, camera, shot, group, centerMicroseconds = "center_us", width, height, path, bytes, xxh128
        case modeSwitch = "mode_switch", phaseErrorMicroseconds = "phase_error_us"
    }
    public init(node: String, camera: String, shot: Int, group: Int64, centerMicroseconds: Int64, width: Int, height: Int,
                path: String, bytes: UInt64, xxh128: String) {
        self.node = node; self.camera = camera; self.shot = shot; self.group = group
        self.centerMicroseconds = centerMicroseconds; self.width = width; self.height = height
        self.path = path; self.bytes = bytes; self.xxh128 = xxh128
    }
}
