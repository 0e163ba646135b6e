import CoordCore
import CoordWire
import Foundation
import Platform
import Synchronization
import ZeroMQ

/// The coordinator's connection to one node agent: a DEALER socket owned by one thread. Callers `request`
/// from any task; the link's thread sends, receives and matches replies by request id. Clock probes get
/// their t1 and t4 stamped on that thread, right at the socket.
// The socket belongs to the link's thread (only its closure holds it); the queue and the name are in `state`.
public final class NodeLink: Sendable {
    public let endpoint: String
    /// The node's name once the handshake told it; the endpoint until then.
    public var name: String { state.withLock { $0.name } }

    private struct Outgoing {
        var id: UInt64
        var envelope: Envelope
        var deadline: Int64
        var continuation: CheckedContinuation<(Envelope, receivedAt: Int64), Error>
        var what: String
        var timeout: Double
    }

    private let context: ZMQContext
    private let wake = WakeSignal()
    private struct State {
        var name: String
        var outgoing: [Outgoing] = []
        var closing = false
        var nextID: UInt64 = 1
    }
    private let state: Mutex<State>
    private let finished = DispatchSemaphore(value: 0)
    /// Said after "did not answer" on a CURVE link: a key mismatch looks exactly like silence.
    private let silenceHint: String

    /// `name`: the node's name in the rig file, so that every sentence names it even before the handshake.
    /// `keys`: CURVE (the node's pinned public key and the coordinator's pair); nil talks in the clear.
    public init(endpoint: String, name: String? = nil, context: ZMQContext, keys: LinkKeys? = nil) throws {
        self.endpoint = endpoint
        self.state = Mutex(State(name: name ?? endpoint))
        self.context = context
        var options = ZMQSocket.Options()
        options.receiveTimeoutMs = 0
        options.sendTimeoutMs = 0
        options.lingerMs = 0  // unsent requests to a vanished node are worthless; never hold up exit
        options.curve = keys.map(ZMQSocket.Curve.init)
        silenceHint = keys == nil ? "" : " (With keys, a node also stays silent when its --authorized directory lacks this coordinator's "
            + "public key or the rig file pins a key other than the node's own.)"
        let socket = try context.makeSocket(.dealer, options: options)
        do {
            try socket.connect(endpoint)
        } catch {
            socket.close()
            throw CoordError(.usage, "cannot connect to \(name.map { "node \($0) at " } ?? "node endpoint ")\(endpoint): \(error)", node: name)
        }
        let thread = Thread { [self] in serve(socket) }
        thread.name = "link-\(endpoint)"
        thread.start()
    }

    /// How messages name this node: by name once the handshake told it, by endpoint before.
    var who: String { let name = self.name; return name == endpoint ? "node at \(endpoint)" : "node \(name) at \(endpoint)" }

    /// The node's name, for an error's subject; nil while only its endpoint is known.
    var named: String? { let name = self.name; return name == endpoint ? nil : name }

    func setName(_ name: String) { state.withLock { $0.name = name } }

    /// Sends one request and waits for its reply. An `Error` reply throws a `CoordError` naming the node.
    public func request(_ body: Envelope.OneOf_Body, timeout: Double, what: String) async throws -> (Envelope, receivedAt: Int64) {
        do {
            return try await ask(body, timeout: timeout, what: what)
        } catch let refusal as NodeRefusal {
            throw refusal.coordError
        }
    }

