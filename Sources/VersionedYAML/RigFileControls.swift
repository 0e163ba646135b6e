import CoordCore
import Yams

/// A rig file with the cameras' controls written in, so the controls an operator settles on in the console become
/// every take's defaults without hand-editing: each named camera's `controls:` set (a camera listed by name alone
/// becomes `{name, controls}`; a node that listed no cameras gets the list of the cameras given). Everything else
/// in the file is kept as YAML, but not its comments.
public enum RigFileControls {
    public struct Camera: Sendable {
        public var name: String
        public var controls: CameraControls
        public init(name: String, controls: CameraControls) { self.name = name; self.controls = controls }
    }

    /// `text` (read from `path`) with the controls of `cameras` (by node name) in it.
    public static func text(_ text: String, path: String, cameras: [String: [Camera]]) throws(YAMLFileError) -> String {
        let parsed: Node?
        do { parsed = try Yams.compose(yaml: text) } catch { throw .init("\(path) is not valid YAML any more: \(error).") }
        guard var root = parsed, case .sequence(var nodes)? = root["nodes"] else {
            throw .init("\(path) has no nodes: list any more; the controls have nowhere to go.")
        }
        for i in nodes.indices {
            guard let name = nodes[i]["name"]?.string, let wanted = cameras[name], !wanted.isEmpty else { continue }
            var list: [Node] = nodes[i]["cameras"]?.sequence.map(Array.init) ?? []
            for camera in wanted where !camera.controls.isEmpty {
                let controls = node(camera.controls)
                if let j = list.firstIndex(where: { $0.string == camera.name || $0["name"]?.string == camera.name }) {
                    if list[j].string != nil {
                        list[j] = Node([(Node("name"), Node(camera.name)), (Node("controls"), controls)])
                    } else {
                        list[j]["controls"] = controls
                    }
                } else if nodes[i]["cameras"] == nil {
                    list.append(Node([(Node("name"), Node(camera.name)), (Node("controls"), controls)]))
                }
            }
            nodes[i]["cameras"] = Node(list)
        }
        root["nodes"] = .sequence(nodes)
        do { return try Yams.serialize(node: root) } catch { throw .init("\(path) cannot be written back as YAML: \(error).") }
    }

    /// The controls as a mapping in the rig file's key names.
    static func node(_ c: CameraControls) -> Node {
        var pairs: [(Node, Node)] = []
        if let v = c.exposureMicroseconds { pairs.append((Node(CameraControls.Name.exposure.rawValue), Node(String(v)))) }
        if let v = c.gainDecibels { pairs.append((Node(CameraControls.Name.gain.rawValue), Node(String(v)))) }
        if let v = c.whiteBalanceKelvin { pairs.append((Node(CameraControls.Name.whiteBalance.rawValue), Node(String(v)))) }
        if let v = c.focus { pairs.append((Node(CameraControls.Name.focus.rawValue), Node(String(v)))) }
        return Node(pairs)
    }
}
