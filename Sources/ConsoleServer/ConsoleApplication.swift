import Coordinator
import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOSSL
import OpenAPIHummingbird
import ServiceLifecycle

extension ConsoleServer {
    /// The console as an application, not yet listening: the generated API and the plain routes over `rig`, the
    /// WebSocket, and the gate in front of them all (the gate is armed with the port once the server listens).
    /// `run` serves it; a test drives it through HummingbirdTesting.
    static func application(rig: LiveRig, settings: Settings, bindHost: String, tls: TLSConfiguration?, gate: GateInForce,
                            logger: Logger, alsoRun: [any Service] = [],
                            onReady: @escaping @Sendable (Listening) -> Void) throws -> some ApplicationProtocol {
        let router = Router()
        try ConsoleAPI(rig: rig).registerHandlers(on: router, middlewares: [ConsoleBodies(shape: .console)])
        routes(router, rig: rig)
        let wsRouter = Router(context: BasicWebSocketRequestContext.self)
        wsRouter.ws("/ws") { _, _ in .upgrade() } onUpgrade: { inbound, outbound, _ in
            // The viewer's side is read for as long as it is open: reading it is what takes in the pongs to the
            // console's pings and answers the viewer's own (a socket never read lost every pong, so the ping timeout
            // closed it after 60 s), and it answers the page's keepalive. Whichever side ends first ends both.
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for try await message in inbound.messages(maxSize: 4096) {
                        if case .text(let text) = message, isKeepalive(text) { try await outbound.write(.text(keepalive)) }
                    }
                }
                group.addTask {
                    // A viewer that cannot keep up loses the oldest messages (the stream's buffer), and its slow
                    // socket only ever stalls this task, never the rig.
                    for await message in rig.subscribe() {
                        try await outbound.write(.text(live(message)))
                    }
                }
                try await group.next()
                group.cancelAll()
            }
        }
        let wsResponder = wsRouter.buildResponder()
        // A ping every `webSocketPing`; a viewer whose pong has not come by the next one is gone, and its socket is
        // closed. A viewer that only answers pings stays open as long as it likes.
        let configuration = HTTP1WebSocketUpgradeChannel.Configuration(
            http1: .init(idleTimeout: settings.requestTimeout), ws: .init(autoPing: .enabled(timePeriod: webSocketPing)))
        let timeout = settings.requestTimeout
        let server = HTTPServerBuilder { responder in
            let gated = GatedChannel(base: HTTP1WebSocketUpgradeChannel(responder: responder, webSocketResponder: wsResponder, configuration: configuration),
                                     gate: gate, timeout: timeout, logger: logger)
            if let tls { return try TLSChannel(gated, tlsConfiguration: tls) }
            return gated
        }
        return Application(
            router: router,
            server: server,
            configuration: .init(address: .hostname(bindHost, port: settings.port), serverName: "coord-console"),
            services: [LiveRigService(rig: rig)] + alsoRun,
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? settings.port
                gate.set(ConsoleGate(token: settings.token, scheme: settings.scheme, port: port, listenHost: settings.host,
                                     boundAddress: channel.localAddress?.ipAddress, allowedNames: settings.allowedHosts))
                let host = urlHost(settings.host, bound: channel.localAddress?.ipAddress)
                onReady(Listening(url: "\(settings.scheme)://\(host):\(port)/?token=\(settings.token)", address: "\(host):\(port)"))
            },
            logger: logger)
    }

    /// How often the console pings each WebSocket viewer (a browser answers by itself, even in a hidden tab).
    static let webSocketPing: Duration = .seconds(30)

    /// The keepalive the page sends over its WebSocket, and the console's answer: the same message.
    static let keepalive = #"{"type":"keepalive"}"#

    static func isKeepalive(_ text: String) -> Bool {
        guard text.utf8.count < 256, let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else { return false }
        return object["type"] as? String == "keepalive"
    }

    /// A WebSocket message: the snapshot as the document's schema says, with its `type`.
    static func live(_ message: LiveRig.Message, shape: DocumentShape = .console) -> String {
        let encoder = JSONEncoder()
        func json<T: Encodable>(_ value: T, _ schema: String) -> Any {
            guard let data = try? encoder.encode(value), let parsed = try? JSONSerialization.jsonObject(with: data) else { return [String: Any]() }
            return shape.filled(parsed, schema: schema)
        }
        let type: String
        var object: [String: Any]
        switch message {
        case .rig(let rig):
            type = "rig"
            object = json(Components.Schemas.Rig(rig), "Rig") as? [String: Any] ?? [:]
        case .multiview(let set):
            type = "multiview"
            object = json(Components.Schemas.Multiview(set), "Multiview") as? [String: Any] ?? [:]
        case .take(let take):
            type = "take"
            object = ["take": take.map { json(Components.Schemas.Take($0), "Take") } ?? NSNull()]
        case .takes(let takes):
            type = "takes"
            object = ["takes": takes.map { json(Components.Schemas.TakeEntry($0), "TakeEntry") }]
        case .event(let event):
            type = "event"
            object = json(Components.Schemas.Event(event), "Event") as? [String: Any] ?? [:]
        }
        object["type"] = type
        return DocumentShape.serialized(object).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}