    /// As `request`, but an `Error` reply throws a `NodeRefusal` that keeps the node's error code.
    public func ask(_ body: Envelope.OneOf_Body, timeout: Double, what: String) async throws -> (Envelope, receivedAt: Int64) {
        let (envelope, received) = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<(Envelope, receivedAt: Int64), Error>) in
            let queued = state.withLock { state -> Bool in
                guard !state.closing else { return false }
                let id = state.nextID
                state.nextID += 1
                state.outgoing.append(Outgoing(id: id, envelope: Wire.envelope(id, body), deadline: MonotonicClock.now() + Int64(timeout * 1e6),
                                               continuation: continuation, what: what, timeout: timeout))
                return true
            }
            guard queued else {
                continuation.resume(throwing: CoordError(.failure, "link to \(who) is closed.", node: named))
                return
            }
            wake.signal()
        }
        if case .error(let e) = envelope.body {
            throw NodeRefusal(node: name, what: what, failure: NodeFailure(NodeFailure.Code(wire: e.code), e.message))
        }
        return (envelope, received)
    }

    /// One NTP-style exchange; t1 and t4 are read on the link's thread right at send and receive.
    public func probe(timeout: Double = 1) async throws -> ClockProbeSample {
        let (reply, t4) = try await request(.clockProbe(Coord_V1_ClockProbe()), timeout: timeout, what: "a clock probe")
        guard case .clockProbeReply(let r) = reply.body else {
            throw CoordError(.failure, "node \(name) answered a clock probe with something else.", node: named)
        }
        do throws(FieldFault) {
            return try NodeReply.clockProbe(r, receivedAt: t4, from: who)
        } catch {
            throw CoordError(error, node: named)
        }
    }

    public func close() {
        let wasClosing = state.withLock { state in
            defer { state.closing = true }
            return state.closing
        }
        guard !wasClosing else { return }
        wake.signal()
        finished.wait()
    }

    /// Request ids with this bit set are a clock probe's warm-up exchange (never a caller's request).
    private static let warmUpBit: UInt64 = 1 << 63

    /// Sends `envelope` on behalf of `o`; on failure resumes `o` with the error and returns false.
    private func send(_ envelope: Envelope, for o: Outgoing, on socket: ZMQSocket) -> Bool {
        do {
            if try socket.send([Wire.encode(envelope)]) { return true }
            o.continuation.resume(throwing: CoordError(.failure, "\(who) is not accepting messages (send queue full).", node: named))
        } catch {
            o.continuation.resume(throwing: CoordError(.failure, "sending \(o.what) to \(who) failed: \(error)", node: named))
        }
        return false
    }

    private func serve(_ socket: ZMQSocket) {
        // This thread stamps t1 and t4 of every clock probe: it must wake promptly under load.
        ThreadPriority.nameCurrentThread("link")
        ThreadPriority.raiseCurrentThread()
        var waiting: [UInt64: Outgoing] = [:]
        // Clock probes whose warm-up exchange is in flight, by the warm-up's request id.
        var warming: [UInt64: Outgoing] = [:]
        defer {
            socket.close()
            // Closing from here on, however the loop ended: a request asked later is refused at once, never queued
            // for a thread that is gone (its caller would wait forever).
            let left = state.withLock { state in
                defer { state.outgoing.removeAll(); state.closing = true }
                return state.outgoing
            }
            for o in left { o.continuation.resume(throwing: CoordError(.failure, "link to \(who) closed before \(o.what) was sent.", node: named)) }
            for (_, o) in waiting { o.continuation.resume(throwing: CoordError(.failure, "link to \(who) closed while waiting for \(o.what).", node: named)) }
            for (_, o) in warming { o.continuation.resume(throwing: CoordError(.failure, "link to \(who) closed while waiting for \(o.what).", node: named)) }
            finished.signal()
        }
        while true {
            let (toSend, stop) = state.withLock { state in
                defer { state.outgoing.removeAll() }
                return (state.outgoing, state.closing)
            }
            if stop { return }

            for o in toSend {
                if case .clockProbe = o.envelope.body {
                    // A probe after a quiet spell would find every thread on its path asleep on the way out and
                    // awake on the way back (they just handled it): an asymmetry of ~100 µs on an idle host.
                    // So an unstamped warm-up exchange goes first, and the probe follows its reply at once.
                    let warmUpID = o.id | Self.warmUpBit
                    if send(Wire.envelope(warmUpID, .clockProbe(Coord_V1_ClockProbe())), for: o, on: socket) {
                        warming[warmUpID] = o
                    }
                    continue
                }
                if send(o.envelope, for: o, on: socket) { waiting[o.id] = o }
            }

            let now = MonotonicClock.now()
            let nearest = (waiting.values.map(\.deadline) + warming.values.map(\.deadline)).min() ?? now + 100_000
            let timeoutMs = Int(max(0, min(100_000, nearest - now)) / 1000) + 1
            let ready: (socket: Bool, wake: Bool)
            do { ready = try socket.poll(timeoutMs: timeoutMs, wakeFD: wake.fd) } catch { return }
            if ready.wake { wake.drain() }
            if ready.socket {
                while let frames = try? socket.receiveData() {
                    let received = MonotonicClock.now()
                    guard let payload = frames.first, var reply = try? Envelope(serializedBytes: payload) else { continue }
                    // A chunk asked for as a raw frame: its bytes are the second frame, kept as libzmq received them.
                    if frames.count == 2, case .chunk(var chunk) = reply.body, chunk.data.isEmpty {
                        chunk.data = frames[1]
                        reply.body = .chunk(chunk)
                    }
                    if var probe = warming.removeValue(forKey: reply.requestID) {
                        var p = Coord_V1_ClockProbe()
                        p.t1Us = MonotonicClock.now()
                        probe.envelope.body = .clockProbe(p)
                        if send(probe.envelope, for: probe, on: socket) { waiting[probe.id] = probe }
                        continue
                    }
                    // An error reply to bytes the node could not parse carries id 0 and matches nothing.
                    guard let o = waiting.removeValue(forKey: reply.requestID) else { continue }
                    o.continuation.resume(returning: (reply, received))
                }
            }
            let after = MonotonicClock.now()
            for (id, o) in waiting where o.deadline <= after {
                waiting[id] = nil
                o.continuation.resume(throwing: CoordError(.failure, "\(who) did not answer \(o.what) within \(o.timeout) s.\(silenceHint)", node: named))
            }
            for (id, o) in warming where o.deadline <= after {
                warming[id] = nil
                o.continuation.resume(throwing: CoordError(.failure, "\(who) did not answer \(o.what) within \(o.timeout) s.\(silenceHint)", node: named))
            }
        }
    }
}

extension ZMQSocket.Curve {
    /// A coordinator's side of a link.
    init(_ keys: LinkKeys) {
        self = .client(serverKey: keys.serverKey, publicKey: keys.client.publicKey, secretKey: keys.client.secretKey)
    }
}

/// A node's `Error` reply to a request: its code (what kind of no) and its sentence.
public struct NodeRefusal: Error, Sendable, CustomStringConvertible {
    public let node: String
    /// What was asked, e.g. "the controls".
    public let what: String
    public let failure: NodeFailure

    /// The operator's sentence, as a `CoordError` naming the node.
    public var coordError: CoordError { CoordError(.failure, "node \(node) refused \(what): \(failure.message)", node: node) }
    public var description: String { coordError.message }
}
