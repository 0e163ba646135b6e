import CoordCore
import Foundation
import Platform
import VersionedYAML
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
        let text: String
        do { text = try VersionedYAML.read(path, kind: "rig file") } catch { throw CoordError(.usage, error.description) }
        return try parse(text, path: path)
    }

    /// Parses rig-file text; `path` only names the file in messages (and is where relative key paths start).
    public static func parse(_ text: String, path: String) throws -> RigFile {
        do {
            let file = try VersionedYAML(text: text, path: path, kind: "rig file", version: RigSpec.supportedVersion,
                                         topKeys: "version, nodes and take (see /usr/share/doc/coord/examples/rig.example.yaml)", knownKeys: RigSpec.knownKeys)
            let spec = try file.decode(RigSpec.self, missing: [
                "nodes": "the key nodes is missing: list the rig's nodes, each with a name and an endpoint.",
            ])
            if let fault = spec.fault() { throw file.fault(fault.field, fault.sentence) }
            return RigFile(path: path, spec: try readKeys(spec, file: file), warnings: file.warnings)
        } catch {
            throw CoordError(.usage, "\(error)")
        }
    }

    /// Reads the certificates a rig file names (relative to its directory) and checks every pinned key, so a
    /// wrong key is one sentence before any node is contacted, never a silent timeout.
    static func readKeys(_ spec: RigSpec, file: VersionedYAML) throws(YAMLFileError) -> RigSpec {
        guard let security = spec.security else { return spec }
        var spec = spec
        let base = URL(fileURLWithPath: file.path).deletingLastPathComponent()
        func resolve(_ path: String) -> String { path.hasPrefix("/") ? path : base.appendingPathComponent(path).path }
        let fail = file.fault
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

    /// Where relative paths in the file are taken from.
    public var directory: URL { URL(fileURLWithPath: path).deletingLastPathComponent() }
}
