import Crypto
import Foundation

/// An ASC MHL v2.0 history (`<take>/ascmhl/`, CONTRACT §10): generation files (`NNNN_<folder>_<date>Z.mhl`, one
/// `<hashlist>` each) and `ascmhl_chain.xml`, which names every generation with the C4 ID of its bytes. What the ASC's
/// reference tool `ascmhl verify` reads; xxh128 for the files.
public enum ASCMHL {
    public static let folder = "ascmhl"
    public static let chainFile = "ascmhl_chain.xml"

    /// One file of a generation.
    public struct Entry: Equatable, Sendable {
        public enum Action: String, Sendable { case original, verified }
        /// Relative to the take directory, `/`-separated.
        public var path: String
        public var size: UInt64
        /// Whole seconds (ASC MHL's `lastmodificationdate` resolution).
        public var modified: Date
        public var xxh128: String
        public var action: Action
        public init(path: String, size: UInt64, modified: Date, xxh128: String, action: Action) {
            self.path = path; self.size = size; self.modified = modified; self.xxh128 = xxh128; self.action = action
        }
    }

    /// What a history already says about a file (the latest generation that lists it).
    public struct Known: Equatable, Sendable {
        public var size: UInt64
        public var modified: String
        public var xxh128: String
    }

    /// A generation's bytes.
    /// `ignore`: ascmhl ignore patterns beyond its defaults (files the generation leaves out on purpose).
    public static func generation(_ entries: [Entry], created: Date, hostname: String, tool: String, version: String,
                                  ignore: [String] = []) -> String {
        let e = XMLText.escape
        var x = """
        <?xml version="1.0" encoding="UTF-8"?>
        <hashlist version="2.0" xmlns="urn:ASC:MHL:v2.0">
          <creatorinfo>
            <creationdate>\(date(created))</creationdate>
            <hostname>\(e(hostname))</hostname>
            <tool version="\(e(version))">\(e(tool))</tool>
          </creatorinfo>
          <processinfo>
            <process>in-place</process>
            <ignore>
              <pattern>.DS_Store</pattern>
              <pattern>ascmhl</pattern>
              <pattern>ascmhl/</pattern>
        \(ignore.map { "      <pattern>\(e($0))</pattern>\n" }.joined())    </ignore>
          </processinfo>
          <hashes>

        """
        for entry in entries {
            x += """
                <hash>
                  <path size="\(entry.size)" lastmodificationdate="\(date(entry.modified))">\(e(entry.path))</path>
                  <xxh128 action="\(entry.action.rawValue)" hashdate="\(date(created))">\(entry.xxh128)</xxh128>
                </hash>

            """
        }
        x += "  </hashes>\n</hashlist>\n"
        return x
    }

    /// One generation as the chain names it.
    public struct Link: Equatable, Sendable {
        public var file: String
        /// The C4 ID of the generation file's bytes.
        public var c4: String
        public init(file: String, c4: String) { self.file = file; self.c4 = c4 }
    }

    /// `ascmhl_chain.xml` naming `generations` in sequence order from 1.
    public static func chain(_ generations: [Link]) -> String {
        var x = """
        <?xml version="1.0" encoding="UTF-8"?>
        <ascmhldirectory xmlns="urn:ASC:MHL:DIRECTORY:v2.0">

        """
        for (i, g) in generations.enumerated() {
            x += """
              <hashlist sequencenr="\(i + 1)">
                <path>\(XMLText.escape(g.file))</path>
                <c4>\(g.c4)</c4>
              </hashlist>

            """
        }
        return x + "</ascmhldirectory>\n"
    }

