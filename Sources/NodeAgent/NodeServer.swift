import CoordCore
import CoordWire
import Foundation
import Logging
import Platform
import ServiceLifecycle
import Synchronization
import ZeroMQ
#if canImport(Glibc)
import Glibc
#endif

/// The node agent's ZeroMQ shell: one ROUTER socket, owned by one thread, answering each request with one
/// reply. Runs as a `Service`; graceful shutdown (SIGTERM) finalizes any recording in progress.
public final class NodeServer: Service, Sendable {
    public let agent: NodeAgent
    private let logger: Logger
    private let context = ZMQContext(realtimeIOThreads: true)
    private let wake = WakeSignal()
    private struct State {
        var stopRequested = false
        /// Replies made off the socket thread, waiting for it to send them (frames: identity, [empty,] payload;
        /// and a chunk's bytes to follow them without a copy).
        var outbox: [(frames: [[UInt8]], raw: OwnedBytes?)] = []
        /// Requests handed to a lane whose reply has not been sent yet: bounded, so a flood cannot grow memory.
        var inFlight = 0
    }
    private let state = Mutex(State())
    private static let maxInFlight = 64
    private let controlLane = DispatchQueue(label: "coord-node.control")
    private let filesLane = DispatchQueue(label: "coord-node.files")
    /// Chunk reads, several at once (the coordinator keeps a window of them in flight): each is a pread into
    /// memory that libzmq then sends as it is.
    private let chunkPool = DispatchQueue(label: "coord-node.chunks", attributes: .concurrent)
    /// Called once with the endpoint actually bound (a `*` port resolved).
    private let onReady: @Sendable (String) -> Void
    /// systemd (Type=notify): READY once bound with the cameras found, WATCHDOG from the socket thread, STATUS,
    /// STOPPING; does nothing outside systemd.
    private let notifier: SystemdNotifier

    public init(agent: NodeAgent, logger: Logger, notifier: SystemdNotifier = SystemdNotifier(),
                onReady: @escaping @Sendable (String) -> Void) {
        self.agent = agent
        self.logger = logger
        self.notifier = notifier
        self.onReady = onReady
    }

