/// A node that answered `coord discover`: only what a stranger may see (CONTRACT §7).
public struct DiscoveredNode: Sendable, Equatable, Codable {
    public var name: String
    /// The control endpoint, its host made the address the announcement came from when the node bound 0.0.0.0 or *.
    public var endpoint: String
    public var cameras: [String]
    public var version: String
    /// Z85, nil when the node has no keys.
    public var publicKey: String?

    public init(name: String, endpoint: String, cameras: [String], version: String, publicKey: String?) {
        self.name = name; self.endpoint = endpoint; self.cameras = cameras; self.version = version; self.publicKey = publicKey
    }

    enum CodingKeys: String, CodingKey {
        case name, endpoint, cameras, version
        case publicKey = "public_key"
    }

    /// Every key always present (public_key null for a node without keys).
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(name, forKey: .name)
        try c.encode(endpoint, forKey: .endpoint)
        try c.encode(cameras, forKey: .cameras)
        try c.encode(version, forKey: .version)
        try c.encode(publicKey, forKey: .publicKey)
    }

    /// Checks an announcement's fields as they came off the network, and makes its endpoint reachable: nil with
    /// the reason when a field is not what a node sends.
    public static func checked(name: String, endpoint: String, cameras: [String], version: String, publicKey: String,
                               from sender: String, isKey: (String) -> Bool) -> (node: DiscoveredNode?, problem: String?) {
        guard RigName.isValid(name) else { return (nil, "its node name \"\(Echo.short(name))\" is not allowed") }
        guard cameras.count <= 64, cameras.allSatisfy(RigName.isValid) else { return (nil, "node \(name) lists cameras that are not allowed") }
        guard version.count <= 64, version.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else {
            return (nil, "node \(name)'s version \"\(Echo.short(version))\" is not one")
        }
        guard publicKey.isEmpty || isKey(publicKey) else { return (nil, "node \(name)'s public key is not 40 Z85 characters") }
        guard endpoint.hasPrefix("tcp://"), endpoint.count <= 128, let colon = endpoint.lastIndex(of: ":"),
              let port = Int(endpoint[endpoint.index(after: colon)...]), (1...65535).contains(port) else {
            return (nil, "node \(name)'s endpoint \"\(Echo.short(endpoint))\" is not tcp://HOST:PORT")
        }
        let host = String(endpoint[endpoint.index(endpoint.startIndex, offsetBy: 6)..<colon])
        let reachable = host == "0.0.0.0" || host == "*" || host.isEmpty ? "tcp://\(sender):\(port)" : endpoint
        return (DiscoveredNode(name: name, endpoint: reachable, cameras: cameras, version: version,
                               publicKey: publicKey.isEmpty ? nil : publicKey), nil)
    }

    /// A rig file (version 1) recording from `nodes`; keyed nodes are pinned by public_key and the coordinator's
    /// own pair is named by `coordinatorCert` (a path as the file should say it).
    public static func rigFile(_ nodes: [DiscoveredNode], coordinatorCert: String?) -> String {
        var text = "# Written by coord discover: the nodes that answered on the local network.\n"
        text += "# Check each public_key against the node's own /etc/coord-node/*.key before trusting it.\n"
        text += "version: 1\n"
        let keyed = nodes.contains { $0.publicKey != nil }
        if keyed {
            text += "security:\n  cert: \(yamlString(coordinatorCert ?? "coordinator.key_secret"))   # this coordinator's pair (coord keys new)\n"
        }
        text += "nodes:\n"
        for node in nodes {
            text += "  - name: \(node.name)\n    endpoint: \(yamlString(node.endpoint))\n"
            if let key = node.publicKey { text += "    public_key: \(yamlString(key))\n" }
            if !node.cameras.isEmpty { text += "    cameras: [\(node.cameras.joined(separator: ", "))]\n" }
        }
        return text
    }

    /// A double-quoted YAML scalar (Z85 keys hold characters YAML would otherwise read).
    static func yamlString(_ s: String) -> String {
        "\"" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }
}