    /// `0001_<folder>_2026-11-25_230339Z.mhl`.
    public static func generationFile(_ number: Int, folderName: String, created: Date) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "UTC")
        f.dateFormat = "yyyy-MM-dd_HHmmss"
        let n = String(number)
        return String(repeating: "0", count: max(0, 4 - n.count)) + n + "_\(folderName)_\(f.string(from: created))Z.mhl"
    }

    /// The generation number of a generation file's name (`NNNN_…`), nil for other files.
    public static func generationNumber(_ fileName: String) -> Int? {
        guard fileName.hasSuffix(".mhl"), !fileName.hasPrefix("._") else { return nil }
        let digits = fileName.prefix { $0.isASCII && $0.isNumber }
        return digits.count >= 4 ? Int(digits) : nil
    }

    /// The files a generation lists with their xxh128 (entries without one are left out). Reads what `generation`
    /// writes and what `ascmhl create` writes.
    public static func parse(_ xml: String) -> [String: Known] {
        var known: [String: Known] = [:]
        for block in xml.components(separatedBy: "<hash>").dropFirst() {
            let body = block.components(separatedBy: "</hash>")[0]
            guard let pathTag = between(body, "<path", "</path>"), let hash = between(body, "<xxh128", "</xxh128>"),
                  let pathText = pathTag.split(separator: ">", maxSplits: 1).last,
                  let hashText = hash.split(separator: ">", maxSplits: 1).last else { continue }
            let size = attribute(pathTag, "size").flatMap { UInt64($0) } ?? 0
            known[unescape(String(pathText))] = Known(size: size, modified: attribute(pathTag, "lastmodificationdate") ?? "",
                                                      xxh128: String(hashText).trimmingCharacters(in: .whitespaces))
        }
        return known
    }

    /// A file of the take as it is on disk now.
    public struct OnDisk: Equatable, Sendable {
        public var size: UInt64
        public var modified: Date
        public init(size: UInt64, modified: Date) { self.size = size; self.modified = modified }
    }

    /// Whether the history already lists exactly these files at these sizes and dates (then no generation is due).
    public static func isUpToDate(_ files: [String: OnDisk], known: [String: Known]) -> Bool {
        guard !known.isEmpty, Set(files.keys) == Set(known.keys) else { return false }
        return files.allSatisfy { path, f in known[path].map { $0.size == f.size && $0.modified == date(f.modified) } ?? false }
    }

    /// Whether the history already lists every one of these files at its size and date (it may list more).
    public static func listsAll(_ files: [String: OnDisk], known: [String: Known]) -> Bool {
        files.allSatisfy { path, f in known[path].map { $0.size == f.size && $0.modified == date(f.modified) } ?? false }
    }

    /// The next generation's entries for freshly hashed files: `verified` where the history has the same hash,
    /// `original` for files it does not list; or the sentence naming a file whose bytes no longer match the history.
    public static func entries(_ files: [String: OnDisk], hashes: [String: String], known: [String: Known])
        -> Result<[Entry], DeliverFailure> {
        var entries: [Entry] = []
        for path in files.keys.sorted() {
            guard let f = files[path], let hash = hashes[path] else { continue }
            if let k = known[path], k.xxh128 != hash {
                return .failure(DeliverFailure("\(path) no longer matches its ASC MHL record (xxh128 \(hash), recorded \(k.xxh128)); the take has changed since it was sealed."))
            }
            entries.append(Entry(path: path, size: f.size, modified: f.modified, xxh128: hash, action: known[path] == nil ? .original : .verified))
        }
        return .success(entries)
    }

    /// The generations a chain file names, in its order.
    public static func parseChain(_ xml: String) -> [Link] {
        xml.components(separatedBy: "<hashlist").dropFirst().compactMap { block in
            guard let file = between(block, "<path>", "</path>"), let c4 = between(block, "<c4>", "</c4>") else { return nil }
            return Link(file: unescape(file), c4: c4.trimmingCharacters(in: .whitespaces))
        }
    }

    /// The C4 ID (SMPTE ST 2114) of `data`: SHA-512 in base 58, `c4`-prefixed, 90 characters.
    public static func c4(_ data: Data) -> String {
        let alphabet = Array("123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz")
        var number = Array(SHA512.hash(data: data))
        var digits: [Character] = []
        while number.contains(where: { $0 != 0 }) {
            var remainder = 0
            for i in number.indices {
                let value = remainder * 256 + Int(number[i])
                number[i] = UInt8(value / 58)
                remainder = value % 58
            }
            digits.append(alphabet[remainder])
        }
        let body = String(digits.reversed())
        return "c4" + String(repeating: "1", count: max(0, 88 - body.count)) + body
    }

    /// RFC 3339 in UTC with `+00:00`, whole seconds (how `ascmhl` writes dates).
    public static func date(_ d: Date) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "UTC")
        f.dateFormat = "yyyy-MM-dd'T'HH:mm:ss'+00:00'"
        return f.string(from: d)
    }

    private static func between(_ s: String, _ open: String, _ close: String) -> String? {
        guard let a = s.range(of: open), let b = s.range(of: close, range: a.upperBound..<s.endIndex) else { return nil }
        return String(s[a.upperBound..<b.lowerBound])
    }

    private static func attribute(_ tag: String, _ name: String) -> String? {
        guard let a = tag.range(of: " \(name)=\""), let b = tag.range(of: "\"", range: a.upperBound..<tag.endIndex) else { return nil }
        return String(tag[a.upperBound..<b.lowerBound])
    }

    private static func unescape(_ s: String) -> String {
        s.replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&apos;", with: "'")
            .replacingOccurrences(of: "&amp;", with: "&")
    }
}
