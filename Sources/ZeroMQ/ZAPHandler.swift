// ZeroMQ's authentication protocol (ZAP, RFC 27): libzmq asks a REP socket at inproc://zeromq.zap.01 of the
// same context whether each CURVE client may connect; until it answers 200 the peer's messages never reach the
// server socket. The handler must be bound before any CURVE server socket of the context binds, and live as long
// as they do (libzmq 4.3 lets every client in when no handler is bound).
import CZeroMQ
import Foundation
import Platform
import Synchronization

public final class ZAPHandler: Sendable {
    /// The ZAP domain every coord CURVE server sets (ZMQ_ZAP_DOMAIN).
    public static let domain = "coord"

    /// What libzmq tells the handler about a peer.
    public struct Request: Sendable {
        /// The peer's IP address.
        public var address: String
        /// "CURVE", "PLAIN" or "NULL".
        public var mechanism: String
        /// The client's public key as Z85 (CURVE only).
        public var publicKey: String?
        public var domain: String
    }

    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    /// Binds the handler's socket on `context` now (so a server bound after this call is covered) and answers on
    /// its own thread, asking `decide` for each request.
    public init(context: ZMQContext, decide: @escaping @Sendable (Request) -> Bool) throws(ZMQError) {
        var options = ZMQSocket.Options()
        options.receiveTimeoutMs = 0
        options.sendTimeoutMs = 200
        options.lingerMs = 0
        let socket = try context.makeSocket(.reply, options: options)
        do {
            try socket.bind("inproc://zeromq.zap.01")
        } catch {
            socket.close()
            throw error
        }
        let thread = Thread { [self] in
            serve(socket, decide: decide)
            socket.close()
            finished.signal()
        }
        thread.name = "zap"
        thread.start()
    }

    /// Stops answering and closes the socket (call before the context ends; returns once closed).
    public func stop() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        finished.wait()
    }

    private func serve(_ socket: ZMQSocket, decide: @Sendable (Request) -> Bool) {
        while !stopped.load(ordering: .relaxed) {
            do {
                guard try socket.poll(timeoutMs: 200).socket, let frames = try socket.receive() else { continue }
                // RFC 27: version, request id, domain, address, identity, mechanism, credentials...
                guard frames.count >= 6, frames[0] == Array("1.0".utf8) else {
                    // A malformed request still needs a reply, or the REP socket stays stuck.
                    try socket.send([Array("1.0".utf8), frames.count > 1 ? frames[1] : [], Array("500".utf8), Array("malformed".utf8), [], []])
                    continue
                }
                let text = { (bytes: [UInt8]) in String(decoding: bytes, as: UTF8.self) }
                let mechanism = text(frames[5])
                let request = Request(address: text(frames[3]), mechanism: mechanism,
                                      publicKey: mechanism == "CURVE" && frames.count > 6 ? CurveKeyPair.z85(frames[6]) : nil,
                                      domain: text(frames[2]))
                let allowed = decide(request)
                try socket.send([Array("1.0".utf8), frames[1], Array((allowed ? "200" : "400").utf8),
                                 Array((allowed ? "OK" : "not authorized").utf8), Array((request.publicKey ?? "").utf8), []])
            } catch {
                // ETERM: the context is ending; anything else is retried after the poll.
                if error.code == czmq_ETERM { return }
            }
        }
    }
}
