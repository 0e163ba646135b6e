/// Node and camera names: `[A-Za-z0-9._-]{1,64}` (CONTRACT §4), so they are safe as file names.
public enum RigName {
    public static func isValid(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...64).contains(bytes.count), name != ".", name != ".." else { return false }
        return bytes.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2E || b == 0x5F || b == 0x2D
        }
    }

    /// Why `name` is not a valid node or camera name, or nil if it is.
    public static func problem(with name: String, kind: String) -> String? {
        isValid(name) ? nil : "\(kind) name \"\(Echo.short(name))\" is not allowed: use 1 to 64 of A-Z a-z 0-9 . _ -"
    }
}

/// A take id: `YYYYMMDD-HHMMSS-<name>-<6 hex>` (CONTRACT §4).
public struct TakeID: Hashable, Sendable, CustomStringConvertible {
    public let value: String
    public var description: String { value }

    /// `utc` fields are the coordinator's wall clock; `nonce` supplies the 6 hex digits.
    public init(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int, name: String, nonce: UInt32) {
        func pad(_ v: Int, _ width: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        var hex = String(nonce & 0xFF_FFFF, radix: 16)
        hex = String(repeating: "0", count: 6 - hex.count) + hex
        value = "\(pad(year, 4))\(pad(month, 2))\(pad(day, 2))-\(pad(hour, 2))\(pad(minute, 2))\(pad(second, 2))-\(name)-\(hex)"
    }

    /// A take id is itself a valid name of at most 64 characters, so it is safe as a directory name on every
    /// node; that leaves 41 for the take's own name.
    public static let maxNameLength = 64 - "YYYYMMDD-HHMMSS--xxxxxx".count

    /// Why `name` cannot name a take, or nil.
    public static func problem(withName name: String) -> String? {
        if let p = RigName.problem(with: name, kind: "take") { return p }
        if name.utf8.count > maxNameLength { return "take name \"\(Echo.short(name))\" is longer than \(maxNameLength) characters." }
        return nil
    }

    public init?(parsing value: String) {
        let parts = value.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count >= 4, parts[0].count == 8, parts[1].count == 6, parts.last!.count == 6,
              parts[0].allSatisfy(\.isNumber), parts[1].allSatisfy(\.isNumber), parts.last!.allSatisfy(\.isHexDigit),
              RigName.isValid(parts[2..<(parts.count - 1)].joined(separator: "-")),
              RigName.isValid(value) else { return nil }
        self.value = value
    }

    /// The take's own name inside the id.
    public var name: String {
        let parts = value.split(separator: "-", omittingEmptySubsequences: false)
        return parts[2..<(parts.count - 1)].joined(separator: "-")
    }
}

/// What an error reply or log line may repeat of a peer's input: a short prefix, never the whole of it.
public enum Echo {
    /// Longer than any valid name (64), so a name refused for its length is still shown whole.
    public static let limit = 96

    /// `text` cut to `limit` characters, with its control characters written as escapes, so a value from outside
    /// (a 10 kB device id, a name with a newline) stays one readable word of one sentence on one line.
    public static func short(_ text: String) -> String {
        escapingControls(text.count <= limit ? text : String(text.prefix(limit)) + "… (\(text.utf8.count) bytes)")
    }

    /// `text` with every control character (C0, DEL, C1), line or paragraph separator and bidirectional override
    /// written as an escape (`\n`, `\t`, `\r`, `\u{1B}`); anything else as it is.
    public static func escapingControls(_ text: String) -> String {
        func isControl(_ s: Unicode.Scalar) -> Bool {
            s.value < 0x20 || (0x7F...0x9F).contains(s.value) || s.value == 0x2028 || s.value == 0x2029
                || (0x202A...0x202E).contains(s.value) || (0x2066...0x2069).contains(s.value)
        }
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var out = String.UnicodeScalarView()
        for s in text.unicodeScalars {
            switch s {
            case "\n": out.append(contentsOf: "\\n".unicodeScalars)
            case "\r": out.append(contentsOf: "\\r".unicodeScalars)
            case "\t": out.append(contentsOf: "\\t".unicodeScalars)
            case _ where isControl(s): out.append(contentsOf: "\\u{\(String(s.value, radix: 16, uppercase: true))}".unicodeScalars)
            default: out.append(s)
            }
        }
        return String(out)
    }

    /// The sentence with every overlong word (a value someone pasted, a 50 MB rig entry) cut to a short prefix;
    /// a quote or punctuation mark that closed the word is kept, so the sentence still reads.
    public static func capWords(in sentence: String) -> String {
        guard sentence.utf8.count > 2 * limit else { return sentence }
        return sentence.split(separator: " ", omittingEmptySubsequences: false).map { word -> String in
            guard word.count > 2 * limit else { return String(word) }
            let closing = word.reversed().prefix { "\".,:;)]".contains($0) }
            return String(word.prefix(limit)) + "… (\(word.utf8.count) bytes)" + String(closing.reversed())
        }.joined(separator: " ")
    }
}

/// `HOST:PORT` as the console's --listen and the node's --metrics take it (`[::1]:9710` for IPv6); nil when it is not
/// one, so each flag can say so in its own sentence.
public enum HostPort {
    public static func parse(_ text: String) -> (host: String, port: Int)? {
        guard let colon = text.lastIndex(of: ":"), colon > text.startIndex,
              let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return (host, port)
    }

    /// `host:port` as a URL writes it: an IPv6 address in brackets (`[::]:9104`, never `:::9104`).
    public static func text(host: String, port: Int) -> String {
        host.contains(":") && !host.hasPrefix("[") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}
