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
        guard endpoint.count <= 128, let parsed = Endpoint(endpoint), let port = parsed.portNumber else {
            return (nil, "node \(name)'s endpoint \"\(Echo.short(endpoint))\" is not tcp://HOST:PORT")
        }
        // A node bound to every interface is reached at the address its announcement came from.
        let reachable = ["0.0.0.0", "*", ""].contains(parsed.host) ? Endpoint(host: sender, port: "\(port)").description : endpoint
        return (DiscoveredNode(name: name, endpoint: reachable, cameras: cameras, version: version,
                               publicKey: publicKey.isEmpty ? nil : publicKey), nil)
    }

    /// A rig file (version 1) recording from `nodes`; keyed nodes are pinned by public_key and the coordinator's
    /// own pair is named by `coordinatorCert` (a path as the file should say it).
    public static func rigFile(_ nodes: [DiscoveredNode], coordinatorCert: String?, take: TakeOffer? = nil,
                               notAsked: String? = nil) -> String {
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
        return text + takeSection(take, notAsked: notAsked)
    }

    /// The rig file's `take:` section, commented: what every camera offers in common when the nodes were asked,
    /// else coord's own defaults and why the nodes were not asked.
    public static func takeSection(_ offer: TakeOffer?, notAsked: String? = nil) -> String {
        let take = offer ?? TakeOffer(size: "640x480", fps: 30, codec: .mjpeg)
        var text = "take:                            # the take's defaults; --size, --fps, --codec and --name override them\n"
        if offer != nil {
            text += "  size: \(pad(take.size, 29))# the largest size every camera offers\n"
            text += "  fps: \(pad(String(take.fps), 30))# the fastest rate every camera reaches at that size (at most 30)\n"
            text += "  codec: \(pad(take.codec.rawValue, 28))# one every camera can be written in (mjpeg, ffv1 lossless, h264)\n"
        } else {
            text += "  # coord's defaults: the nodes were not asked what their cameras offer\(notAsked.map { " (\($0))" } ?? "");\n"
            text += "  # coord plan --rig THIS_FILE lists each camera's sizes and the rig's budget.\n"
            text += "  size: \(pad(take.size, 29))# WxH\n  fps: \(pad(String(take.fps), 30))# 1 to 240\n"
            text += "  codec: \(pad(take.codec.rawValue, 28))# mjpeg, ffv1 (lossless) or h264\n"
        }
        text += "  name: take                     # take ids are YYYYMMDD-HHMMSS-<name>-<6 hex>\n"
        text += "  takes_dir: ./takes             # relative to this file's directory\n"
        text += "  # seconds: a take records until Ctrl-C (or the console's Stop) unless given --seconds S\n"
        return text
    }

    private static func pad(_ s: String, _ width: Int) -> String {
        s.count >= width ? s + " " : s.padding(toLength: width, withPad: " ", startingAt: 0)
    }

    /// The take every camera can record: the largest size all offer, the fastest rate all reach at it (at most 30
    /// fps), mjpeg when all can write it (else h264, else ffv1); nil when the cameras share no size or codec.
    public static func commonTake(_ cameras: [CameraOffer]) -> TakeOffer? {
        guard !cameras.isEmpty else { return nil }
        var sizes = Set(cameras[0].formats.map { "\($0.width)x\($0.height)" })
        for camera in cameras.dropFirst() { sizes.formIntersection(camera.formats.map { "\($0.width)x\($0.height)" }) }
        func area(_ size: String) -> Int { size.split(separator: "x").compactMap { Int($0) }.reduce(1, *) }
        guard let size = sizes.max(by: { (area($0), $0) < (area($1), $1) }) else { return nil }
        let fps = cameras.map { camera in
            camera.formats.filter { "\($0.width)x\($0.height)" == size && $0.minFramePeriodMicroseconds > 0 }
                .map { Int(1_000_000 / $0.minFramePeriodMicroseconds) }.max() ?? 30
        }.min() ?? 30
        let preferred: [VideoCodec] = [.mjpeg, .h264, .ffv1]
        guard let codec = preferred.first(where: { c in cameras.allSatisfy { $0.codecs.contains(c) } }) else { return nil }
        return TakeOffer(size: size, fps: max(1, min(30, fps)), codec: codec)
    }
}

/// One camera's sizes, fastest frame periods and codecs, as its node's handshake lists them.
public struct CameraOffer: Sendable, Equatable {
    public struct Format: Sendable, Equatable {
        public var width: Int, height: Int, minFramePeriodMicroseconds: UInt64
        public init(width: Int, height: Int, minFramePeriodMicroseconds: UInt64) {
            self.width = width; self.height = height; self.minFramePeriodMicroseconds = minFramePeriodMicroseconds
        }
    }
    public var formats: [Format]
    public var codecs: [VideoCodec]
    public init(formats: [Format], codecs: [VideoCodec]) { self.formats = formats; self.codecs = codecs }
}

/// A take's size, rate and codec as a rig file's `take:` section says them.
public struct TakeOffer: Sendable, Equatable {
    public var size: String, fps: Int, codec: VideoCodec
    public init(size: String, fps: Int, codec: VideoCodec) { self.size = size; self.fps = fps; self.codec = codec }
}

extension DiscoveredNode {

    /// A double-quoted YAML scalar (Z85 keys hold characters YAML would otherwise read).
    static func yamlString(_ s: String) -> String {
        "\"" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }
}

