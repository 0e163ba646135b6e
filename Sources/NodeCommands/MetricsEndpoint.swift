import CoordCore
import Foundation
import Hummingbird
import Logging
import NIOCore
import NodeAgent
import RigMetrics

/// `coord-node --metrics HOST:PORT`: Prometheus text exposition at `/metrics` (CONTRACT §7), read from the agent at
/// each scrape; runs in the node's service group, so SIGTERM ends it with the node.
enum MetricsEndpoint {
    /// Whether only this machine can reach `host` (a loopback address or localhost).
    static func isLoopback(_ host: String) -> Bool {
        let bare = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]")).lowercased()
        return bare == "::1" || NodeConfiguration.isLoopback("tcp://\(bare):1")
    }

    static func application(host: String, port: Int, sample: @escaping @Sendable () -> NodeMetricsSample, logger: Logger,
                            onReady: @escaping @Sendable (String) -> Void) -> some ApplicationProtocol {
        let book = MetricsBook()
        let router = Router()
        router.get("/metrics") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                     body: .init(byteBuffer: ByteBuffer(string: book.exposition([sample()]))))
        }
        return Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: "coord-node"),
            onServerRunning: { channel in
                onReady(HostPort.text(host: channel.localAddress?.ipAddress ?? host, port: channel.localAddress?.port ?? port))
            },
            logger: logger)
    }
}
