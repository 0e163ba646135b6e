import CoordCore
import CoordWire
import Foundation
import Platform
import SwiftProtobuf
import ZeroMQ

/// `coord discover`: broadcasts a query on every local IPv4 network (and to any address given) and gathers the
/// nodes' announcements for `timeout` seconds. The query is sent three times (UDP may lose one); every reply is
/// checked at the edge, and one that is not what a node sends is set aside with the reason.
public enum NodeDiscovery {
    public struct Result: Sendable {
        public var nodes: [DiscoveredNode] = []
        /// One sentence per announcement that was set aside.
        public var ignored: [String] = []
        /// Where the query went.
        public var targets: [String] = []
    }

    public static let defaultPort: UInt16 = 5710

    public static func find(port: UInt16 = defaultPort, timeout: Double, addresses: [String] = []) throws(UDPError) -> Result {
        let socket = try UDPSocket(port: 0, broadcast: true)
        var result = Result()
        result.targets = addresses.isEmpty ? UDPSocket.broadcastAddresses() : addresses
        let nonce = (0..<16).map { _ in UInt8.random(in: 0...255) }
        // The first query as it always was (a node older than the padding reads at most 256 bytes); the other two
        // padded, so a node may answer with an announcement larger than 4 KiB (DiscoveryAnswerSize).
        let plain = CoordRequest.discoveryQuery(nonce: nonce)
        let padded = DiscoveryAnswerSize.paddedQuery(plain)
        let start = MonotonicClock.now()
        let end = start + Int64(timeout * 1e6)
        var sends = 0
        var seen = Set<String>()
        while true {
            let now = MonotonicClock.now()
            // Three queries spread over the first half of the wait.
            if sends < 3, now >= start + Int64(Double(sends) * timeout * 1e6 / 6) {
                for target in result.targets { socket.send(sends == 0 ? plain : padded, to: .init(host: target, port: port)) }
                sends += 1
            }
            guard now < end else { break }
            let wait = Int32(max(1, min(100, (end - now) / 1000)))
            guard let (bytes, peer, truncated) = socket.receive(timeoutMilliseconds: wait, limit: 65536) else { continue }
            guard !truncated, let reply = try? Coord_V1_Discovery(serializedBytes: bytes),
                  case .announcement(let a)? = reply.body else {
                result.ignored.append("\(peer.host):\(peer.port) answered with something that is not a coord announcement (\(bytes.count) bytes).")
                continue
            }
            guard reply.protocolVersion == Wire.protocolVersion else {
                result.ignored.append("\(peer.host) speaks discovery version \(reply.protocolVersion), this coord \(Wire.protocolVersion).")
                continue
            }
            guard a.nonce == Data(nonce) else { continue }  // an answer to someone else's query
            let checked = DiscoveredNode.checked(name: a.node, endpoint: a.endpoint, cameras: a.cameras, version: a.agentVersion,
                                                 publicKey: a.publicKey, from: peer.host, isKey: CurveKeyPair.isZ85Key)
            guard let node = checked.node else {
                result.ignored.append("\(peer.host) was set aside: \(checked.problem ?? "its announcement is not valid").")
                continue
            }
            // Keyed too: a second key for one name is kept, so the command can tell the operator.
            if seen.insert("\(node.name) \(node.endpoint) \(node.publicKey ?? "")").inserted { result.nodes.append(node) }
        }
        result.nodes.sort { ($0.name, $0.endpoint) < ($1.name, $1.endpoint) }
        return result
    }

    /// The take every camera of the rig can record (`DiscoveredNode.commonTake`), asked of each node over a
    /// handshake; else nil and why the nodes could not be asked, as a clause.
    public static func commonTake(_ spec: RigSpec) async -> (take: TakeOffer?, notAsked: String?) {
        let context = ZMQContext()
        do {
            let links = try spec.nodes.map { try NodeLink(endpoint: $0.endpoint, name: $0.name, context: context, keys: spec.linkKeys(for: $0)) }
            defer { links.forEach { $0.close() } }
            let hellos = try await TakeSession.handshake(links)
            let cameras = hellos.flatMap { $0.reply.cameras }.map { camera in
                CameraOffer(formats: camera.formats.map {
                    .init(width: Int($0.width), height: Int($0.height), minFramePeriodMicroseconds: $0.minFramePeriodUs)
                }, codecs: camera.codecs.compactMap(VideoCodec.init(rawValue:)))
            }
            guard let take = DiscoveredNode.commonTake(cameras) else { return (nil, "the cameras share no size and codec") }
            return (take, nil)
        } catch let error as CoordError {
            return (nil, error.message.hasSuffix(".") ? String(error.message.dropLast()) : error.message)
        } catch {
            return (nil, "\(error)")
        }
    }

    /// The nodes as `coord discover` prints them.
    public static func table(_ nodes: [DiscoveredNode]) -> String {
        var rows = [["node", "endpoint", "cameras", "version", "public key"]]
        for n in nodes {
            rows.append([n.name, n.endpoint, n.cameras.isEmpty ? "-" : n.cameras.joined(separator: ","), n.version, n.publicKey ?? "(none: no keys)"])
        }
        let widths = (0..<5).map { i in rows.map { $0[i].count }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { i, cell in i == 4 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0) }
                .joined(separator: "  ")
        }.joined(separator: "\n")
    }
}
