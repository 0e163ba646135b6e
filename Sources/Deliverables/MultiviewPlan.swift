import CoordCore
import Foundation
import TakeDocuments

/// How `coord deliver --to multiview` arranges the take's cameras in one picture.
public enum MultiviewLayout: String, CaseIterable, Sendable, Equatable {
    /// Every camera in a grid of equal cells, in manifest order, left to right and top to bottom.
    case grid
    /// The first camera of the manifest full frame, the others as small insets along its bottom edge.
    case pip
}

/// A rectangle of the multiview picture, in pixels from its top-left corner.
public struct MultiviewRect: Equatable, Sendable {
    public var x: Int, y: Int, width: Int, height: Int
    public init(x: Int, y: Int, width: Int, height: Int) { self.x = x; self.y = y; self.width = width; self.height = height }
}

/// One camera's place in the multiview: its `.mkv`, where its picture goes and which of its frames were filled.
public struct MultiviewTile: Equatable, Sendable {
    public var node: String
    public var camera: String
    /// Relative to the take directory.
    public var source: String
    /// The cell the tile owns (its picture centred in it, the rest black).
    public var cell: MultiviewRect
    /// The camera's picture scaled into the cell, aspect kept, in the cell's coordinates.
    public var picture: MultiviewRect
    /// The groups whose frame repeats an earlier one (`dup` in frames.csv): the tile shows a mark on them.
    public var filled: Set<Int64> = []
    public var label: String { "\(node)/\(camera)" }
}

/// The multiview's pure decisions: its size, each camera's tile, the sound to mix, and the timecode to burn in.
public struct MultiviewPlan: Equatable, Sendable {
    public static let widths = 160...7680
    public var takeID: String
    public var output: String
    public var layout: MultiviewLayout
    public var width: Int
    public var height: Int
    /// grid: the strip under the cells where the timecode is burnt in, clear of every picture (pip: 0, it goes on top).
    public var band: Int
    public var tiles: [MultiviewTile]
    /// The microphones, each aligned to group 0 as its Broadcast WAV is.
    public var sounds: [WavJob]
    public var groups: Int64
    /// The take's frame rate as a rational, frames per second = numerator / denominator.
    public var rateNumerator: Int
    public var rateDenominator: Int
    /// Group 0's timecode (`HH:MM:SS:FF`, `;` before the frames when drop-frame).
    public var timecode: String

    /// The multiview of a take already planned for delivery, or the sentence saying what is wrong with the request.
    public static func make(_ plan: DeliverPlan, layout: MultiviewLayout, width: Int) -> Result<MultiviewPlan, DeliverProblem> {
        guard widths.contains(width), width % 2 == 0 else {
            return .failure(DeliverProblem("--width must be an even number of pixels from \(widths.lowerBound) to \(widths.upperBound) (got \(width))."))
        }
        guard !plan.movs.isEmpty else { return .failure(DeliverProblem("take \(plan.takeID) has no cameras to put in a multiview.")) }
        let sizes = plan.movs.map { (width: $0.width, height: $0.height) }
        let (cells, pictures, content) = switch layout {
        case .grid: grid(sizes, width: width)
        case .pip: pip(sizes, width: width)
        }
        let band = layout == .grid ? even(max(24, width / 32)) : 0
        let tiles = plan.movs.indices.map { i in
            MultiviewTile(node: plan.movs[i].node, camera: plan.movs[i].camera, source: plan.movs[i].source,
                          cell: cells[i], picture: pictures[i])
        }
        return .success(MultiviewPlan(takeID: plan.takeID, output: "\(DeliverPlan.directory)/\(plan.takeID)_multiview.mov",
                                      layout: layout, width: width, height: content + band, band: band, tiles: tiles, sounds: plan.wavs,
                                      groups: plan.groups, rateNumerator: plan.rate.numerator, rateDenominator: plan.rate.denominator, timecode: plan.timecode))
    }

    /// What the movie depends on: a change makes it again.
    public var fingerprint: String {
        let tileText = tiles.map { "\($0.source)@\($0.cell.x),\($0.cell.y) \($0.filled.count)" }.joined(separator: ";")
        let soundText = sounds.map(\.fingerprint).joined(separator: ";")
        return "multiview/1 \(layout.rawValue) \(width)x\(height) \(groups) \(rateNumerator)/\(rateDenominator) \(timecode) [\(tileText)] [\(soundText)]"
    }

    /// `n` even, rounded down: libx264's 4:2:0 pictures and their offsets want even sizes.
    static func even(_ n: Int) -> Int { max(2, n - n % 2) }

