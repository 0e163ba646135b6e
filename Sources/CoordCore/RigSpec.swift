/// A rig described by a rig file (`coord start-take --rig RIG.yaml`): which nodes take part, and the take
/// settings used when the command line does not say. Every key but `nodes` is optional and decoded with
/// `decodeIfPresent`, so a later version can add keys without breaking older files.
public struct RigSpec: Decodable, Equatable, Sendable {
    /// The rig-file version this build reads.
    public static let supportedVersion = 1

    public var version: Int
    public var nodes: [Node]
    public var take: TakeDefaults
    /// What the coordinator does when a node's system pressure rises during a take.
    public var pressure: PressurePolicy
    /// How the coordinator collects the take's files and what nodes do with them afterwards.
    public var collect: CollectPolicy
    /// CURVE keys (CONTRACT §8): the coordinator's certificate; each node then pins its own public key.
    public var security: Security?

    public struct Security: Decodable, Equatable, Sendable {
        /// The coordinator's `NAME.key_secret` (relative paths are read from the rig file's directory).
        public var cert: String
        /// The pair read from `cert` when the rig file is loaded (not a rig-file key).
        public var keys: CurveKeys?

        public init(cert: String, keys: CurveKeys? = nil) { self.cert = cert; self.keys = keys }

        public enum CodingKeys: String, CodingKey, CaseIterable { case cert }

