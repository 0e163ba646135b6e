import Foundation

/// Text escaping and file URLs shared by the FCPXML, FCP 7 XML and ASC MHL builders.
package enum XMLText {
    /// `s` safe inside an element or a double-quoted attribute.
    package static func escape(_ s: String) -> String {
        var out = ""
        out.reserveCapacity(s.count)
        for c in s {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            default: out.append(c)
            }
        }
        return out
    }

    /// `file://` URL of an absolute path, each component percent-encoded (what FCP and Premiere resolve).
    package static func fileURL(_ absolutePath: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let parts = absolutePath.split(separator: "/", omittingEmptySubsequences: false).map {
            String($0).addingPercentEncoding(withAllowedCharacters: allowed) ?? String($0)
        }
        return "file://" + parts.joined(separator: "/")
    }
}
