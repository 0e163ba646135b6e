// Versioned YAML files (the rig file, the node file): one reader, so both give the same one-sentence errors naming
// the file, the key and the line; warn about keys this build does not know; and refuse what Yams cannot read
// safely.
import CoordCore
// libyaml as Yams builds it: its event stream is read once before Yams composes the file (`checkAliases`).
import CYaml
import Foundation
import Platform
import Yams

/// One sentence naming the file and what is wrong with it (the line when there is one).
public struct YAMLFileError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A YAML file read to its node tree, checked for version and unknown keys, and decoded.
public struct VersionedYAML {
    /// The path as the operator gave it; every message names the file by it.
    public let path: String
    public let root: Node
    /// `"rig.yaml: unknown key nodes[1].ip ignored (line 9)."`, one per unknown key, in file order.
    public let warnings: [String]

    /// Reads the file's text; `kind` names it in messages ("rig file", "node file").
    public static func read(_ path: String, kind: String) throws(YAMLFileError) -> String {
        let url = URL(fileURLWithPath: path)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else {
            throw .init("\(path): no such \(kind).")
        }
        if isDirectory.boolValue { throw .init("\(path) is a directory, not a \(kind).") }
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw .init("\(path): cannot read the \(kind): \(reason(error)).")
        }
        guard let text = String(data: data, encoding: .utf8) else { throw .init("\(path): the \(kind) is not UTF-8 text.") }
        return text
    }

    /// Parses `text`: YAML syntax, a mapping at the top, no base-60 numbers, `version` (if given) equal to
    /// `version`, and a warning for every key not in `knownKeys` (keyed by field pattern, `nodes[]` for a list's
    /// items; "" for the top level).
    public init(text: String, path: String, kind: String, version supported: Int, topKeys: String,
                knownKeys: [String: Set<String>]) throws(YAMLFileError) {
        self.path = path
        try Self.checkAliases(text, path: path)
        let parsed: Node?
        do {
            parsed = try Yams.compose(yaml: text)
        } catch let error as YamlError {
            throw .init("\(path): \(Self.yamlProblem(error)).")
        } catch {
            throw .init("\(path) is not valid YAML: \(error).")
        }
        guard let root = parsed else { throw .init("\(path) is empty: a \(kind) needs the keys \(topKeys).") }
        guard case .mapping = root else {
            throw .init("\(path)\(Self.lineText(root.mark)): a \(kind) must be a mapping with the keys \(topKeys).")
        }
        // YAML 1.1 reads `1:30:00` as a base-60 number, and Yams traps on one that overflows: no value needs one.
        if let scalar = Self.firstSexagesimal(in: root) {
            throw .init("\(path)\(Self.lineText(scalar.mark)): \"\(Echo.short(scalar.string))\" is read as a base-60 number; write a plain number, or quote it if it is text.")
        }
        // Refuse another version before judging its keys: they may mean something else there.
        if let versionNode = root["version"] {
            guard let version = versionNode.int else {
                throw .init("\(path)\(Self.lineText(versionNode.mark)): version must be a whole number (got \(Self.describe(versionNode))).")
            }
            if version != supported {
                throw .init("\(path)\(Self.lineText(versionNode.mark)): version \(version) is not supported: this coord reads \(kind)s of version \(supported).")
            }
        }
        var warnings: [String] = []
        Self.unknownKeys(in: root, at: "", pattern: "", known: knownKeys, path: path, into: &warnings)
        self.root = root
        self.warnings = warnings
    }

    /// Decodes the whole file; a decoding failure is one sentence naming the field and its line. `missing` words
    /// the sentence for a required top-level key.
    public func decode<T: Decodable>(_ type: T.Type, missing: [String: String] = [:]) throws(YAMLFileError) -> T {
        do {
            return try YAMLDecoder().decode(T.self, from: root)
        } catch let error as DecodingError {
            throw .init(decodingProblem(error, missing: missing))
        } catch let error as YamlError {
            throw .init("\(path): \(Self.yamlProblem(error)).")
        } catch {
            throw .init("\(path): \(error)")
        }
    }

    /// `path line N: sentence` for a field path like `nodes[1].endpoint`.
    public func fault(_ field: String, _ sentence: String) -> YAMLFileError {
        YAMLFileError("\(path)\(Self.lineText(Self.node(at: field, in: root)?.mark)): \(sentence)")
    }

    nonisolated(unsafe) static let sexagesimalInteger = try! Regex("[-+]?[1-9][0-9_]*(:[0-5]?[0-9])+")
    nonisolated(unsafe) static let sexagesimalFloat = try! Regex("[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+\\.[0-9_]*")

    /// The first plain scalar YAML 1.1 would read as a sexagesimal number (digits with `:` groups), if any.
    static func firstSexagesimal(in node: Node) -> Node.Scalar? {
        switch node {
        case .scalar(let scalar):
            guard scalar.style == .plain, scalar.string.contains(":") else { return nil }
            // YAML 1.1's own forms (what Yams resolves), so an address like 0.0.0.0:9710 stays text.
            return (try? sexagesimalInteger.wholeMatch(in: scalar.string)) != nil
                || (try? sexagesimalFloat.wholeMatch(in: scalar.string)) != nil ? scalar : nil
        case .mapping(let mapping):
            for (key, value) in mapping {
                if let found = firstSexagesimal(in: key) ?? firstSexagesimal(in: value) { return found }
            }
            return nil
        case .sequence(let sequence):
            for item in sequence { if let found = firstSexagesimal(in: item) { return found } }
            return nil
        case .alias:
            return nil
        }
    }

    // MARK: aliases

    /// Values that aliases (`*name`) may add to a file by repeating what their anchor holds. Yams copies an
    /// anchored value at each alias, so nested aliases grow a few hundred bytes into billions of values (an
    /// "alias bomb"); no rig or node file needs more than a handful.
    public static let aliasBudget = 10_000
    /// Reads the file's events once, in time linear in its size, and throws one sentence when its aliases would
    /// expand it by more than `aliasBudget` values: so nothing super-linear runs before Yams composes it. Syntax
    /// errors (libyaml's nesting limit among them) are left to Yams, which words them.
    static func checkAliases(_ text: String, path: String) throws(YAMLFileError) {
        var bytes = Array(text.utf8)
        let problem: String? = bytes.withUnsafeMutableBufferPointer { buffer in
            var parser = yaml_parser_t()
            guard yaml_parser_initialize(&parser) == 1 else { return nil }
            defer { yaml_parser_delete(&parser) }
            yaml_parser_set_input_string(&parser, buffer.baseAddress, buffer.count)
            // Each open collection's size so far (in values, aliases expanded) and its anchor.
            var open: [(size: Int, anchor: String?)] = []
            var anchored: [String: Int] = [:]
            var added = 0
            let cap = aliasBudget + 1  // sizes are clamped here, so no sum can overflow
            func anchorName(_ pointer: UnsafeMutablePointer<yaml_char_t>?) -> String? {
                pointer.map { String(cString: $0) }
            }
            func finish(_ size: Int, anchor: String?) {
                let size = min(size, cap)
                if let anchor { anchored[anchor] = size }
                if !open.isEmpty { open[open.count - 1].size = min(open[open.count - 1].size + size, cap) }
            }
            while true {
                var event = yaml_event_t()
                guard yaml_parser_parse(&parser, &event) == 1 else { return nil }
                defer { yaml_event_delete(&event) }
                let line = Int(event.start_mark.line) + 1
                switch event.type {
                case YAML_STREAM_END_EVENT:
                    return nil
                case YAML_SCALAR_EVENT:
                    finish(1, anchor: anchorName(event.data.scalar.anchor))
                case YAML_SEQUENCE_START_EVENT, YAML_MAPPING_START_EVENT:
                    let anchor = event.type == YAML_SEQUENCE_START_EVENT
                        ? anchorName(event.data.sequence_start.anchor) : anchorName(event.data.mapping_start.anchor)
                    open.append((1, anchor))
                case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                    if let done = open.popLast() { finish(done.size, anchor: done.anchor) }
                case YAML_ALIAS_EVENT:
                    // An unknown alias counts as one value: Yams then names it as undefined.
                    let size = anchorName(event.data.alias.anchor).flatMap { anchored[$0] } ?? 1
                    added = min(added + size, cap)
                    if added > aliasBudget {
                        return "\(path) line \(line): its aliases (*name) would repeat more than \(aliasBudget) values, so it is refused unread; write the values out instead of nesting aliases."
                    }
                    finish(size, anchor: nil)
                default:
                    continue
                }
            }
        }
        if let problem { throw YAMLFileError(problem) }
    }

    // MARK: outline

    /// The first document's nodes with where each lies in `text`, as libyaml reports it (nil: not YAML), so a file
    /// can be edited in place: its comments, blank lines and layout kept.
    public static func outline(_ text: String) -> YAMLOutline? {
        var bytes = Array(text.utf8)
        return bytes.withUnsafeMutableBufferPointer { buffer -> YAMLOutline? in
            var parser = yaml_parser_t()
            guard yaml_parser_initialize(&parser) == 1 else { return nil }
            defer { yaml_parser_delete(&parser) }
            yaml_parser_set_input_string(&parser, buffer.baseAddress, buffer.count)
            var outline = YAMLOutline()
            var open: [Int] = []
            while true {
                var event = yaml_event_t()
                guard yaml_parser_parse(&parser, &event) == 1 else { return nil }
                defer { yaml_event_delete(&event) }
                var item = YAMLOutline.Item(kind: .scalar, start: Int(event.start_mark.index), end: Int(event.end_mark.index),
                                            column: Int(event.start_mark.column))
                switch event.type {
                case YAML_STREAM_END_EVENT, YAML_DOCUMENT_END_EVENT:
                    return outline
                case YAML_SCALAR_EVENT:
                    let data = UnsafeBufferPointer(start: event.data.scalar.value, count: event.data.scalar.length)
                    item.value = String(decoding: data, as: UTF8.self)
                    item.plain = event.data.scalar.style == YAML_PLAIN_SCALAR_STYLE
                case YAML_ALIAS_EVENT:
                    item.kind = .alias
                case YAML_SEQUENCE_START_EVENT:
                    item.kind = .sequence
                    item.flow = event.data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE
                case YAML_MAPPING_START_EVENT:
                    item.kind = .mapping
                    item.flow = event.data.mapping_start.style == YAML_FLOW_MAPPING_STYLE
                case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                    if let done = open.popLast() { outline.items[done].end = item.end }
                    continue
                default:
                    continue
                }
                let index = outline.items.count
                outline.items.append(item)
                if let parent = open.last { outline.items[parent].children.append(index) } else if outline.root == nil { outline.root = index }
                if item.kind == .sequence || item.kind == .mapping { open.append(index) }
            }
        }
    }

    // MARK: unknown keys

    /// Walks the mappings `known` lists and warns about every other key.
    private static func unknownKeys(in node: Node, at field: String, pattern: String, known table: [String: Set<String>], path: String,
                                    into warnings: inout [String]) {
        guard let known = table[pattern], case .mapping(let mapping) = node else { return }
        for (key, value) in mapping {
            let name = key.string ?? "\(key)"
            let child = field.isEmpty ? name : "\(field).\(name)"
            guard known.contains(name) else {
                warnings.append("\(path): unknown key \(child) ignored\(lineText(key.mark).isEmpty ? "" : " (\(lineText(key.mark).dropFirst()))").")
                continue
            }
            let childPattern = pattern.isEmpty ? name : "\(pattern).\(name)"
            if case .sequence(let items) = value, table[childPattern + "[]"] != nil {
                for (i, item) in items.enumerated() {
                    unknownKeys(in: item, at: "\(child)[\(i)]", pattern: childPattern + "[]", known: table, path: path, into: &warnings)
                }
            } else {
                unknownKeys(in: value, at: child, pattern: childPattern, known: table, path: path, into: &warnings)
            }
        }
    }

    // MARK: messages

    /// ` line N` for a mark, empty without one.
    static func lineText(_ mark: Mark?) -> String {
        mark.map { " line \($0.line)" } ?? ""
    }

    /// The node at a field path like `nodes[1].cameras[0]` or `take.fps`, for its line.
    public static func node(at field: String, in root: Node) -> Node? {
        var current: Node? = root
        for part in field.split(separator: ".") {
            var name = Substring(part)
            var indices: [Int] = []
            while name.hasSuffix("]"), let open = name.lastIndex(of: "[") {
                guard let i = Int(name[name.index(after: open)..<name.index(before: name.endIndex)]) else { break }
                indices.insert(i, at: 0)
                name = name[..<open]
            }
            current = current?[String(name)]
            for i in indices {
                guard case .sequence(let items)? = current, items.indices.contains(i) else { return nil }
                current = items[i]
            }
        }
        return current
    }

    /// A coding path as the file's key path: `nodes[1].endpoint`.
    static func fieldPath(_ codingPath: [CodingKey]) -> String {
        var text = ""
        for key in codingPath {
            if let i = key.intValue {
                text += "[\(i)]"
            } else {
                text += text.isEmpty ? key.stringValue : ".\(key.stringValue)"
            }
        }
        return text
    }

    private func decodingProblem(_ error: DecodingError, missing: [String: String]) -> String {
        let lineText = Self.lineText, node = Self.node, fieldPath = Self.fieldPath, describe = Self.describe, expectation = Self.expectation
        switch error {
        case .keyNotFound(let key, let context):
            let parent = fieldPath(context.codingPath)
            let field = parent.isEmpty ? key.stringValue : "\(parent).\(key.stringValue)"
            let mark = parent.isEmpty ? nil : node(parent, root)?.mark
            if let sentence = missing[field] { return "\(path): \(sentence)" }
            if parent.isEmpty { return "\(path): the key \(field) is missing." }
            return "\(path)\(lineText(mark)): \(parent) has no \(key.stringValue) (the key \(field) is required)."
        case .typeMismatch(let type, let context), .valueNotFound(let type, let context):
            let field = fieldPath(context.codingPath)
            let found = node(field, root)
            return "\(path)\(lineText(found?.mark)): \(field.isEmpty ? "the file" : field) must be \(expectation(type)) (got \(found.map(describe) ?? "nothing"))."
        case .dataCorrupted(let context):
            let field = fieldPath(context.codingPath)
            let found = node(field, root)
            return "\(path)\(lineText(found?.mark)): \(field.isEmpty ? "the file" : field) cannot be read: \(context.debugDescription)"
        @unknown default:
            return "\(path): \(error)"
        }
    }

    /// What a Swift type means in a YAML file's words.
    private static func expectation(_ type: Any.Type) -> String {
        switch type {
        case is Int.Type, is Int64.Type, is UInt.Type: return "a whole number"
        case is Double.Type: return "a number"
        case is String.Type: return "a string"
        case is Bool.Type: return "true or false"
        case is Node.Sequence.Type: return "a list"
        case is Node.Mapping.Type: return "a mapping of keys to values"
        case is Node.Scalar.Type: return "a single value"
        default:
            let name = "\(type)"
            if name.hasPrefix("Array") || name.hasPrefix("[") { return "a list" }
            if name.hasPrefix("Dictionary") { return "a mapping of keys to values" }
            return "a \(name)"
        }
    }

    /// A short description of what a YAML node holds.
    private static func describe(_ node: Node) -> String {
        switch node {
        case .scalar(let s):
            let text = s.string.count > 40 ? String(s.string.prefix(40)) + "…" : s.string
            return s.string.isEmpty ? "nothing" : "\"\(text)\""
        case .sequence: return "a list"
        case .mapping: return "a mapping"
        case .alias: return "an alias"
        }
    }

    /// A YAML syntax error as `line L column C: problem`.
    private static func yamlProblem(_ error: YamlError) -> String {
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
             .composer(let context, let problem, let mark, _):
            let while_ = context.map { " (\($0.text))" } ?? ""
            return "line \(mark.line) column \(mark.column) is not valid YAML: \(problem)\(while_)"
        case .duplicatedKeysInMapping(let duplicates, let context):
            return "line \(context.mark.line) repeats the key\(duplicates.count == 1 ? "" : "s") \(duplicates.sorted().joined(separator: ", "))"
        case .reader(let problem, _, _, _):
            return "is not readable YAML text: \(problem)"
        default:
            return "is not valid YAML: \(error)"
        }
    }
}
