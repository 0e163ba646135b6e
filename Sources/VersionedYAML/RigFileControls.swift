import CoordCore

/// A YAML document's nodes and where each lies in its text, read by `VersionedYAML.outline` (libyaml's own marks:
/// offsets and columns in Unicode scalars, an anchor or tag counted as part of its node).
public struct YAMLOutline: Sendable {
    public enum Kind: Sendable { case scalar, mapping, sequence, alias }
    public struct Item: Sendable {
        public var kind: Kind
        public var start: Int
        public var end: Int
        public var column: Int
        /// A collection written in `{…}`/`[…]`.
        public var flow = false
        /// A scalar's value (quotes and escapes resolved), and whether it was written plain (unquoted).
        public var value = ""
        public var plain = false
        /// A collection's items: a mapping's as key, value, key, value.
        public var children: [Int] = []
    }
    public var items: [Item] = []
    public var root: Int?

    /// The key item and value item of `key` in mapping `mapping`.
    func entry(_ key: String, in mapping: Int) -> (key: Int, value: Int)? {
        let item = items[mapping]
        guard item.kind == .mapping else { return nil }
        for pair in stride(from: 0, to: item.children.count - 1, by: 2) {
            let k = item.children[pair]
            if items[k].kind == .scalar && items[k].value == key { return (k, item.children[pair + 1]) }
        }
        return nil
    }

    /// Where the last value of a block collection ends (its last leaf's end); a scalar's or flow collection's own end.
    func lastLeafEnd(_ index: Int) -> Int {
        let item = items[index]
        guard (item.kind == .mapping || item.kind == .sequence) && !item.flow, let last = item.children.last else { return item.end }
        return lastLeafEnd(last)
    }
}

/// A rig file with the cameras' controls written in, so the controls an operator settles on in the console become
/// every take's defaults without hand-editing. The file's text is edited in place — only the control values that
/// change are replaced or inserted (under each camera's `controls:`; a camera listed by name alone becomes
/// `{name, controls}`; a node that listed no cameras gets the list of the cameras given) — so every comment, blank
/// line, key order and other value stays as the operator wrote it. The result must load as exactly the file's rig
/// with those controls, or nothing is returned but one sentence.
public enum RigFileControls {
    public struct Camera: Sendable {
        public var name: String
        public var controls: CameraControls
        public init(name: String, controls: CameraControls) { self.name = name; self.controls = controls }
    }

    /// `text` (read from `path`) with the controls of `cameras` (by node name, each node's cameras in the rig's
    /// order; a camera with no controls only completes a node's list) in it.
    public static func text(_ text: String, path: String, cameras: [String: [Camera]]) throws(YAMLFileError) -> String {
        let before: RigSpec
        do throws(YAMLFileError) { before = try spec(text, path: path) } catch {
            throw .init("\(error.description.hasSuffix(".") ? String(error.description.dropLast()) : error.description), so the controls were not written into it.")
        }
        guard let outline = VersionedYAML.outline(text), let root = outline.root,
              let nodes = outline.entry("nodes", in: root)?.value, outline.items[nodes].kind == .sequence else {
            throw .init("\(path) has no nodes: list any more; the controls have nowhere to go.")
        }
        var editor = Editor(text: text, outline: outline)
        for node in outline.items[nodes].children {
            guard let nameItem = outline.entry("name", in: node)?.value,
                  let wanted = cameras[outline.items[nameItem].value], wanted.contains(where: { !$0.controls.isEmpty }) else { continue }
            let spec = before.nodes.first { $0.name == outline.items[nameItem].value }
            editor.write(wanted, intoNode: node, spec: spec)
        }
        let edited = editor.result()
        let after: RigSpec
        do throws(YAMLFileError) { after = try spec(edited, path: path) } catch {
            throw .init("\(path) with the controls written into its text would not load (\(error.description)), so it was left as it is.")
        }
        guard after == expected(before, cameras: cameras) else {
            throw .init("\(path): writing the controls into its text in place would change more than those controls (a YAML anchor shared by several entries?), so it was left as it is; set them there by hand.")
        }
        return edited
    }

    /// The rig `text` describes, read as the rig-file loader reads it (certificates aside).
    static func spec(_ text: String, path: String) throws(YAMLFileError) -> RigSpec {
        let file = try VersionedYAML(text: text, path: path, kind: "rig file", version: RigSpec.supportedVersion,
                                     topKeys: "version, nodes and take", knownKeys: RigSpec.knownKeys)
        return try file.decode(RigSpec.self)
    }

