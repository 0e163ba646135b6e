/// One row of `<camera>.frames.csv` (CONTRACT §4).
public struct FrameRow: Equatable, Sendable {
    public var frame: Int64
    public var group: Int64
    public var centerMicroseconds: Int64
    public var isDup: Bool

    public init(frame: Int64, group: Int64, centerMicroseconds: Int64, isDup: Bool) {
        self.frame = frame
        self.group = group
        self.centerMicroseconds = centerMicroseconds
        self.isDup = isDup
    }
}

public enum FramesTable {
    public static let header = "frame,group,center_us,flags"

    public static func line(_ row: FrameRow) -> String {
        "\(row.frame),\(row.group),\(row.centerMicroseconds),\(row.isDup ? "dup" : "")"
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
                  fields[3] == "" || fields[3] == "dup" else {
                throw ParseError(line: index + 1, reason: "expected frame,group,center_us,flags, found \"\(line)\"")
            }
            rows.append(FrameRow(frame: frame, group: group, centerMicroseconds: center, isDup: fields[3] == "dup"))
        }
        return rows
    }
}
