import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// sync-report.html parsed as XML (the page is well-formed XHTML) and queried with XPath, so tests assert on
/// elements and their text rather than on substrings of the markup.
struct ParsedPage {
    struct Failure: Error, CustomStringConvertible { var description: String }

    let source: String
    let document: XMLDocument

    init(_ html: String) throws {
        source = html
        document = try XMLDocument(xmlString: html, options: [])
    }

    /// The elements `xpath` selects, from the document or from `node`.
    func elements(_ xpath: String, in node: XMLNode? = nil) throws -> [XMLElement] {
        try (node ?? document).nodes(forXPath: xpath).compactMap { $0 as? XMLElement }
    }

    /// The text content of each element `xpath` selects.
    func texts(_ xpath: String, in node: XMLNode? = nil) throws -> [String] {
        try elements(xpath, in: node).map { $0.stringValue ?? "" }
    }

    /// The one element `xpath` selects.
    func only(_ xpath: String, in node: XMLNode? = nil) throws -> XMLElement {
        let found = try elements(xpath, in: node)
        guard found.count == 1, let element = found.first else {
            throw Failure(description: "\(xpath) selects \(found.count) elements, not one")
        }
        return element
    }

    /// The `<svg>` of the plot with this CSS class.
    func plot(_ cssClass: String) throws -> XMLElement { try only("//svg[@class='plot \(cssClass)']") }

    /// Every `<svg>` in the page.
    var plots: [XMLElement] { get throws { try elements("//svg") } }

    /// The verdict's text.
    var verdict: String { get throws { try only("//p[starts-with(@class, 'verdict ')]").stringValue ?? "" } }

    /// The rows of a table by its class, header row left out, each as its cells' text.
    func rows(ofTable cssClass: String) throws -> [[String]] {
        try elements("//table[@class='\(cssClass)']/tr[td]").map { row in try texts("td", in: row) }
    }
}

extension XMLElement {
    func attribute(_ name: String) -> String? { attribute(forName: name)?.stringValue }
}
