import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// The gate in force: set once the console listens (then its port is known); nil before, when nothing is served.
final class GateInForce: Sendable {
    private let gate = Mutex<ConsoleGate?>(nil)
    var current: ConsoleGate? { gate.withLock { $0 } }
    func set(_ value: ConsoleGate) { gate.withLock { $0 = value } }
}

/// Carries out ConsoleGate's verdict on every request head, right after the HTTP decoder and before the WebSocket
/// upgrader and the router, so a refused request reaches neither; and closes a connection whose request does not
/// arrive whole in time (a head within `timeout` of the connection opening, a body within `timeout` of its head), so
/// half-open requests cannot hold the console's descriptors. After a WebSocket upgrade it lets the frames pass.
final class ConsoleGateHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let gate: GateInForce
    private let timeout: TimeAmount
    private let logger: Logger
    /// Set after an allowed upgrade: what follows is the WebSocket's, not HTTP.
    private var passthrough = false
    /// Set after a refusal: the rest of the connection is dropped while the answer goes out.
    private var refused = false
    private var deadline: Scheduled<Void>?

    init(gate: GateInForce, timeout: TimeAmount, logger: Logger) {
        self.gate = gate; self.timeout = timeout; self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) { disarm() }

    func channelActive(context: ChannelHandlerContext) {
        if deadline == nil { arm(context) }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        disarm()
        context.fireChannelInactive()
    }

    private func arm(_ context: ChannelHandlerContext) {
        disarm()
        let timeout = self.timeout
        deadline = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { [logger] in
            logger.debug("closing a connection whose request did not arrive within \(timeout.nanoseconds / 1_000_000_000) s")
            Self.shut(context)
        }
    }

    private func disarm() {
        deadline?.cancel()
        deadline = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if passthrough { return context.fireChannelRead(data) }
        if refused { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            disarm()
            let verdict = gate.current?.decide(
                ConsoleGate.Head(method: head.method.rawValue, uri: head.uri, headers: head.headers.map { ($0.name, $0.value) }),
                interfaceAddresses: Self.interfaceAddresses) ?? .refuse(status: 503, sentence: "the console is not listening yet.")
            switch verdict {
            case .allow:
                if head.headers[canonicalForm: "upgrade"].contains(where: { $0.lowercased().contains("websocket") }) {
                    passthrough = true
                } else {
                    arm(context)  // the body's deadline
                }
                context.fireChannelRead(data)
            case .redirect(let location, let cookie):
                answer(context, head, status: 303, headers: [("Location", location), ("Set-Cookie", cookie)], body: nil)
            case .refuse(let status, let sentence):
                logger.debug("refused \(head.method.rawValue) \(head.uri): \(sentence)")
                var extra: [(String, String)] = []
                if status == 401 { extra.append(("WWW-Authenticate", "Bearer realm=\"coord console\"")) }
                answer(context, head, status: status, headers: extra, body: sentence)
            }
        case .body:
            context.fireChannelRead(data)
        case .end:
            disarm()
            context.fireChannelRead(data)
        }
    }

    /// Answers the request here and closes the connection once the answer is out.
    private func answer(_ context: ChannelHandlerContext, _ request: HTTPRequestHead, status: Int, headers extra: [(String, String)], body sentence: String?) {
        refused = true
        var buffer = context.channel.allocator.buffer(capacity: 128)
        if let sentence { buffer.writeBytes(ConsoleBodies.errorJSON(sentence)) }
        var headers = HTTPHeaders(extra)
        if sentence != nil { headers.add(name: "Content-Type", value: "application/json") }
        headers.add(name: "Content-Length", value: "\(buffer.readableBytes)")
        headers.add(name: "Cache-Control", value: "no-store")
        headers.add(name: "Connection", value: "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: .init(statusCode: status), headers: headers))), promise: nil)
        if buffer.readableBytes > 0 { context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil) }
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
            Self.shut(context)
        }
    }

    /// Closes the connection as a client that went away would: the upgrader, still waiting for its first request,
    /// is told the input closed (else it reports an error for every refused or timed-out connection).
    private static func shut(_ context: ChannelHandlerContext) {
        context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        context.close(promise: nil)
    }

    /// This machine's addresses now (a console on 0.0.0.0 answers to each).
    static func interfaceAddresses() -> [String] {
        ((try? System.enumerateDevices()) ?? []).compactMap { $0.address?.ipAddress }
    }
}

/// The console's child channel: HTTP/1 with the WebSocket upgrade, with ConsoleGateHandler in front of both.
struct GatedChannel: ServerChildChannel {
    typealias Value = HTTP1WebSocketUpgradeChannel.Value
    let base: HTTP1WebSocketUpgradeChannel
    let gate: GateInForce
    let timeout: TimeAmount
    let logger: Logger

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let (gate, timeout, gateLogger) = (self.gate, self.timeout, self.logger)
        return base.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let pipeline = channel.pipeline.syncOperations
            let upgrader = try pipeline.context(handlerType: NIOTypedHTTPServerUpgradeHandler<HTTP1WebSocketUpgradeChannel.UpgradeResult>.self)
            try pipeline.addHandler(ConsoleGateHandler(gate: gate, timeout: timeout, logger: gateLogger), position: .before(upgrader.handler))
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}
