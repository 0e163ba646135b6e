import CoordCore
import CoordWire
import Foundation
import Logging
import Platform
import SwiftProtobuf
import Synchronization

/// Answers `coord discover`'s broadcast queries on UDP (CONTRACT §7) with one announcement each: the node's name,
/// control endpoint, cameras, version and public key, nothing more. Runs on its own thread, only while the node's
/// control endpoint is one other machines can reach. Each sender address has its own budget of answers and the node
/// one for all (`DiscoveryBudget`), so one flooding sender cannot starve the others; and no answer is larger than
/// `DiscoveryAnswerSize` allows for the query's size, so the node cannot be used to amplify a flood.
final class DiscoveryResponder: Sendable {
    private let socket: UDPSocket
    private let announcement: Coord_V1_Announcement
    private let logger: Logger
    private let stopped = Mutex(false)

    init(port: UInt16, announcement: Coord_V1_Announcement, logger: Logger) throws(UDPError) {
        socket = try UDPSocket(port: port, shared: true)
        self.announcement = announcement
        self.logger = logger
    }

    var port: UInt16 { socket.port }

    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "node-discovery"
        thread.start()
    }

    func stop() { stopped.withLock { $0 = true } }

    private func run() {
        var budget = DiscoveryBudget(now: MonotonicClock.now())
        var refusals = RepeatLimiter()
        while !stopped.withLock({ $0 }) {
            guard let (bytes, peer, truncated) = socket.receive(timeoutMilliseconds: 300, limit: DiscoveryAnswerSize.largestQuery),
                  !truncated, let query = try? Coord_V1_Discovery(serializedBytes: bytes),
                  query.protocolVersion == Wire.protocolVersion,
                  case .query(let q)? = query.body, q.nonce.count <= 32 else { continue }
            let now = MonotonicClock.now()
            let decision = budget.admit(sender: peer.host, now: now)
            guard decision == .answer else {
                let bySender = decision == .senderOverBudget
                let why = bySender ? "this sender asks more than \(Int(budget.limits.senderPerSecond)) times a second"
                    : "the node answers at most \(Int(budget.limits.totalPerSecond)) queries a second"
                // Once a minute per flooding sender, and once for the node's own budget (forged sources are many).
                if case .log(let heldBack) = refusals.admit(bySender ? "sender \(peer.host)" : "node", now: now) {
                    logger.warning("discovery queries not answered: over budget", metadata: [
                        "address": "\(peer.host)", "why": "\(why)", "unanswered_since_last_line": "\(heldBack)",
                    ])
                }
                continue
            }
            var reply = Coord_V1_Discovery()
            reply.protocolVersion = Wire.protocolVersion
            var a = announcement
            a.nonce = q.nonce
            reply.body = .announcement(a)
            guard let data = try? reply.serializedBytes() as [UInt8] else { continue }
            guard DiscoveryAnswerSize.allows(answer: data.count, query: bytes.count) else {
                if case .log = refusals.admit("size \(peer.host)", now: now) {
                    logger.warning("a discovery query was not answered: the announcement of \(data.count) bytes is more than \(DiscoveryAnswerSize.factor) times the query's \(bytes.count) bytes (a coord discover older than this node does not pad its query)",
                                   metadata: ["address": "\(peer.host)"])
                }
                continue
            }
            socket.send(data, to: peer)
        }
    }
}
