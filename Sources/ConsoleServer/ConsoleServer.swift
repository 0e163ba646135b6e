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
import UnixSignals
#if canImport(Glibc)
import Glibc
#endif

/// The operator's console over HTTP: the page at `/`, the JSON API under `/api` (openapi.yaml, served
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

    /// What the console does on SIGINT/SIGTERM (CONTRACT §14). The first shuts it down gracefully: a take recording
    /// stops every camera on one instant and is collected while the page still shows it, then the server stops.
    public struct Interrupts: Sendable {
        /// Told what the shutdown waits for (nil: no take runs), as the first signal arrives.
        public var shuttingDown: @Sendable (String?) -> Void
        /// A second signal: leaves the take to its nodes and returns the sentence saying what they keep and the
        /// command that finishes it; the console then exits 130.
        public var abandon: @Sendable (LiveRig.InterruptedTake?) async -> String
        public init(shuttingDown: @escaping @Sendable (String?) -> Void, abandon: @escaping @Sendable (LiveRig.InterruptedTake?) async -> String) {
            self.shuttingDown = shuttingDown; self.abandon = abandon
        }
    }

    /// Serves `rig` at `address` (from `preflight`) until SIGINT/SIGTERM; `onReady` gets the CONSOLE URL. The
    /// application (HTTP server and the live rig) and the take service are one service group; the take service is
    /// shut down first, so a take stops and is collected before the server goes. A server that cannot listen ends
    /// the group and throws ListenFailure.
    public static func run(rig: LiveRig, settings: Settings, prepared: Prepared, logger: Logger,
                           alsoRun: [any Service] = [], interrupts: Interrupts,
                           onReady: @escaping @Sendable (Listening) -> Void) async throws {
        let gate = GateInForce()
        let app = try application(rig: rig, settings: settings, bindHost: prepared.address.ipAddress ?? settings.host,
                                  tls: prepared.tls, gate: gate, logger: logger, alsoRun: alsoRun, onReady: onReady)
        // Signals are counted here, not by the group: a second one abandons the take instead of waiting.
        let group = ServiceGroup(configuration: .init(services: [app, ConsoleTakes(rig: rig, shuttingDown: interrupts.shuttingDown)],
                                                      logger: logger))
        let signals = await UnixSignalsSequence(trapping: .sigint, .sigterm)
        do {
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask {
                    var count = 0
                    for await _ in signals {
                        count += 1
                        if count == 1 {
                            await group.triggerGracefulShutdown()
                            continue
                        }
                        let sentence = await interrupts.abandon(rig.interruptedTake)
                        FileHandle.standardError.write(Data("\ncoord: interrupted again; \(sentence)\n".utf8))
                        exit(130)
                    }
                }
                try await group.run()
                tasks.cancelAll()
            }
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
}

