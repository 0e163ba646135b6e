import CoordCore
import CoordWire
import Foundation
import Logging
import Platform
import Synchronization
import ZeroMQ

/// Receives every node's preview tiles on one SUB socket (connected to each node's PUB endpoint), owned by one
/// thread, and hands each checked tile on with its JPEG. A slow consumer never slows a node: the socket's queue is
/// short and libzmq drops what does not fit.
public final class PreviewReceiver: Sendable {
    public struct Received: Sendable {
        public var tile: PreviewTile
        public var takeID: String
        public var centerUncertainty: Double
        public var jpeg: [UInt8]
    }

    private let context = ZMQContext()
    private let logger: Logger
    private let onTile: @Sendable (Received) -> Void
    private struct State {
        var connect: [(endpoint: String, keys: LinkKeys?)] = []
        var disconnect: [String] = []
        var connected: Set<String> = []
        var stopped = false
        var received: Int64 = 0
        var refused: Int64 = 0
    }
    private let state = Mutex(State())
    private let done = DispatchSemaphore(value: 0)
    /// Largest tile accepted (a 1920-wide preview JPEG is far below this).
    static let maxMessageBytes: Int64 = 4 << 20

    public init(logger: Logger, onTile: @escaping @Sendable (Received) -> Void) {
        self.logger = logger
        self.onTile = onTile
        let thread = Thread { [self] in
            serve()
            done.signal()
        }
        thread.name = "preview-receiver"
        thread.start()
    }

    /// Subscribes to a node's preview endpoint (done on the receiver's thread within 100 ms); `keys` pin the
    /// node's public key as its control link does.
    public func connect(_ endpoint: String, keys: LinkKeys?) {
        state.withLock { s in
            guard !s.connected.contains(endpoint) else { return }
            s.connected.insert(endpoint)
            s.connect.append((endpoint, keys))
        }
    }

    public func disconnect(_ endpoint: String) {
        state.withLock { s in
            guard s.connected.remove(endpoint) != nil else { return }
            s.disconnect.append(endpoint)
        }
    }

    public var counts: (received: Int64, refused: Int64) { state.withLock { ($0.received, $0.refused) } }

    public func stop() {
        state.withLock { $0.stopped = true }
        _ = done.wait(timeout: .now() + 2)
    }

    /// The endpoint to subscribe to for a node reached at `control`: a wildcard host in what the node bound
    /// (`tcp://0.0.0.0:PORT`, `tcp://*:PORT`) is the host the control endpoint names.
    public static func endpoint(published: String, control: String) -> String? {
        guard !published.isEmpty else { return nil }
        guard let bound = Endpoint(published), let reached = Endpoint(control),
              ["*", "0.0.0.0", "[::]", "::"].contains(bound.host) else { return published }
        return bound.with(host: reached.host).description
    }

    private func serve() {
        var options = ZMQSocket.Options()
        options.receiveTimeoutMs = 0
        options.lingerMs = 0
        options.receiveHighWaterMark = 16
        options.maxMessageBytes = Self.maxMessageBytes
        guard let socket = try? context.makeSocket(.subscriber, options: options) else {
            logger.error("the preview socket could not be made")
            return
        }
        defer { socket.close() }
        try? socket.subscribe()
        while true {
            let (stopped, connect, disconnect) = state.withLock { s in
                defer { s.connect = []; s.disconnect = [] }
                return (s.stopped, s.connect, s.disconnect)
            }
            if stopped { return }
            for (endpoint, keys) in connect {
                do {
                    // libzmq takes a socket's CURVE keys at each connect, so one SUB socket pins each node's own key.
                    if let keys { try socket.setCurve(ZMQSocket.Curve(keys)) }
                    try socket.connect(endpoint)
                } catch {
                    logger.warning("cannot subscribe to \(endpoint): \(error)")
                }
            }
            for endpoint in disconnect { try? socket.disconnect(endpoint) }
            guard (try? socket.poll(timeoutMs: 100))?.socket == true else { continue }
            // Drain what is there, then look at the control state again.
            for _ in 0..<64 {
                guard let frames = try? socket.receive() else { break }
                take(frames)
            }
        }
    }

    private func take(_ frames: [[UInt8]]) {
        guard let received = Self.received(frames) else {
            state.withLock { $0.refused += 1 }
            return
        }
        state.withLock { $0.received += 1 }
        onTile(received)
    }

    /// One published message as a tile, or nil when it is not a checked PreviewFrame with a picture (the fuzzer
    /// calls this as the receiver does).
    public static func received(_ frames: [[UInt8]]) -> Received? {
        guard frames.count == 1, let envelope = try? Wire.parse(frames[0]), (try? Wire.checkVersion(envelope)) != nil,
              case .previewFrame(let wire) = envelope.body, let f = try? NodeReply.previewFrame(wire, from: "a preview publisher"),
              !f.jpeg.isEmpty else { return nil }
        let tile = PreviewTile(key: CameraKey(node: f.node, camera: f.camera), group: f.group, centerMicroseconds: f.centerUs,
                               phaseErrorMicroseconds: f.phaseErrorUs, dropped: Int64(clamping: f.dropped),
                               width: Int(f.width), height: Int(f.height))
        return Received(tile: tile, takeID: f.takeID, centerUncertainty: f.centerUncertaintyUs.isFinite ? f.centerUncertaintyUs : 0,
                        jpeg: [UInt8](f.jpeg))
    }
}
