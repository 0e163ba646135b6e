/// How large and how often a camera's preview tiles are (the coordinator sets them; width 0: no preview).
public struct PreviewSettings: Equatable, Sendable {
    public var width: Int
    public var fps: Int
    public static let off = PreviewSettings(width: 0, fps: 0)
    /// About 480 px wide at 5 fps, as the console asks by default.
    public static let standard = PreviewSettings(width: 480, fps: 5)
    public static let widths = 64...1920
    public static let rates = 1...15

    public init(width: Int, fps: Int) { self.width = width; self.fps = fps }

    public var isOn: Bool { width > 0 && fps > 0 }

    /// One sentence naming what is out of range, or nil.
    public var problem: String? {
        if !Self.widths.contains(width) || width % 2 != 0 { return "a preview's width \(width) must be even and within \(Self.widths.lowerBound)…\(Self.widths.upperBound) px." }
        if !Self.rates.contains(fps) { return "a preview's rate \(fps) must be within \(Self.rates.lowerBound)…\(Self.rates.upperBound) tiles a second." }
        return nil
    }

    /// The tile size for a camera of `width`×`height`: never wider than the camera, the height following its
    /// aspect, both even.
    public func tileSize(width cameraWidth: Int, height cameraHeight: Int) -> (width: Int, height: Int) {
        guard cameraWidth > 0, cameraHeight > 0, width > 0 else { return (0, 0) }
        let w = max(2, min(width, cameraWidth) & ~1)
        let h = max(2, Int((Double(cameraHeight) * Double(w) / Double(cameraWidth)).rounded()) & ~1)
        return (w, h)
    }

    /// Tiles are taken from every `stride`-th group of the grid, the same groups on every camera, so the tiles
    /// of one set exist at all: a camera picking its own frames by time would almost never match another's.
    public func groupStride(framePeriodMicroseconds: Int64) -> Int64 {
        guard fps > 0, framePeriodMicroseconds > 0 else { return 1 }
        let gridRate = 1_000_000 / Double(framePeriodMicroseconds)
        return max(1, Int64((gridRate / Double(fps)).rounded()))
    }
}

/// One camera of the rig, as the multiview names it.
public struct CameraKey: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var node: String
    public var camera: String
    public init(node: String, camera: String) { self.node = node; self.camera = camera }
    public var description: String { "\(node)/\(camera)" }
    public static func < (a: CameraKey, b: CameraKey) -> Bool { (a.node, a.camera) < (b.node, b.camera) }
}

/// One preview tile as the coordinator received it (its JPEG is kept elsewhere, by key and group).
public struct PreviewTile: Equatable, Sendable {
    public var key: CameraKey
    public var group: Int64
    /// The frame's exposure centre, rig timebase (µs).
    public var centerMicroseconds: Int64
    /// The frame centre's distance from its group's grid instant (µs).
    public var phaseErrorMicroseconds: Int64
    public var dropped: Int64
    public var width: Int
    public var height: Int
    public init(key: CameraKey, group: Int64, centerMicroseconds: Int64, phaseErrorMicroseconds: Int64, dropped: Int64,
                width: Int, height: Int) {
        self.key = key; self.group = group; self.centerMicroseconds = centerMicroseconds
        self.phaseErrorMicroseconds = phaseErrorMicroseconds; self.dropped = dropped; self.width = width; self.height = height
    }
}

/// Every camera's tile for one group, like AVCaptureDataOutputSynchronizer's collection: a camera without a
/// frame of this group is missing (nil), never filled with another group's frame.
public struct MultiviewSet: Equatable, Sendable {
    public var group: Int64
    /// One entry per camera of the rig, in the rig's order.
    public var tiles: [(key: CameraKey, tile: PreviewTile?)]
    public var complete: Bool { tiles.allSatisfy { $0.tile != nil } }
    /// The mean exposure centre of the tiles present (µs, rig timebase).
    public var centerMicroseconds: Int64 {
        let centers = tiles.compactMap { $0.tile?.centerMicroseconds }
        guard !centers.isEmpty else { return 0 }
        return centers.reduce(0) { $0 + ($1 - centers[0]) } / Int64(centers.count) + centers[0]
    }
    public static func == (a: MultiviewSet, b: MultiviewSet) -> Bool {
        a.group == b.group && a.tiles.map(\.key) == b.tiles.map(\.key) && a.tiles.map(\.tile) == b.tiles.map(\.tile)
    }
}

/// Builds frame-matched sets from tiles arriving in any order from any node: a set is shown once every camera's
/// tile of its group is in; a group still incomplete once tiles `patienceGroups` newer have arrived is shown
/// with its missing cameras marked. Sets only move forward: a tile older than the last set shown is late.
public struct MultiviewAssembler: Sendable {
    public private(set) var cameras: [CameraKey]
    public var patienceGroups: Int64
    /// Groups with at least one tile, not yet shown.
    private var pending: [Int64: [CameraKey: PreviewTile]] = [:]
    public private(set) var lastShown: Int64?
    public private(set) var lateTiles = 0
    /// Tiles refused because their exposure centre lay in the future of the rig's clock: a frame cannot be from
    /// the future, and one such tile's group, taken as the newest, would show every later set incomplete until the
    /// grid reached it (hours, for a wild stamp).
    public private(set) var futureTiles = 0
    /// How far ahead of the rig's clock a tile's centre may be (the clock mappings' error, a frame's half period).
    public static let futureSlackMicroseconds: Int64 = 1_000_000
    static let maxPending = 64

    public init(cameras: [CameraKey], patienceGroups: Int64) {
        self.cameras = cameras
        self.patienceGroups = max(1, patienceGroups)
    }

    /// A different rig (cameras added or gone) starts afresh.
    public mutating func reset(cameras: [CameraKey], patienceGroups: Int64) {
        self = MultiviewAssembler(cameras: cameras, patienceGroups: patienceGroups)
    }

    /// A take's grid starts its groups from 0 again: everything pending belongs to the old grid.
    public mutating func restartGroups() {
        pending = [:]
        lastShown = nil
    }

    /// Takes one tile arriving at `rigNow` (rig timebase, µs; nil: not checked); returns the sets it makes ready,
    /// oldest first.
    public mutating func add(_ tile: PreviewTile, rigNow: Int64? = nil) -> [MultiviewSet] {
        guard cameras.contains(tile.key) else { return [] }
        if let rigNow, tile.centerMicroseconds > rigNow &+ Self.futureSlackMicroseconds {
            futureTiles += 1
            return []
        }
        if let lastShown, tile.group <= lastShown {
            lateTiles += 1
            return []
        }
        pending[tile.group, default: [:]][tile.key] = tile
        var ready: [MultiviewSet] = []
        if pending[tile.group]!.count == cameras.count {
            // Anything older can no longer be shown after this one.
            ready.append(set(of: tile.group))
            pending = pending.filter { $0.key > tile.group }
            lastShown = tile.group
        }
        // Groups that waited long enough for their missing cameras are shown as they are.
        let newest = pending.keys.max() ?? tile.group
        for group in pending.keys.sorted() where group + patienceGroups <= newest {
            ready.append(set(of: group))
            pending[group] = nil
            lastShown = group
        }
        while pending.count > Self.maxPending, let oldest = pending.keys.min() { pending[oldest] = nil }
        return ready.sorted { $0.group < $1.group }
    }

    private func set(of group: Int64) -> MultiviewSet {
        let tiles = pending[group] ?? [:]
        return MultiviewSet(group: group, tiles: cameras.map { ($0, tiles[$0]) })
    }
}
