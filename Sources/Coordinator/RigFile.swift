import CoordCore
import Foundation
import Platform
import Yams
import ZeroMQ

/// A rig file read from disk: the spec, and a warning for every key this build does not know (a newer
/// file's keys are ignored, not refused).
public struct RigFile: Sendable {
    /// The path as the operator gave it; every message names the file by it.
    public let path: String
    public let spec: RigSpec
    /// `"rig.yaml: unknown key nodes[1].ip ignored (line 9)."`, one per unknown key, in file order.
    public let warnings: [String]

    /// Reads and checks a rig file. Every failure is a usage error whose one sentence names the file and
    /// the key or line at fault.
    public static func load(_ path: String) throws -> RigFile {
        let url = URL(fileURLWithPath: path)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else {
            throw CoordError(.usage, "\(path): no such rig file.")
        }
        if isDirectory.boolValue { throw CoordError(.usage, "\(path) is a directory, not a rig file.") }
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw CoordError(.usage, "\(path): cannot read the rig file: \(reason(error)).")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw CoordError(.usage, "\(path): the rig file is not UTF-8 text.")
        }
        return try parse(text, path: path)
    }

    /// Parses rig-file text; `path` only names the file in messages.
    public static func parse(_ text: String, path: String) throws -> RigFile {
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch let error as YamlError {
            throw CoordError(.usage, "\(path): \(yamlProblem(error)).")
        } catch {
            throw CoordError(.usage, "\(path) is not valid YAML: \(error).")
        }
        guard let root else {
            throw CoordError(.usage, "\(path) is empty: a rig file needs a nodes list (see deploy/rig.example.yaml).")
        }
        guard case .mapping = root else {
            throw CoordError(.usage, "\(path)\(lineText(root.mark)): a rig file must be a mapping with the keys version, nodes and take.")
        }
        // YAML 1.1 reads `1:30:00` as a base-60 number, and Yams traps on one that overflows: no rig value needs one.
        if let scalar = firstSexagesimal(in: root) {
            throw CoordError(.usage, "\(path)\(lineText(scalar.mark)): \"\(Echo.short(scalar.string))\" is read as a base-60 number; write a plain number, or quote it if it is text.")
        }
        // Refuse another version before judging its keys: they may mean something else there.
        if let versionNode = root["version"] {
            guard let version = versionNode.int else {
                throw CoordError(.usage, "\(path)\(lineText(versionNode.mark)): version must be a whole number (got \(describe(versionNode))).")
            }
            if version != RigSpec.supportedVersion {
                throw CoordError(.usage, "\(path)\(lineText(versionNode.mark)): version \(version) is not supported: this coord reads rig files of version \(RigSpec.supportedVersion).")
            }
        }
        var warnings: [String] = []
        unknownKeys(in: root, at: "", pattern: "", path: path, into: &warnings)

        let spec: RigSpec
        do {
            spec = try YAMLDecoder().decode(RigSpec.self, from: root)
        } catch let error as DecodingError {
            throw CoordError(.usage, decodingProblem(error, root: root, path: path))
        } catch let error as YamlError {
            throw CoordError(.usage, "\(path): \(yamlProblem(error)).")
        }
        if let fault = spec.fault() {
            let mark = node(at: fault.field, in: root)?.mark
            throw CoordError(.usage, "\(path)\(lineText(mark)): \(fault.sentence)")
        }
        let keyed = try readKeys(spec, root: root, path: path)
        return RigFile(path: path, spec: keyed, warnings: warnings)
    }

    /// Reads the certificates a rig file names (relative to its directory) and checks every pinned key, so a
    /// wrong key is one sentence before any node is contacted, never a silent timeout.
    static func readKeys(_ spec: RigSpec, root: Node, path: String) throws -> RigSpec {
        guard let security = spec.security else { return spec }
        var spec = spec
        let base = URL(fileURLWithPath: path).deletingLastPathComponent()
        func resolve(_ file: String) -> String { file.hasPrefix("/") ? file : base.appendingPathComponent(file).path }
        func fail(_ field: String, _ sentence: String) -> CoordError {
            CoordError(.usage, "\(path)\(lineText(node(at: field, in: root)?.mark)): \(sentence)")
        }
        do {
            let pair = try CurveCertificate.loadPair(resolve(security.cert))
            spec.security?.keys = CurveKeys(publicKey: pair.publicKey, secretKey: pair.secretKey)
        } catch {
            throw fail("security.cert", "security.cert: \(error)")
        }
        for (i, node) in spec.nodes.enumerated() {
            if let cert = node.cert {
                do { spec.nodes[i].publicKey = try CurveCertificate.load(resolve(cert)).publicKey } catch {
                    throw fail("nodes[\(i)].cert", "nodes[\(i)].cert: \(error)")
                }
            } else if let key = node.publicKey, !CurveKeyPair.isZ85Key(key) {
                throw fail("nodes[\(i)].public_key", "nodes[\(i)].public_key of node \(node.name) must be 40 Z85 characters in quotes "
                    + "(the public-key line of its NAME.key), not \(key.count) characters.")
            }
        }
        return spec
    }

    /// The first plain scalar YAML 1.1 would read as a sexagesimal number (digits with `:` groups), if any.
    static func firstSexagesimal(in node: Node) -> Node.Scalar? {
        switch node {
        case .scalar(let scalar):
            guard scalar.style == .plain, scalar.string.contains(":") else { return nil }
            let allowed = Set("0123456789_:.+-")
            return scalar.string.allSatisfy(allowed.contains) && scalar.string.contains(where: \.isNumber) ? scalar : nil
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

    /// Where relative paths in the file are taken from.
    public var directory: URL { URL(fileURLWithPath: path).deletingLastPathComponent() }

    // MARK: unknown keys

    /// Walks the mappings the spec knows (`RigSpec.knownKeys`) and warns about every other key.
    private static func unknownKeys(in node: Node, at field: String, pattern: String, path: String, into warnings: inout [String]) {
        guard let known = RigSpec.knownKeys[pattern], case .mapping(let mapping) = node else { return }
        for (key, value) in mapping {
            let name = key.string ?? "\(key)"
            let child = field.isEmpty ? name : "\(field).\(name)"
            guard known.contains(name) else {
                warnings.append("\(path): unknown key \(child) ignored\(lineText(key.mark).isEmpty ? "" : " (\(lineText(key.mark).dropFirst()))").")
                continue
            }
            let childPattern = pattern.isEmpty ? name : "\(pattern).\(name)"
            if case .sequence(let items) = value, RigSpec.knownKeys[childPattern + "[]"] != nil {
                for (i, item) in items.enumerated() {
                    unknownKeys(in: item, at: "\(child)[\(i)]", pattern: childPattern + "[]", path: path, into: &warnings)
                }
            } else {
                unknownKeys(in: value, at: child, pattern: childPattern, path: path, into: &warnings)
            }
        }
    }

    // MARK: messages

    /// ` line N` for a mark, empty without one.
    private static func lineText(_ mark: Mark?) -> String {
        mark.map { " line \($0.line)" } ?? ""
    }

    /// The node at a field path like `nodes[1].cameras[0]` or `take.fps`, for its line.
    static func node(at field: String, in root: Node) -> Node? {
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

    private static func decodingProblem(_ error: DecodingError, root: Node, path: String) -> String {
        switch error {
        case .keyNotFound(let key, let context):
            let parent = fieldPath(context.codingPath)
            let field = parent.isEmpty ? key.stringValue : "\(parent).\(key.stringValue)"
            let mark = parent.isEmpty ? nil : node(at: parent, in: root)?.mark
            if field == "nodes" {
                return "\(path): the key nodes is missing: list the rig's nodes, each with a name and an endpoint."
            }
            return "\(path)\(lineText(mark)): \(parent) has no \(key.stringValue) (the key \(field) is required)."
        case .typeMismatch(let type, let context), .valueNotFound(let type, let context):
            let field = fieldPath(context.codingPath)
            let found = node(at: field, in: root)
            return "\(path)\(lineText(found?.mark)): \(field.isEmpty ? "the file" : field) must be \(expectation(type)) (got \(found.map(describe) ?? "nothing"))."
        case .dataCorrupted(let context):
            let field = fieldPath(context.codingPath)
            let found = node(at: field, in: root)
            return "\(path)\(lineText(found?.mark)): \(field.isEmpty ? "the file" : field) cannot be read: \(context.debugDescription)"
        @unknown default:
            return "\(path): \(error)"
        }
    }

    /// What a Swift type means in a rig file's words.
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