    /// The rig `before` with the controls of `cameras` set: what the edited text must load as.
    static func expected(_ before: RigSpec, cameras: [String: [Camera]]) -> RigSpec {
        var rig = before
        for i in rig.nodes.indices {
            guard let wanted = cameras[rig.nodes[i].name], wanted.contains(where: { !$0.controls.isEmpty }) else { continue }
            guard var list = rig.nodes[i].cameras else {
                rig.nodes[i].cameras = wanted.map { RigSpec.Camera(name: $0.name, controls: $0.controls.isEmpty ? nil : $0.controls) }
                continue
            }
            for camera in wanted where !camera.controls.isEmpty {
                guard let j = list.firstIndex(where: { $0.name == camera.name }) else { continue }
                list[j].controls = (list[j].controls ?? CameraControls()).updated(with: camera.controls)
            }
            rig.nodes[i].cameras = list
        }
        return rig
    }

    /// The controls as the rig file writes them, in its key names and order.
    static func pairs(_ c: CameraControls) -> [(String, String)] {
        var pairs: [(String, String)] = []
        if let v = c.exposureMicroseconds { pairs.append((CameraControls.Name.exposure.rawValue, String(v))) }
        if let v = c.gainDecibels { pairs.append((CameraControls.Name.gain.rawValue, number(v))) }
        if let v = c.whiteBalanceKelvin { pairs.append((CameraControls.Name.whiteBalance.rawValue, String(v))) }
        if let v = c.focus { pairs.append((CameraControls.Name.focus.rawValue, number(v))) }
        return pairs
    }

    static func flowMapping(_ pairs: [(String, String)]) -> String {
        "{" + pairs.map { "\($0.0): \($0.1)" }.joined(separator: ", ") + "}"
    }

    /// A double as a YAML float that reads back as exactly it: shortest digits, never an exponent (1e-05 → 0.00001);
    /// zero as 0.0 whatever its sign (a -0.0 from a slider or a JSON body is the same setting).
    static func number(_ v: Double) -> String {
        let text = v == 0 ? "0.0" : "\(v)"
        guard let e = text.firstIndex(where: { $0 == "e" || $0 == "E" }), let exponent = Int(text[text.index(after: e)...]) else { return text }
        var mantissa = String(text[..<e])
        let negative = mantissa.hasPrefix("-")
        if negative { mantissa.removeFirst() }
        let parts = mantissa.split(separator: ".", omittingEmptySubsequences: false)
        var digits = String(parts[0]) + (parts.count > 1 ? String(parts[1]) : "")
        var point = parts[0].count + exponent
        while digits.count > 1 && digits.hasSuffix("0") && digits.count > point { digits.removeLast() }
        if point <= 0 {
            digits = String(repeating: "0", count: 1 - point) + digits
            point = 1
        } else if point >= digits.count {
            digits += String(repeating: "0", count: point - digits.count + 1)
        }
        let whole = digits.prefix(point), fraction = digits.dropFirst(point)
        return (negative ? "-" : "") + whole + "." + (fraction.isEmpty ? "0" : fraction)
    }

    /// A camera name as a YAML string: plain when YAML reads it back as that text, else in double quotes.
    static func name(_ name: String) -> String {
        let words: Set<String> = ["y", "n", "yes", "no", "on", "off", "true", "false", "null"]
        let plain = name.first.map { $0.isLetter || $0 == "_" } ?? false
            && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }
            && !words.contains(name.lowercased())
        if plain { return name }
        return "\"" + name.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    /// Replacements and insertions in the file's text, at libyaml's offsets, applied last to first.
    struct Editor {
        let scalars: [Unicode.Scalar]
        let outline: YAMLOutline
        /// libyaml does not count a byte-order mark.
        let base: Int
        let newline: String
        var edits: [(start: Int, end: Int, text: String, order: Int)] = []

        init(text: String, outline: YAMLOutline) {
            scalars = Array(text.unicodeScalars)
            self.outline = outline
            base = scalars.first == "\u{FEFF}" ? 1 : 0
            newline = text.contains("\r\n") ? "\r\n" : "\n"
        }

        mutating func replace(_ item: Int, with text: String) {
            let i = outline.items[item]
            edits.append((i.start, i.end, text, edits.count))
        }

        mutating func insert(_ text: String, at offset: Int) {
            edits.append((offset, offset, text, edits.count))
        }

        func source(_ item: Int) -> String {
            let i = outline.items[item]
            var s = String.UnicodeScalarView()
            s.append(contentsOf: scalars[(base + i.start)..<(base + i.end)])
            return String(s)
        }

