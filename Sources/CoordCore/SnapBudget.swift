/// A shot's bytes against the disks they land on (`coord plan --snap`): each node records the span losslessly on its
/// staging disk; the coordinator collects the span and writes the stills into the takes directory. Pure.
public struct SnapBudget: Equatable, Sendable {
    public struct Node: Equatable, Sendable {
        public var name: String
        public var freeDiskBytes: UInt64
        /// Each camera's still size.
        public var sizes: [(width: Int, height: Int)]
        /// FFV1's bytes per pixel as the node's calibration measured it; nil: not calibrated (raw 4:2:0 is assumed).
        public var ffv1BytesPerPixel: Double?
        public init(name: String, freeDiskBytes: UInt64, sizes: [(width: Int, height: Int)], ffv1BytesPerPixel: Double?) {
            self.name = name; self.freeDiskBytes = freeDiskBytes; self.sizes = sizes; self.ffv1BytesPerPixel = ffv1BytesPerPixel
        }
        public static func == (a: Node, b: Node) -> Bool {
            a.name == b.name && a.freeDiskBytes == b.freeDiskBytes && a.ffv1BytesPerPixel == b.ffv1BytesPerPixel
                && a.sizes.map { [$0.width, $0.height] } == b.sizes.map { [$0.width, $0.height] }
        }
    }

    public var lines: [String] = []
    /// Why the shot cannot be taken (exit 3), one sentence naming the disk; nil when it fits.
    public var refusal: String?

    /// `recordEvery`: one group in this many reaches the node's file as a new frame (the rest are repeats, a few bytes).
    public init(plan: SnapPlan, recordEvery: Int, nodes: [Node], takesDirectory: String, takesFreeBytes: UInt64?) {
        let frames = (plan.spanGroups + Int64(recordEvery) - 1) / Int64(max(recordEvery, 1))
        var collected: Int64 = 0
        var stills: Int64 = 0
        lines.append("the shot: \(plan.count) shot(s) of \(nodes.map(\.sizes.count).reduce(0, +)) camera(s), \(plan.format.rawValue); the span recorded first: \(plan.spanGroups) group(s), \(frames) new frame(s) a camera")
        for node in nodes {
            let perPixel = node.ffv1BytesPerPixel ?? 1.5
            let span = node.sizes.map { Int64((Double($0.width * $0.height) * perPixel).rounded(.up)) * frames + 65_536 }.reduce(0, +)
            let mine = plan.shotBytes(sizes: node.sizes)
            collected += span
            stills += mine
            lines.append("  \(node.name): span \(Self.megabytes(span)) on a staging disk with \(Self.megabytes(Int64(node.freeDiskBytes))) free; stills up to \(Self.megabytes(mine))")
            if refusal == nil, span > Int64(node.freeDiskBytes) {
                refusal = "node \(node.name) has \(Self.megabytes(Int64(node.freeDiskBytes))) free on its staging disk but the shot's span takes \(Self.megabytes(span))."
            }
        }
        let needed = collected + stills
        lines.append("collection into \(takesDirectory): up to \(Self.megabytes(needed)) (span \(Self.megabytes(collected)), then stills \(Self.megabytes(stills)))\(takesFreeBytes.map { ", \(Self.megabytes(Int64($0))) free" } ?? "")")
        if refusal == nil, let free = takesFreeBytes, needed > Int64(free) {
            refusal = "the takes directory \(takesDirectory) has \(Self.megabytes(Int64(free))) free but the shot needs up to \(Self.megabytes(needed))."
        }
        lines.append(refusal == nil ? "the shot fits its disks." : "the shot does not fit: \(refusal!)")
    }

    static func megabytes(_ bytes: Int64) -> String {
        let mb = Double(bytes) / 1_000_000
        return mb >= 100 ? "\(Int(mb.rounded())) MB" : "\((mb * 10).rounded() / 10) MB"
    }
}