        public init(from decoder: Decoder) throws {
            cert = try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .cert)
        }
    }

    /// What a coordinator's link to `node` is secured with: nil when the rig has no keys.
    public func linkKeys(for node: Node) -> LinkKeys? {
        guard let keys = security?.keys, let serverKey = node.publicKey else { return nil }
        return LinkKeys(serverKey: serverKey, client: keys)
    }

    /// Each node's link keys by endpoint (empty when the rig has no keys).
    public var linkKeysByEndpoint: [String: LinkKeys] {
        var result: [String: LinkKeys] = [:]
        for node in nodes { result[node.endpoint] = linkKeys(for: node) }
        return result
    }

    /// One camera a node entry chooses: a plain name, or a mapping with its priority and limits.
    public struct Camera: Decodable, Equatable, Sendable, ExpressibleByStringLiteral {
        public var name: String
        /// Higher is more important: `coord plan --fit` and the pressure policy degrade the lowest first.
        public var priority: Int
        /// A frame-rate cap: the camera records one group in k, the smallest k with fps / k ≤ max_fps.
        public var maxFPS: Int?
        /// This camera's size, `WxH`, instead of the take's.
        public var size: String?
        /// Picture controls set as the camera opens for a take (exposure_us, gain_db, white_balance_k, focus).
        public var controls: CameraControls?

        public init(name: String, priority: Int = 0, maxFPS: Int? = nil, size: String? = nil, controls: CameraControls? = nil) {
            self.name = name; self.priority = priority; self.maxFPS = maxFPS; self.size = size; self.controls = controls
        }

        public init(stringLiteral name: String) { self.init(name: name) }

        public enum CodingKeys: String, CodingKey, CaseIterable {
            case name, priority
            case maxFPS = "max_fps"
            case size, controls
        }

        public init(from decoder: Decoder) throws {
            // `- cam0` is the camera with every default.
            if let name = try? decoder.singleValueContainer().decode(String.self) {
                self.init(name: name)
                return
            }
            let c = try decoder.container(keyedBy: CodingKeys.self)
            self.init(name: try c.decode(String.self, forKey: .name),
                      priority: try c.decodeIfPresent(Int.self, forKey: .priority) ?? 0,
                      maxFPS: try c.decodeIfPresent(Int.self, forKey: .maxFPS),
                      size: try c.decodeIfPresent(String.self, forKey: .size),
                      controls: try c.decodeIfPresent(CameraControls.self, forKey: .controls))
        }
    }

    /// One capture box: the name it is known by and where its `coord-node` listens.
    public struct Node: Decodable, Equatable, Sendable {
        public var name: String
        public var endpoint: String
        /// Which of the node's cameras to use; nil means all of them.
        public var cameras: [Camera]?
        /// The node's CURVE public key (Z85), pinned: a coordinator talks only to the node holding its secret.
        /// `cert: NAME.key` in the file is read into this when the rig file is loaded.
        public var publicKey: String?
        public var cert: String?

        public init(name: String, endpoint: String, cameras: [Camera]? = nil, publicKey: String? = nil) {
            self.name = name; self.endpoint = endpoint; self.cameras = cameras; self.publicKey = publicKey
        }

        /// The chosen cameras' names, nil for all of them.
        public var cameraNames: [String]? { cameras?.map(\.name) }

        public enum CodingKeys: String, CodingKey, CaseIterable {
            case name, endpoint, cameras
            case publicKey = "public_key"
            case cert
        }

        public init(from decoder: Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            name = try c.decode(String.self, forKey: .name)
            endpoint = try c.decode(String.self, forKey: .endpoint)
            cameras = try c.decodeIfPresent([Camera].self, forKey: .cameras)
            publicKey = try c.decodeIfPresent(String.self, forKey: .publicKey)
            cert = try c.decodeIfPresent(String.self, forKey: .cert)
        }
    }

    /// Take settings the command line may override.
    public struct TakeDefaults: Decodable, Equatable, Sendable {
        /// The whole rate (30 for `29.97`); `rate` is the exact one.
        public var fps: Int?
        /// `fps:` as a non-integer rate (`30000/1001`, `29.97`), CONTRACT §13.
        public var rationalFPS: FrameRate?
        /// The `fps:` the file wrote when it is no frame rate (its reader keeps it for `problem()` to name).
        public var unknownFPS: String?
        /// `WxH`, e.g. `1280x720`.
        public var size: String?
        public var codec: VideoCodec?
        /// The `codec:` the file wrote when it names no codec (its reader keeps it for `problem()` to name).
        public var unknownCodec: String?
        public var name: String?
        /// Where take directories go; a relative path is taken from the rig file's directory.
        public var takesDir: String?
        /// `optional` (default): sound never fails a take; `required`: the take is complete only with all its sound.
        public var audio: String?
        /// What `start-take` and `collect` make after collecting (CONTRACT §10): any of `RigSpec.deliverables`.
        public var deliver: [String]?

        public init(fps: Int? = nil, size: String? = nil, codec: VideoCodec? = nil, name: String? = nil, takesDir: String? = nil) {
            self.fps = fps; self.size = size; self.codec = codec; self.name = name; self.takesDir = takesDir
        }

        public enum CodingKeys: String, CodingKey, CaseIterable {
            case fps, size, codec, name, audio, deliver
            case takesDir = "takes_dir"
        }

        public init(from decoder: Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            if let whole = try? c.decodeIfPresent(Int.self, forKey: .fps) {
                fps = whole
            } else if let written = try c.decodeIfPresent(String.self, forKey: .fps) {
                switch FrameRate.parse(written, field: "take.fps") {
                case .success(let rate): (fps, rationalFPS) = (rate.nominal, rate.isInteger ? nil : rate)
                case .failure: unknownFPS = written
                }
            }
            size = try c.decodeIfPresent(String.self, forKey: .size)
            if let written = try c.decodeIfPresent(String.self, forKey: .codec) {
                codec = VideoCodec(rawValue: written)
                unknownCodec = codec == nil ? written : nil
            }
            name = try c.decodeIfPresent(String.self, forKey: .name)
            takesDir = try c.decodeIfPresent(String.self, forKey: .takesDir)
            audio = try c.decodeIfPresent(String.self, forKey: .audio)
            deliver = try c.decodeIfPresent([String].self, forKey: .deliver)
        }
    }

    public init(version: Int = RigSpec.supportedVersion, nodes: [Node], take: TakeDefaults = TakeDefaults(),
                pressure: PressurePolicy = PressurePolicy(), collect: CollectPolicy = CollectPolicy()) {
        self.version = version; self.nodes = nodes; self.take = take; self.pressure = pressure; self.collect = collect
    }

    public enum CodingKeys: String, CodingKey, CaseIterable {
        case version, nodes, take, pressure, collect, security
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        version = try c.decodeIfPresent(Int.self, forKey: .version) ?? Self.supportedVersion
        nodes = try c.decode([Node].self, forKey: .nodes)
        take = try c.decodeIfPresent(TakeDefaults.self, forKey: .take) ?? TakeDefaults()
        pressure = try c.decodeIfPresent(PressurePolicy.self, forKey: .pressure) ?? PressurePolicy()
        collect = try c.decodeIfPresent(CollectPolicy.self, forKey: .collect) ?? CollectPolicy()
        security = try c.decodeIfPresent(Security.self, forKey: .security)
    }

    /// The rig file's camera entry for a node's camera, if it has one.
    public func camera(_ name: String, ofNode node: String) -> Camera? {
        nodes.first { $0.name == node }?.cameras?.first { $0.name == name }
    }

    /// The keys a rig file may hold at each level, for warning about the others. `nodes[]` is one node entry.
    public static let knownKeys: [String: Set<String>] = [
        "": Set(CodingKeys.allCases.map(\.rawValue)),
        "nodes[]": Set(Node.CodingKeys.allCases.map(\.rawValue)),
        "nodes[].cameras[]": Set(Camera.CodingKeys.allCases.map(\.rawValue)),
        "nodes[].cameras[].controls": Set(CameraControls.Name.allCases.map(\.rawValue)),
        "take": Set(TakeDefaults.CodingKeys.allCases.map(\.rawValue)),
        "pressure": Set(PressurePolicy.CodingKeys.allCases.map(\.rawValue)),
        "collect": Set(CollectPolicy.CodingKeys.allCases.map(\.rawValue)),
        "security": Set(Security.CodingKeys.allCases.map(\.rawValue)),
    ]

    /// What `take.deliver` may list (`coord deliver --to`).
    public static let deliverables = ["mov", "fcpxml", "fcp7xml", "mhl"]

    /// Codecs a take can be written with.
    public static let codecs = VideoCodec.allCases.map(\.rawValue)

    /// What is wrong with the spec: the field at fault (`nodes[1].endpoint`, `take.fps`) and one sentence
    /// naming it; nil if nothing is.
    public func fault() -> (field: String, sentence: String)? {
        if version != Self.supportedVersion {
            return ("version", "version \(version) is not supported: this coord reads rig files of version \(Self.supportedVersion).")
        }
        if nodes.isEmpty { return ("nodes", "nodes is empty: list at least one node with a name and an endpoint.") }
        var names: [String: Int] = [:]
        var endpoints: [String: Int] = [:]
        for (i, node) in nodes.enumerated() {
            let at = "nodes[\(i)]"
            if !RigName.isValid(node.name) {
                return ("\(at).name", "\(at).name \"\(node.name)\" is not allowed: use 1 to 64 of A-Z a-z 0-9 . _ -")
            }
            if let first = names[node.name] {
                return ("\(at).name", "\(at).name \"\(node.name)\" is already the name of nodes[\(first)]; every node needs its own name.")
            }
            names[node.name] = i
            if let problem = Self.endpointProblem(node.endpoint) {
                return ("\(at).endpoint", "\(at).endpoint \"\(node.endpoint)\" (node \(node.name)) \(problem).")
            }
            let key = node.endpoint.lowercased()
            if let first = endpoints[key] {
                return ("\(at).endpoint", "\(at).endpoint \(node.endpoint) (node \(node.name)) is also the endpoint of nodes[\(first)] (node \(nodes[first].name)).")
            }
            endpoints[key] = i
            if let cameras = node.cameras {
                if cameras.isEmpty {
                    return ("\(at).cameras", "\(at).cameras (node \(node.name)) is empty: leave it out to use every camera of the node.")
                }
                var seen = Set<String>()
                for (j, entry) in cameras.enumerated() {
                    let camera = entry.name
                    if !RigName.isValid(camera) {
                        return ("\(at).cameras[\(j)]", "\(at).cameras[\(j)] \"\(camera)\" (node \(node.name)) is not allowed: use 1 to 64 of A-Z a-z 0-9 . _ -")
                    }
                    if !seen.insert(camera).inserted {
                        return ("\(at).cameras[\(j)]", "\(at).cameras[\(j)] names camera \(camera) of node \(node.name) twice.")
                    }
                    if let cap = entry.maxFPS, !(1...240).contains(cap) {
                        return ("\(at).cameras[\(j)].max_fps", "\(at).cameras[\(j)].max_fps (camera \(node.name)/\(camera)) must be between 1 and 240 (got \(cap)).")
                    }
                    if let size = entry.size, Self.parseSize(size) == nil {
                        return ("\(at).cameras[\(j)].size", "\(at).cameras[\(j)].size (camera \(node.name)/\(camera)) must be WxH, e.g. 640x480 (got \"\(size)\").")
                    }
                    if !(-1000...1000).contains(entry.priority) {
                        return ("\(at).cameras[\(j)].priority", "\(at).cameras[\(j)].priority (camera \(node.name)/\(camera)) must be between -1000 and 1000 (got \(entry.priority)).")
                    }
                }
            }
        }
        if let written = take.unknownFPS, case .failure(let problem) = FrameRate.parse(written, field: "take.fps") {
            return ("take.fps", problem.sentence)
        }
        if let fps = take.fps, !(1...240).contains(fps) {
            return ("take.fps", "take.fps must be between 1 and 240 (got \(fps)).")
        }
        if let size = take.size, Self.parseSize(size) == nil {
            return ("take.size", "take.size must be WxH, e.g. 640x480 (got \"\(size)\").")
        }
        if let audio = take.audio, !["optional", "required"].contains(audio) {
            return ("take.audio", "take.audio must be optional or required (got \"\(audio.prefix(64))\").")
        }
        if let codec = take.unknownCodec {
            return ("take.codec", "take.codec must be mjpeg, ffv1 or h264 (got \"\(codec)\").")
        }
        if let name = take.name, let problem = TakeID.problem(withName: name) {
            return ("take.name", "take.name: \(problem)")
        }
        if let item = take.deliver?.first(where: { !Self.deliverables.contains($0) }) {
            return ("take.deliver", "take.deliver: \"\(item.prefix(64))\" is not a deliverable (list any of \(Self.deliverables.joined(separator: ", "))).")
        }
        if let dir = take.takesDir, dir.isEmpty {
            return ("take.takes_dir", "take.takes_dir is empty: leave it out to use ./takes.")
        }
        if !(2...16).contains(pressure.slowRecordEvery) {
            return ("pressure.slow_record_every", "pressure.slow_record_every must be between 2 and 16 (got \(pressure.slowRecordEvery)).")
        }
        // Beyond a finite day they could not become the responder's intervals.
        for (key, seconds) in [("repeat_seconds", pressure.repeatSeconds), ("restore_seconds", pressure.restoreSeconds)]
        where !(0...PressurePolicy.longestWait).contains(seconds) {
            return ("pressure.\(key)", "pressure.\(key) must be between 0 and \(Int(PressurePolicy.longestWait)) (got \(seconds)).")
        }
        if let fault = collect.fault() { return fault }
        for (i, node) in nodes.enumerated() {
            let at = "nodes[\(i)]"
            if node.publicKey != nil && node.cert != nil {
                return ("\(at).cert", "\(at).cert and \(at).public_key are both given: give one (cert: NAME.key is read into public_key).")
            }
            if security == nil, node.publicKey != nil || node.cert != nil {
                let key = node.publicKey != nil ? "public_key" : "cert"
                return ("\(at).\(key)", "\(at).\(key) pins node \(node.name), but the rig has no security.cert (the coordinator's own NAME.key_secret).")
            }
            if security != nil, node.publicKey == nil && node.cert == nil {
                return (at, "\(at) (node \(node.name)) has no public_key: with security.cert set, every node is pinned by public_key: Z85 or cert: NAME.key.")
            }
        }
        return nil
    }

    /// One sentence naming the field at fault, or nil if the spec is usable.
    public func problem() -> String? { fault()?.sentence }

    /// `WxH` → (width, height), both 1…16384; nil if it is not that shape.
    public static func parseSize(_ text: String) -> (width: Int, height: Int)? {
        let parts = text.lowercased().split(separator: "x", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
              let width = Int(parts[0]), let height = Int(parts[1]),
              (1...16384).contains(width), (1...16384).contains(height) else { return nil }
        return (width, height)
    }

    /// Why `endpoint` is not `tcp://host:port`, as the end of a sentence; nil if it is (see `Endpoint.problem`).
    public static func endpointProblem(_ endpoint: String) -> String? { Endpoint.problem(endpoint) }
}

extension RigSpec.TakeDefaults {
    /// The take's rate as the file gives it (CONTRACT §13); nil when it gives none.
    public var rate: FrameRate? { rationalFPS ?? fps.flatMap { FrameRate(numerator: $0, denominator: 1) } }
}