extension DiscoveredNode {
    /// A key as a sentence shows it: its first 8 characters.
    public static func shortKey(_ key: String?) -> String {
        guard let key else { return "(no key)" }
        return key.count > 8 ? String(key.prefix(8)) + "…" : key
    }

    /// One sentence per node name answered under two or more different keys (a node and an impostor, or two
    /// machines given one name): a rig file written from such answers could pin the wrong key.
    public static func keyConflicts(_ nodes: [DiscoveredNode]) -> [String] {
        let byName = Dictionary(grouping: nodes, by: \.name)
        return byName.keys.sorted().compactMap { name in
            var keys: [String?] = []
            for node in byName[name]! where !keys.contains(node.publicKey) { keys.append(node.publicKey) }
            guard keys.count > 1 else { return nil }
            let shown = keys.map { key in
                "\(shortKey(key)) (\(byName[name]!.first { $0.publicKey == key }!.endpoint))"
            }
            return "node \(name) answered with \(keys.count) different keys, \(shown.joined(separator: " and ")): one of them is not the node's own."
        }
    }
}

/// How big an answer to one discovery query may be. A query is a small UDP datagram whose source can be forged, so
/// an answer is reflected at whoever the query names: the node answers with at most
/// `max(floor, factor × query size)` bytes. A normal announcement fits in `floor`; a larger one (many cameras with
/// long names) is answered only to a query padded to a quarter of its size, which `coord discover` sends
/// (`paddedQuery`), so no query buys more than 4 KiB of answer unless it pays for the rest itself.
public enum DiscoveryAnswerSize {
    public static let floor = 4096
    public static let factor = 4
    /// The size `coord discover` pads its query to: answers up to 8 KiB, more than the largest announcement a
    /// node can make (64 cameras of 64-character names).
    public static let paddedQuerySize = 2048
    /// A node never reads a larger query (a padded one is `paddedQuerySize`).
    public static let largestQuery = 4096

    public static func allows(answer: Int, query: Int) -> Bool {
        answer <= max(floor, factor * query)
    }

    /// `query` (a serialized Discovery message) grown to `size` bytes with a length-delimited field numbered 15,
    /// which no version of the message declares: every parser skips it as an unknown field.
    public static func paddedQuery(_ query: [UInt8], to size: Int = paddedQuerySize) -> [UInt8] {
        // tag (15 << 3 | 2) + a two-byte varint length + zeros; a length under 128 would take one byte.
        let room = size - query.count - 3
        guard room >= 128, room < 16384 else { return query }
        return query + [0x7A, UInt8(room & 0x7F) | 0x80, UInt8(room >> 7)] + [UInt8](repeating: 0, count: room)
    }
}

/// Which discovery queries a node answers: a token bucket per sender address (so one flooding sender spends only
/// its own budget and a `coord discover` from anywhere else is still answered), and one for the node as a whole
/// (so queries from forged, ever-changing sources cannot make it answer faster than `totalPerSecond`). The
/// table of senders is bounded: when full, the sender heard from least recently is forgotten (it starts again
/// with a full bucket, which costs at most its burst once more).
public struct DiscoveryBudget: Sendable {
    public struct Limits: Sendable {
        /// Answers one sender may have in a row (`coord discover` sends three queries per run).
        public var senderBurst: Double = 6
        public var senderPerSecond: Double = 3
        public var totalBurst: Double = 50
        public var totalPerSecond: Double = 50
        /// Senders remembered at once.
        public var senders: Int = 256
        public init() {}
    }

    public enum Decision: Sendable, Equatable {
        case answer
        /// This sender spent its own budget.
        case senderOverBudget
        /// The node answered `totalPerSecond` already.
        case nodeOverBudget
    }

    private struct Bucket: Sendable {
        var tokens: Double
        var updated: Int64
        mutating func refill(now: Int64, rate: Double, burst: Double) {
            if now > updated { tokens = min(burst, tokens + Double(now - updated) / 1e6 * rate) }
            updated = max(updated, now)
        }
    }

    public let limits: Limits
    private var senders: [String: Bucket] = [:]
    private var total: Bucket

    public init(limits: Limits = Limits(), now: Int64) {
        self.limits = limits
        total = Bucket(tokens: limits.totalBurst, updated: now)
    }

    /// Senders remembered now (never more than `limits.senders`).
    public var sendersRemembered: Int { senders.count }

    /// Whether to answer a query from `sender` (its address) at `now` (microseconds, monotonic).
    public mutating func admit(sender: String, now: Int64) -> Decision {
        var bucket = senders[sender] ?? Bucket(tokens: limits.senderBurst, updated: now)
        bucket.refill(now: now, rate: limits.senderPerSecond, burst: limits.senderBurst)
        total.refill(now: now, rate: limits.totalPerSecond, burst: limits.totalBurst)
        let decision: Decision
        if bucket.tokens < 1 {
            decision = .senderOverBudget
        } else if total.tokens < 1 {
            decision = .nodeOverBudget
        } else {
            bucket.tokens -= 1
            total.tokens -= 1
            decision = .answer
        }
        if senders[sender] == nil, senders.count >= limits.senders,
           let oldest = senders.min(by: { $0.value.updated < $1.value.updated })?.key {
            senders[oldest] = nil
        }
        senders[sender] = bucket
        return decision
    }
}