    public func run() async throws {
        try await withGracefulShutdownHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
                let thread = Thread { [self] in
                    do {
                        try serve()
                        continuation.resume()
                    } catch {
                        continuation.resume(throwing: error)
                    }
                }
                thread.name = "node-socket"
                thread.start()
            }
        } onGracefulShutdown: { [self] in
            notifier.notify("STOPPING=1", "STATUS=stopping: finishing any recording in progress")
            // The socket keeps answering while a take's files are finished, and until a status has told its
            // coordinator why the take ended (at most 3 s more, it polls twice a second); then it closes.
            let finishing = Thread { [self] in
                if agent.shutdown() { agent.awaitTakeEndSeen(deadline: .now() + .seconds(3)) }
                requestStop()
            }
            finishing.name = "node-shutdown"
            finishing.start()
        }
        // The parent gone or the socket failed: the take ends here (after the graceful path: already done).
        agent.shutdown()
    }

    public func requestStop() {
        state.withLock { $0.stopRequested = true }
        wake.signal()
    }

    private var shouldStop: Bool { state.withLock { $0.stopRequested } }

    /// Answers `coord discover` while this node serves an endpoint other machines can reach.
    private func startDiscovery(bound: String) -> DiscoveryResponder? {
        let config = agent.configuration
        guard config.discoveryPort != 0, !NodeConfiguration.isLoopback(bound) else { return nil }
        var a = Coord_V1_Announcement()
        a.node = config.name
        a.endpoint = bound
        a.cameras = config.cameraNames
        a.agentVersion = NodeAgent.version
        a.publicKey = config.security?.keys.publicKey ?? ""
        do {
            let responder = try DiscoveryResponder(port: config.discoveryPort, announcement: a, logger: logger)
            responder.start()
            logger.info("answering coord discover", metadata: ["udp_port": "\(responder.port)"])
            return responder
        } catch {
            logger.warning("coord discover will not find this node: \(error.description)")
            return nil
        }
    }

    private func serve() throws {
        // This thread stamps every clock probe's arrival: it must wake promptly even when cameras load the CPU.
        ThreadPriority.nameCurrentThread("node-socket")
        ThreadPriority.raiseCurrentThread()
        var options = ZMQSocket.Options()
        options.sendTimeoutMs = 500
        options.receiveTimeoutMs = 0
        // Anything over the 1 MiB request limit gets a TOO_LARGE reply; past this cap libzmq cuts the peer
        // off before the message is ever buffered whole (so memory stays bounded).
        options.maxMessageBytes = 64 << 20
        // With keys, the ZAP handler is bound first: libzmq admits every client of a CURVE server without one.
        let zap = try agent.gatekeeper?.guardContext(context)
        defer { zap?.stop() }
        options.curve = agent.gatekeeper?.serverCurve
        let socket = try context.makeSocket(.router, options: options)
        defer { socket.close() }
        let bound = try socket.bind(agent.configuration.endpoint)
        logger.info("listening", metadata: ["endpoint": "\(bound)", "node": "\(agent.configuration.name)",
                                            "security": "\(agent.gatekeeper == nil ? "none" : "CURVE")"])
        onReady(bound)
        let discovery = startDiscovery(bound: bound)
        defer { discovery?.stop() }
        // The cameras were enumerated when the agent was made, and the socket is bound: ready for requests.
        var lastStatus = agent.statusLine
        notifier.notify("READY=1", "STATUS=\(lastStatus); listening on \(bound)")
        var lastWatchdog = MonotonicClock.now()
        var lastStatusCheck = lastWatchdog

        var lastParentCheck = MonotonicClock.now()
        while !shouldStop {
            let ready = try socket.poll(timeoutMs: 200, wakeFD: wake.fd)
            if ready.wake { wake.drain() }
            sendReady(on: socket)
            if ready.socket {
                // Drain everything readable before polling again.
                var userID: String?
                while let frames = try socket.receive(userID: &userID) {
                    let received = agent.localNow()
                    // A key that left --authorized is not served even on a connection admitted before.
                    if let gatekeeper = agent.gatekeeper, !gatekeeper.serves(userID: userID) { continue }
                    handle(frames, receivedLocal: received, on: socket)
                }
            }
            agent.tick()
            let now = MonotonicClock.now()
            // Sent from this thread, which serves every request: if it hangs, systemd restarts the node.
            if let interval = notifier.watchdogInterval, now - lastWatchdog >= interval {
                lastWatchdog = now
                notifier.notify("WATCHDOG=1")
            }
            if notifier.socketPath != nil, now - lastStatusCheck > 500_000 {
                lastStatusCheck = now
                let line = agent.statusLine
                if line != lastStatus {
                    lastStatus = line
                    notifier.notify("STATUS=\(line)")
                }
            }
            if let parent = agent.configuration.parentPID, now - lastParentCheck > 200_000 {
                lastParentCheck = now
                if kill(parent, 0) != 0 && errno == ESRCH {
                    logger.warning("parent process \(parent) is gone; shutting down")
                    break
                }
            }
        }
        logger.info("socket closed")
    }

    private func handle(_ frames: [[UInt8]], receivedLocal: Int64, on socket: ZMQSocket) {
        // A DEALER peer's message arrives as [identity, payload]; a REQ peer's as [identity, empty, payload].
        guard frames.count >= 2 else {
            logger.warning("dropped a message with no payload frame")
            return
        }
        let identity = frames[0]
        let envelopeFrames = frames.count == 3 && frames[1].isEmpty ? [frames[1]] : []
        let payload = frames[frames.count - 1]
        if frames.count > 3 || (frames.count == 3 && !frames[1].isEmpty) {
            logger.warning("message with \(frames.count - 1) frames; only the last is read")
        }
        let head = [identity] + envelopeFrames
        switch agent.receive(payload, receivedLocal: receivedLocal) {
        case .reply(let reply):
            send(head + [Wire.encode(reply)], on: socket)
        case .deferred(let lane, let work):
            guard admit(payload, head: head, on: socket) else { return }
            (lane == .control ? controlLane : filesLane).async { [self] in
                let reply = Wire.encode(work())
                state.withLock { $0.outbox.append((head + [reply], nil)) }
                wake.signal()
            }
        case .chunk(let work):
            guard admit(payload, head: head, on: socket) else { return }
            chunkPool.async { [self] in
                let reply = work()
                state.withLock { $0.outbox.append((head + [Wire.encode(reply.envelope)], reply.rawFrame)) }
                wake.signal()
            }
        }
    }

    /// Counts one more request in progress, or answers it at once that the node is busy.
    private func admit(_ payload: [UInt8], head: [[UInt8]], on socket: ZMQSocket) -> Bool {
        let admitted = state.withLock { state in
            guard state.inFlight < Self.maxInFlight else { return false }
            state.inFlight += 1
            return true
        }
        if !admitted {
            let id = (try? Wire.parse(payload))?.requestID ?? 0
            let busy = NodeFailure(.badState, "node \(agent.configuration.name) has \(Self.maxInFlight) requests in progress; ask again once they are answered.")
            send(head + [Wire.encode(Wire.error(id, busy))], on: socket)
        }
        return admitted
    }

    /// Sends the replies the lanes have made (only this thread touches the socket).
    private func sendReady(on socket: ZMQSocket) {
        let ready = state.withLock { state in
            defer { state.outbox.removeAll() }
            state.inFlight -= state.outbox.count
            return state.outbox
        }
        for (frames, raw) in ready { send(frames, raw: raw, on: socket) }
    }

    private func send(_ frames: [[UInt8]], raw: OwnedBytes? = nil, on socket: ZMQSocket) {
        do {
            let sent = if let raw { try socket.send(frames, tail: raw) } else { try socket.send(frames) }
            if !sent {
                logger.warning("reply dropped: the peer is not reading")
            }
        } catch {
            logger.warning("reply failed", metadata: ["error": "\(error)"])
        }
    }
}
