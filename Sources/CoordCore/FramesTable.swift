/// One row of `<camera>.frames.csv` (CONTRACT §4).
public struct FrameRow: Equatable, Sendable {
    public var frame: Int64
    public var group: Int64
    public var centerMicroseconds: Int64
    public var isDup: Bool
    /// The frame is in the file but its row was lost when the node was killed: rebuilt on restart, its centre
    /// extrapolated from the last measured one (flag `recovered`, an addition to CONTRACT §4's flags).
    public var isRecovered: Bool

    public init(frame: Int64, group: Int64, centerMicroseconds: Int64, isDup: Bool, isRecovered: Bool = false) {
        self.frame = frame
        self.group = group
        self.centerMicroseconds = centerMicroseconds
        self.isDup = isDup
        self.isRecovered = isRecovered
    }
}

public enum FramesTable {
    public static let header = "frame,group,center_us,flags"

    public static func line(_ row: FrameRow) -> String {
        "\(row.frame),\(row.group),\(row.centerMicroseconds),\(row.isRecovered ? "recovered" : row.isDup ? "dup" : "")"
    }

    /// The rows for a file that holds `frames` frames after a crash: rows the file has no frame for are dropped,
    /// and each frame without a row gets one in the next group, its centre one period after the last, flagged.
    public static func reconcile(_ rows: [FrameRow], frames: Int, startGroup: Int64, periodMicroseconds: Int64,
                                 t0: Int64) -> [FrameRow] {
        var out = Array(rows.prefix(max(0, frames)))
        while out.count < frames {
            let frame = Int64(out.count)
            let group = out.last.map { $0.group + 1 } ?? startGroup
            let center = out.last.map { $0.centerMicroseconds + periodMicroseconds } ?? (t0 + group * periodMicroseconds)
            out.append(FrameRow(frame: frame, group: group, centerMicroseconds: center, isDup: false, isRecovered: true))
        }
        return out
    }

    public struct ParseError: Error, CustomStringConvertible, Sendable {
        public let line: Int
        public let reason: String
        public var description: String { "line \(line): \(reason)" }
    }

    public static func parse(_ text: String) throws -> [FrameRow] {
        var rows: [FrameRow] = []
        // "\r\n" is one Character in Swift, so it must be named as a separator of its own.
        let lines = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
        for (index, raw) in lines.enumerated() {
            let line = raw.hasSuffix("\r") ? raw.dropLast() : raw[...]
            if index == 0 {
                guard line == header else { throw ParseError(line: 1, reason: "expected header \"\(header)\", found \"\(line)\"") }
                continue
            }
            if line.isEmpty { continue }
            let fields = line.split(separator: ",", omittingEmptySubsequences: false)
            guard fields.count == 4, let frame = Int64(fields[0]), let group = Int64(fields[1]), let center = Int64(fields[2]),
                  ["", "dup", "recovered"].contains(fields[3]) else {
                throw ParseError(line: index + 1, reason: "expected frame,group,center_us,flags, found \"\(line.prefix(96))\"")
            }
            rows.append(FrameRow(frame: frame, group: group, centerMicroseconds: center, isDup: fields[3] == "dup",
                                 isRecovered: fields[3] == "recovered"))
        }
        return rows
    }

    /// The rows of a table whose writer was killed: every whole row up to the first that is cut or damaged.
    public static func parseWholeRows(_ text: String) -> [FrameRow] {
        var rows: [FrameRow] = []
        for line in text.split(separator: "\n").dropFirst() {
            guard let row = try? parse(header + "\n" + line).first else { break }
            rows.append(row)
        }
        return rows
    }
}
