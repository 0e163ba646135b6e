import CoordCore
import Coordinator
import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import RigMetrics
import ServiceLifecycle
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The operator's console over HTTP: the page at `/`, the JSON API under `/api` (docs/console-api.md, described
/// at `/openapi.json`), tiles under `/preview`, take files under `/takes`, and live changes over `/ws`.
public enum ConsoleServer {
    /// How the console listens and whom it answers (CONTRACT §6b).
    public struct Settings: Sendable {
        public var host: String
        public var port: Int
        /// The token every request must carry.
        public var token: String
        /// Host names the console answers to besides its address (--allow-host).
        public var allowedHosts: [String] = []
        /// A request's head must arrive within this of the connection opening (or of the previous answer), and its
        /// body within this of its head; else the connection is closed.
        public var requestTimeout: TimeAmount = .seconds(10)
        /// PEM files of the certificate (chain) and its private key: the console then speaks HTTPS only.
        public var tls: (certificate: String, key: String)?
        public var scheme: String { tls == nil ? "http" : "https" }
        public init(host: String, port: Int, token: String) {
            self.host = host; self.port = port; self.token = token
        }
        /// HOST:PORT as the operator wrote it.
        public var shown: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    /// Why the console cannot listen (or use its TLS files), as one sentence naming the address or file (`coord`
    /// exits 2 with it).
    public struct ListenFailure: Error, Sendable, CustomStringConvertible {
        public let sentence: String
        public var description: String { sentence }
    }

    /// What `preflight` found ready: the address to bind and the TLS configuration.
    public struct Prepared: Sendable {
        let address: SocketAddress
        let tls: TLSConfiguration?
    }

    /// Loads the TLS files, resolves the listening address (at most 4 s) and checks it can be bound, before anything
    /// else starts (the demo's nodes, the rig's links).
    public static func preflight(_ settings: Settings) async throws(ListenFailure) -> Prepared {
        let tls = try settings.tls.map { files throws(ListenFailure) in try tlsConfiguration(certificate: files.certificate, key: files.key) }
        let address = try await resolve(settings)
        do {
            let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
                .bind(to: address).get()
            try? await channel.close().get()
        } catch {
            throw ListenFailure(sentence: listenSentence(settings, error))
        }
        return Prepared(address: address, tls: tls)
    }