        /// Adds `pairs` (key, value text) at the end of `mapping`, in its own style.
        mutating func add(_ pairs: [(String, String)], to mapping: Int) {
            guard !pairs.isEmpty else { return }
            let m = outline.items[mapping]
            let entries = pairs.map { "\($0.0): \($0.1)" }
            if m.flow {
                // Right after the last value (before any space or comment that precedes `}`), or inside `{}`.
                if let last = m.children.last {
                    insert(", " + entries.joined(separator: ", "), at: outline.items[last].end)
                } else {
                    insert(entries.joined(separator: ", "), at: m.end - 1)
                }
                return
            }
            // A line of its own for each, indented as the mapping's keys, after the line its last value ends on.
            let indent = String(repeating: " ", count: outline.items[m.children[0]].column)
            var at = base + outline.lastLeafEnd(mapping)
            if at > base, at <= scalars.count, scalars[at - 1] == "\n" || scalars[at - 1] == "\r" {
                insert(entries.map { indent + $0 + newline }.joined(), at: at - base)
                return
            }
            while at < scalars.count && scalars[at] != "\n" { at += 1 }
            if at < scalars.count {
                insert(entries.map { indent + $0 + newline }.joined(), at: at + 1 - base)
            } else {
                insert(entries.map { newline + indent + $0 }.joined(), at: at - base)
            }
        }

        /// Replaces the value of `key` (an empty one: after its colon) with `text`.
        mutating func setValue(ofKey key: Int, value: Int, to text: String) {
            let v = outline.items[value]
            if v.kind == .scalar && v.start == v.end {
                var at = base + outline.items[key].end
                while at < scalars.count && scalars[at] != ":" { at += 1 }
                insert(" " + text, at: at + 1 - base)
            } else {
                replace(value, with: text)
            }
        }

        /// Writes each wanted camera's controls into node entry `node` (`spec`: the node as the file read).
        mutating func write(_ wanted: [Camera], intoNode node: Int, spec: RigSpec.Node?) {
            guard let list = outline.entry("cameras", in: node), outline.items[list.value].kind == .sequence else {
                let cameras = "[" + wanted.map { c in
                    c.controls.isEmpty ? RigFileControls.name(c.name)
                        : "{name: \(RigFileControls.name(c.name)), controls: \(RigFileControls.flowMapping(RigFileControls.pairs(c.controls)))}"
                }.joined(separator: ", ") + "]"
                if let list = outline.entry("cameras", in: node) {
                    setValue(ofKey: list.key, value: list.value, to: cameras)
                } else {
                    add([("cameras", cameras)], to: node)
                }
                return
            }
            for camera in wanted where !camera.controls.isEmpty {
                let entry = outline.items[list.value].children.first { i in
                    let item = outline.items[i]
                    if item.kind == .scalar { return item.value == camera.name }
                    return outline.entry("name", in: i).map { outline.items[$0.value].value == camera.name } ?? false
                }
                guard let entry else { continue }
                if outline.items[entry].kind == .scalar {
                    replace(entry, with: "{name: \(source(entry)), controls: \(RigFileControls.flowMapping(RigFileControls.pairs(camera.controls)))}")
                    continue
                }
                guard let controls = outline.entry("controls", in: entry) else {
                    add([("controls", RigFileControls.flowMapping(RigFileControls.pairs(camera.controls)))], to: entry)
                    continue
                }
                guard outline.items[controls.value].kind == .mapping else {
                    // Null, an alias or anything else: the whole set written out here.
                    let old = spec?.cameras?.first { $0.name == camera.name }?.controls ?? CameraControls()
                    setValue(ofKey: controls.key, value: controls.value, to: RigFileControls.flowMapping(RigFileControls.pairs(old.updated(with: camera.controls))))
                    continue
                }
                var missing: [(String, String)] = []
                for (key, text) in RigFileControls.pairs(camera.controls) {
                    guard let present = outline.entry(key, in: controls.value) else { missing.append((key, text)); continue }
                    let old = outline.items[present.value]
                    if old.kind == .scalar && old.plain && Self.same(old.value, text) { continue }
                    setValue(ofKey: present.key, value: present.value, to: text)
                }
                add(missing, to: controls.value)
            }
        }

        /// Whether the file's plain number already is the value to be written.
        static func same(_ written: String, _ text: String) -> Bool {
            if let a = Int(written), let b = Int(text) { return a == b }
            if let a = Double(written), let b = Double(text) { return a == b }
            return false
        }

        func result() -> String {
            var out = String.UnicodeScalarView()
            var cursor = scalars.count
            var pieces: [String.UnicodeScalarView] = []
            for edit in edits.sorted(by: { ($0.start, $0.order) > ($1.start, $1.order) }) {
                let start = base + edit.start, end = min(base + edit.end, cursor)
                guard start <= end else { continue }
                var tail = String.UnicodeScalarView()
                tail.append(contentsOf: scalars[end..<cursor])
                pieces.append(tail)
                pieces.append(edit.text.unicodeScalars)
                cursor = start
            }
            out.append(contentsOf: scalars[0..<cursor])
            for piece in pieces.reversed() { out.append(contentsOf: piece) }
            return String(out)
        }
    }
}