    /// The picture of a `size` camera scaled to fit `box`, aspect kept, centred in it.
    static func fit(_ size: (width: Int, height: Int), in box: (width: Int, height: Int)) -> MultiviewRect {
        // Compare the aspect ratios in integers: w/h ≥ W/H ⟺ w·H ≥ W·h.
        let wide = size.width * box.height >= box.width * size.height
        let w = wide ? box.width : even(box.height * size.width / size.height)
        let h = wide ? even(box.width * size.height / size.width) : box.height
        return MultiviewRect(x: 0, y: 0, width: w, height: h).centred(in: box)
    }

    /// Columns ⌈√n⌉, rows ⌈n / columns⌉; cells `width / columns` wide, as tall as the tallest camera's aspect needs.
    static func grid(_ sizes: [(width: Int, height: Int)], width: Int) -> ([MultiviewRect], [MultiviewRect], Int) {
        let n = sizes.count
        var columns = 1
        while columns * columns < n { columns += 1 }
        let rows = (n + columns - 1) / columns
        let cellWidth = even(width / columns)
        let tallest = sizes.max { $0.height * $1.width < $1.height * $0.width }!
        let cellHeight = even(cellWidth * tallest.height / tallest.width)
        var cells: [MultiviewRect] = [], pictures: [MultiviewRect] = []
        for (i, size) in sizes.enumerated() {
            cells.append(MultiviewRect(x: (i % columns) * cellWidth, y: (i / columns) * cellHeight, width: cellWidth, height: cellHeight))
            pictures.append(fit(size, in: (cellWidth, cellHeight)))
        }
        return (cells, pictures, rows * cellHeight)
    }

    /// The first camera fills the picture; the others are insets a quarter of the width at most, in one row along the
    /// bottom edge from the left, a margin of 1/64 of the width around each.
    static func pip(_ sizes: [(width: Int, height: Int)], width: Int) -> ([MultiviewRect], [MultiviewRect], Int) {
        let main = sizes[0]
        let height = even(width * main.height / main.width)
        var cells = [MultiviewRect(x: 0, y: 0, width: width, height: height)]
        var pictures = [MultiviewRect(x: 0, y: 0, width: width, height: height)]
        let insets = sizes.count - 1
        guard insets > 0 else { return (cells, pictures, height) }
        let margin = even(width / 64)
        let insetWidth = even(min(width / 4, (width - margin * (insets + 1)) / insets))
        let tallest = sizes.dropFirst().max { $0.height * $1.width < $1.height * $0.width }!
        let insetHeight = min(even(insetWidth * tallest.height / tallest.width), even(height / 2))
        for (k, size) in sizes.dropFirst().enumerated() {
            cells.append(MultiviewRect(x: margin + k * (insetWidth + margin), y: even(height - margin - insetHeight),
                                       width: insetWidth, height: insetHeight))
            pictures.append(fit(size, in: (insetWidth, insetHeight)))
        }
        return (cells, pictures, height)
    }

    /// The groups a camera's `frames.csv` (`frame,group,center_us,flags`) flags `dup`.
    public static func filledGroups(_ csv: String) -> Set<Int64> {
        var filled: Set<Int64> = []
        for line in csv.split(whereSeparator: \.isNewline).dropFirst() {
            let fields = line.split(separator: ",", omittingEmptySubsequences: false)
            guard fields.count >= 4, let group = Int64(fields[1]) else { continue }
            if fields[3] == "dup" { filled.insert(group) }
        }
        return filled
    }

    /// The progress line on stderr: `multiview: frame 120/300 (40%), 52.1 fps, ETA 4 s`.
    public static func progressLine(done: Int64, of total: Int64, seconds: Double) -> String {
        let rate = seconds > 0 ? Double(done) / seconds : 0
        let eta = rate > 0 ? Int((Double(max(total - done, 0)) / rate).rounded(.up)) : 0
        let percent = total > 0 ? done * 100 / total : 100
        return "multiview: frame \(done)/\(total) (\(percent)%), \(String(format: "%.1f", rate)) fps, ETA \(eta) s"
    }
}

extension MultiviewRect {
    /// This size centred in `box`, on even offsets.
    func centred(in box: (width: Int, height: Int)) -> MultiviewRect {
        let x = (box.width - width) / 2, y = (box.height - height) / 2
        return MultiviewRect(x: x - x % 2, y: y - y % 2, width: width, height: height)
    }
}