    static func tlsConfiguration(certificate: String, key: String) throws(ListenFailure) -> TLSConfiguration {
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certificate)
        } catch {
            throw ListenFailure(sentence: "--tls-cert \(certificate) is not a readable PEM certificate (\(error)).")
        }
        guard !chain.isEmpty else { throw ListenFailure(sentence: "--tls-cert \(certificate) holds no PEM certificate.") }
        let privateKey: NIOSSLPrivateKey
        do {
            privateKey = try NIOSSLPrivateKey(file: key, format: .pem)
        } catch {
            throw ListenFailure(sentence: "--tls-key \(key) is not a readable PEM private key (\(error)).")
        }
        let configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(privateKey))
        // A key that is not the certificate's fails here, not at the first visitor's handshake.
        do {
            _ = try NIOSSLContext(configuration: configuration)
        } catch {
            throw ListenFailure(sentence: "--tls-key \(key) does not fit --tls-cert \(certificate) (\(error)).")
        }
        return configuration
    }

    static func resolve(_ settings: Settings) async throws(ListenFailure) -> SocketAddress {
        let (host, port) = (settings.host, settings.port)
        let outcome: Result<SocketAddress, any Error>? = await withCheckedContinuation { continuation in
            let once = Once()
            let finish: @Sendable (Result<SocketAddress, any Error>?) -> Void = { result in
                if once.first() { continuation.resume(returning: result) }
            }
            // getaddrinfo blocks and cannot be cancelled: it gets its own thread and a deadline.
            Thread.detachNewThread { finish(Result { try SocketAddress.makeAddressResolvingHost(host, port: port) }) }
            DispatchQueue.global().asyncAfter(deadline: .now() + 4) { finish(nil) }
        }
        switch outcome {
        case .success(let address): return address
        case .failure: throw ListenFailure(sentence: "the console cannot listen on \(settings.shown): \(Echo.short(host)) is not a known host name or address of this machine.")
        case nil: throw ListenFailure(sentence: "the console cannot listen on \(settings.shown): looking up \(Echo.short(host)) took over 4 s.")
        }
    }

    static func listenSentence(_ settings: Settings, _ error: any Error) -> String {
        let prefix = "the console cannot listen on \(settings.shown)"
        guard let io = error as? IOError else { return "\(prefix): \(error)." }
        switch io.errnoCode {
        case EADDRINUSE: return "\(prefix): the address is in use (another program listens there; choose another --listen)."
        case EADDRNOTAVAIL: return "\(prefix): \(Echo.short(settings.host)) is not an address of this machine."
        case EACCES: return "\(prefix): permission denied (a port below 1024 needs privileges)."
        default: return "\(prefix): \(io.description)."
        }
    }

    /// Where the console answers, once it listens: `url` carries the token (the CONSOLE line).
    public struct Listening: Sendable {
        public var url: String
        public var address: String
    }

    /// Serves `rig` at `address` (from `preflight`) until SIGINT/SIGTERM; `onReady` gets the CONSOLE URL. Runs `rig`
    /// and the HTTP server as one service group, so Ctrl-C ends both (ServiceLifecycle); a server that cannot listen
    /// ends the group and throws ListenFailure.
    public static func run(rig: LiveRig, settings: Settings, prepared: Prepared, logger: Logger,
                           alsoRun: [any Service] = [],
                           onReady: @escaping @Sendable (Listening) -> Void) async throws {
        let router = Router()
        routes(router, rig: rig)
        let wsRouter = Router(context: BasicWebSocketRequestContext.self)
        wsRouter.ws("/ws") { _, _ in .upgrade() } onUpgrade: { _, outbound, _ in
            // The page only listens; a viewer that cannot keep up loses the oldest messages (the stream's buffer),
            // and its slow socket only ever stalls this task, never the rig.
            for await message in rig.subscribe() {
                try await outbound.write(.text(encode(message)))
            }
        }
        let gate = GateInForce()
        let wsResponder = wsRouter.buildResponder()
        let configuration = HTTP1WebSocketUpgradeChannel.Configuration(http1: .init(idleTimeout: settings.requestTimeout))
        let timeout = settings.requestTimeout
        let tls = prepared.tls
        let server = HTTPServerBuilder { responder in
            let gated = GatedChannel(base: HTTP1WebSocketUpgradeChannel(responder: responder, webSocketResponder: wsResponder, configuration: configuration),
                                     gate: gate, timeout: timeout, logger: logger)
            if let tls { return try TLSChannel(gated, tlsConfiguration: tls) }
            return gated
        }
        let bindHost = prepared.address.ipAddress ?? settings.host
        let app = Application(
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
        do {
            try await app.runService(gracefulShutdownSignals: [.sigint, .sigterm])
        } catch {
            if gate.current != nil { throw error }
            throw ListenFailure(sentence: listenSentence(settings, error))
        }
    }

    /// The host the CONSOLE URL names: the name or address given, or for a wildcard this machine's first
    /// non-loopback IPv4 address (127.0.0.1 when it has none).
    static func urlHost(_ host: String, bound: String?) -> String {
        var shown = host
        if ["0.0.0.0", "::", "*", ""].contains(host) {
            shown = ConsoleGateHandler.interfaceAddresses().first { !$0.contains(":") && !$0.hasPrefix("127.") } ?? "127.0.0.1"
        }
        return shown.contains(":") ? "[\(shown)]" : shown
    }

    static func errorJSON(_ sentence: String) -> String {
        (try? String(data: json.encode(["error": sentence]), encoding: .utf8)) ?? "{}"
    }

    static let json: JSONEncoder = {
        let e = JSONEncoder()
        e.keyEncodingStrategy = .convertToSnakeCase
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return e
    }()

    static func encode(_ message: LiveRig.Message) -> String {
        func tagged<T: Encodable>(_ type: String, _ value: T) -> String {
            guard let data = try? json.encode(value), var object = String(data: data, encoding: .utf8), object.hasPrefix("{") else { return "{}" }
            object.removeFirst()
            return "{\"type\":\"\(type)\"" + (object == "}" ? "}" : "," + object)
        }
        switch message {
        case .rig(let rig): return tagged("rig", rig)
        case .multiview(let set): return tagged("multiview", set)
        case .take(let take): return tagged("take", ["take": take])
        case .takes(let takes): return tagged("takes", ["takes": takes])
        case .event(let event): return tagged("event", event)
        }
    }

    static func jsonResponse<T: Encodable>(_ value: T, status: HTTPResponse.Status = .ok) -> Response {
        let data = (try? json.encode(value)) ?? Data("{}".utf8)
        return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func failure(_ status: HTTPResponse.Status, _ sentence: String) -> Response {
        jsonResponse(["error": sentence], status: status)
    }

    static func refusal(_ r: LiveRig.Refusal) -> Response {
        switch r.kind {
        case .conflict: return failure(.conflict, r.sentence)
        case .invalid: return failure(.unprocessableContent, r.sentence)
        case .notFound: return failure(.notFound, r.sentence)
        }
    }

    /// A JSON request body, at most 64 KiB; nil body → the empty object.
    static func body<T: Decodable>(_ request: Request, as: T.Type) async -> Parsed<T> {
        var request = request
        guard let buffer = try? await request.collectBody(upTo: 64 << 10) else {
            return .failure(failure(.contentTooLarge, "the request body is over 64 KiB."))
        }
        let data = buffer.readableBytes == 0 ? Data("{}".utf8) : Data(buffer.readableBytesView)
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        do {
            return .success(try decoder.decode(T.self, from: data))
        } catch {
            return .failure(Self.failure(.unprocessableContent, "the request body is not what this call takes: \(decodingSentence(error))."))
        }
    }

    static func decodingSentence(_ error: Error) -> String {
        switch error as? DecodingError {
        case .typeMismatch(_, let c), .valueNotFound(_, let c), .dataCorrupted(let c):
            let path = c.codingPath.map(\.stringValue).joined(separator: ".")
            return path.isEmpty ? "it is not a JSON object" : "\(path) has the wrong type"
        case .keyNotFound(let key, _): return "\(key.stringValue) is missing"
        default: return "it is not JSON"
        }
    }

    /// A controls body: only the four control keys, with their JSON types.
    static func controlsBody(_ request: Request) async -> Parsed<CameraControls> {
        var request = request
        guard let buffer = try? await request.collectBody(upTo: 64 << 10) else {
            return .failure(failure(.contentTooLarge, "the request body is over 64 KiB."))
        }
        let data = Data(buffer.readableBytesView)
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            return .failure(failure(.unprocessableContent, "the controls must be a JSON object with any of exposure_us, gain_db, white_balance_k, focus."))
        }
        let known = Set(CameraControls.Name.allCases.map(\.rawValue))
        if let unknown = object.keys.sorted().first(where: { !known.contains($0) }) {
            return .failure(failure(.unprocessableContent, "\(Echo.short(unknown)) is not a camera control: use exposure_us, gain_db, white_balance_k or focus."))
        }
        do {
            return .success(try JSONDecoder().decode(CameraControls.self, from: data))
        } catch {
            return .failure(failure(.unprocessableContent, "the controls are not what this call takes: \(decodingSentence(error))."))
        }
    }

    enum Parsed<T> {
        case success(T)
        case failure(Response)
    }

    struct TakeStartBody: Decodable {
        var name: String?
        var seconds: Double?
    }

    static func routes(_ router: Router<BasicRequestContext>, rig: LiveRig) {
        router.get("/") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
                     body: .init(byteBuffer: ByteBuffer(string: ConsolePage.html)))
        }
        router.get("/openapi.json") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: ConsoleOpenAPI.json)))
        }
        router.get("/api/rig") { _, _ in jsonResponse(rig.rig) }
        // The rig's metrics, the node's names and labels from each node's status (CONTRACT §7).
        let book = MetricsBook()
        router.get("/metrics") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                     body: .init(byteBuffer: ByteBuffer(string: book.exposition(rig.metricsSamples))))
        }
        router.get("/api/rig/controls.yaml") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/yaml; charset=utf-8",
                                             .contentDisposition: "attachment; filename=\"controls.yaml\""],
                     body: .init(byteBuffer: ByteBuffer(string: rig.controlsYAML)))
        }
        router.get("/api/multiview") { _, _ in
            guard let set = rig.multiview else { return failure(.notFound, "no complete frame-matched set yet: every camera must deliver a tile of one group.") }
            return jsonResponse(set)
        }
        router.get("/preview/:node/:camera/:file") { _, context in
            let node = context.parameters.get("node") ?? "", camera = context.parameters.get("camera") ?? ""
            let file = context.parameters.get("file") ?? ""
            guard file.hasSuffix(".jpg"), let group = Int64(file.dropLast(4)) else { return failure(.notFound, "a tile is named GROUP.jpg.") }
            guard let jpeg = rig.image(node: node, camera: camera, group: group) else {
                return failure(.notFound, "no tile of \(node)/\(camera) for group \(group) (tiles are kept for the last \(LiveRig.keptImagesPerCamera) groups).")
            }
            return Response(status: .ok, headers: [.contentType: "image/jpeg", .cacheControl: "max-age=60"],
                            body: .init(byteBuffer: ByteBuffer(bytes: jpeg)))
        }
        router.put("/api/cameras/:node/:camera/controls") { request, context in
            let node = context.parameters.get("node") ?? "", camera = context.parameters.get("camera") ?? ""
            switch await controlsBody(request) {
            case .failure(let response): return response
            case .success(let controls):
                do throws(LiveRig.Refusal) {
                    return jsonResponse(try await rig.setControls(node: node, camera: camera, controls))
                } catch {
                    return refusal(error)
                }
            }
        }
        router.put("/api/controls") { request, _ in
            switch await controlsBody(request) {
            case .failure(let response): return response
            case .success(let controls):
                if let problem = LiveRig.basicProblem(controls, camera: "(every camera)") { return failure(.unprocessableContent, problem) }
                let (applied, refused) = await rig.setControlsEverywhere(controls)
                struct All: Encodable { var cameras: [LiveRig.CameraControlsView]; var refused: [String] }
                guard refused.isEmpty else {
                    // Applied where it could be; the answer names each camera that refused.
                    return failure(.unprocessableContent, refused.joined(separator: " "))
                }
                return jsonResponse(All(cameras: applied, refused: refused))
            }
        }
        router.get("/api/takes") { _, _ in
            struct Takes: Encodable { var current: LiveRig.TakeView?; var takes: [LiveRig.TakeEntry] }
            return jsonResponse(Takes(current: rig.take, takes: rig.takes))
        }
        router.post("/api/takes") { request, _ in
            switch await body(request, as: TakeStartBody.self) {
            case .failure(let response): return response
            case .success(let b):
                if let name = b.name, let problem = RigName.problem(with: name, kind: "take name") { return failure(.unprocessableContent, problem) }
                do throws(LiveRig.Refusal) { return jsonResponse(try rig.startTake(name: b.name, seconds: b.seconds), status: .accepted) } catch { return refusal(error) }
            }
        }
        router.post("/api/takes/stop") { _, _ in
            do throws(LiveRig.Refusal) { return jsonResponse(try rig.stopTake(), status: .accepted) } catch { return refusal(error) }
        }
        // Every file of a take directory, node folders included (CONTRACT §6b), streamed from disk: a camera file
        // may be gigabytes.
        let files = FileIO()
        router.get("/takes/:take/**") { _, context in
            let take = context.parameters.get("take") ?? ""
            let parts = context.parameters.getCatchAll().map(String.init)
            // Only names of CONTRACT §4's pattern, one per folder level: nothing can lead outside the take directory
            // (and the coordinator's own temporary folder, whose name is outside the pattern, is never served).
            guard RigName.isValid(take), (1...4).contains(parts.count), parts.allSatisfy(RigName.isValid) else {
                return failure(.notFound, "no such take file.")
            }
            let relative = parts.joined(separator: "/")
            let path = rig.template.takesDirectory.appendingPathComponent(take).appendingPathComponent(relative).path
            var info = stat()
            guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
                return failure(.notFound, "take \(take) has no file \(relative).")
            }
            let body = try await files.loadFile(path: path, context: context)
            return Response(status: .ok, headers: [.contentType: takeFileType(relative)], body: body)
        }
    }
}

/// The Content-Type of a take's file, by its extension.
func takeFileType(_ path: String) -> String {
    switch (path as NSString).pathExtension.lowercased() {
    case "html": "text/html; charset=utf-8"
    case "json", "otio": "application/json"
    case "csv": "text/csv; charset=utf-8"
    case "xml", "fcpxml", "mhl": "application/xml"
    case "mkv": "video/x-matroska"
    case "mka": "audio/x-matroska"
    case "mov": "video/quicktime"
    case "wav": "audio/wav"
    default: "application/octet-stream"
    }
}

/// True for the first caller only.
final class Once: Sendable {
    private let done = Mutex(false)
    func first() -> Bool { done.withLock { done in defer { done = true }; return !done } }
}

/// The live rig as a service of the console's group: runs until the group shuts down.
struct LiveRigService: Service {
    let rig: LiveRig
    func run() async throws {
        let task = Task { await rig.run() }
        // Cancelled too when another service of the group fails (the server cannot listen): else the group waits
        // for ever and Ctrl-C is ignored.
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await task.value
            } onGracefulShutdown: {
                task.cancel()
            }
        } onCancel: {
            task.cancel()
        }
    }
}
