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

    /// A relative URL of a path relative to the document's folder, each component percent-encoded: what FCPXML's
    /// `src`, xmeml's `pathurl` and the `.otio` resolve against the document, so a copied take relinks where it lands.
    package static func relativeURL(_ relativePath: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return relativePath.split(separator: "/", omittingEmptySubsequences: false).map {
            String($0).addingPercentEncoding(withAllowedCharacters: allowed) ?? String($0)
        }.joined(separator: "/")
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
