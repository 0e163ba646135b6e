import CoordCore
import CoordWire
import Foundation
import Logging
import Platform
import SwiftProtobuf
import Synchronization

/// Answers `coord discover`'s broadcast queries on UDP (CONTRACT §7) with one announcement each: the node's name,
/// control endpoint, cameras, version and public key, nothing more. Runs on its own thread, only while the node's
/// control endpoint is one other machines can reach; answers at most `repliesPerSecond` queries a second, so it
/// cannot be turned into a flood.
final class DiscoveryResponder: Sendable {
    static let repliesPerSecond = 20
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
        var windowStart = MonotonicClock.now()
        var answered = 0
        while !stopped.withLock({ $0 }) {
            guard let (bytes, peer, truncated) = socket.receive(timeoutMilliseconds: 300, limit: 256), !truncated,
                  let query = try? Coord_V1_Discovery(serializedBytes: bytes), query.protocolVersion == Wire.protocolVersion,
                  case .query(let q)? = query.body, q.nonce.count <= 32 else { continue }
            let now = MonotonicClock.now()
            if now - windowStart >= 1_000_000 { (windowStart, answered) = (now, 0) }
            guard answered < Self.repliesPerSecond else { continue }
            answered += 1
            var reply = Coord_V1_Discovery()
            reply.protocolVersion = Wire.protocolVersion
            var a = announcement
            a.nonce = q.nonce
            reply.body = .announcement(a)
            if let data = try? reply.serializedBytes() as [UInt8] { socket.send(data, to: peer) }
        }
    }
}
