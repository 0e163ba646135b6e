// With Curve.swift (CURVE keys and Z85), the only file in coord that calls libzmq. Every context and socket call
// goes through `check`, which retries EINTR and turns a failure into a `ZMQError` carrying the real errno.
import CZeroMQ
import Foundation
import Platform
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A libzmq call that failed, with its errno; renders as one sentence.
public struct ZMQError: Error, CustomStringConvertible, Sendable {
    public let operation: String
    public let endpoint: String?
    public let code: Int32

    public var description: String {
        let reason = String(cString: zmq_strerror(code))
        if let endpoint { return "\(operation) on \(endpoint) failed: \(reason) (errno \(code))." }
        return "\(operation) failed: \(reason) (errno \(code))."
    }
}

@inline(__always)
func check(_ operation: @autoclosure () -> String, endpoint: String? = nil, _ call: () -> Int32) throws(ZMQError) -> Int32 {
    while true {
        let rc = call()
        if rc >= 0 { return rc }
        let code = zmq_errno()
        if code == czmq_EINTR { continue }
        throw ZMQError(operation: operation(), endpoint: endpoint, code: code)
    }
}

/// One libzmq context per process.
// @unchecked: a libzmq context is thread-safe by design (zmq_ctx_* may be called from any thread).
public final class ZMQContext: @unchecked Sendable {
    let handle: UnsafeMutableRawPointer

    /// `realtimeIOThreads` gives libzmq's I/O thread a real-time priority when the process may (see
    /// `ThreadPriority`): it carries every clock probe, so its wake-up latency is part of the measurement.
    public init(realtimeIOThreads: Bool = false) {
        handle = zmq_ctx_new()
        // libzmq asserts if it cannot apply these when it starts its thread, so only set what is allowed.
        if realtimeIOThreads && ThreadPriority.realtimeAllowed {
            _ = zmq_ctx_set(handle, ZMQ_THREAD_SCHED_POLICY, SCHED_FIFO)
            _ = zmq_ctx_set(handle, ZMQ_THREAD_PRIORITY, ThreadPriority.realtime)
        }
    }

    /// Ends blocking calls in every socket of this context (they fail with ETERM).
    public func shutdown() {
        _ = zmq_ctx_shutdown(handle)
    }

    deinit {
        _ = zmq_ctx_term(handle)
    }

    /// The one place sockets are made: transport security (CURVE) will be configured here.
    public func makeSocket(_ kind: ZMQSocket.Kind, options: ZMQSocket.Options = .init()) throws(ZMQError) -> ZMQSocket {
        guard let raw = zmq_socket(handle, kind.zmqType) else {
            throw ZMQError(operation: "zmq_socket", endpoint: nil, code: zmq_errno())
        }
        let socket = ZMQSocket(raw)
        do {
            try socket.apply(options)
        } catch {
            socket.close()
            throw error
        }
        return socket
    }
}

/// A ZeroMQ socket. Not thread-safe: one thread owns it for its whole life. Sendable only so that the thread
/// that made it can hand it to the thread that will own it (before that thread's first call); it is never used
/// from two threads.
public final class ZMQSocket: @unchecked Sendable {
    public enum Kind: Sendable {
        case dealer, router, pair
        /// Reply: the ZAP handler's socket (`ZAPHandler`).
        case reply
        /// Publish (never blocks: a subscriber whose queue is full misses the message) and subscribe.
        case publisher, subscriber
        var zmqType: Int32 {
            switch self {
            case .dealer: return ZMQ_DEALER
            case .router: return ZMQ_ROUTER
            case .pair: return ZMQ_PAIR
            case .reply: return ZMQ_REP
            case .publisher: return ZMQ_PUB
            case .subscriber: return ZMQ_SUB
            }
        }
    }

    /// Socket options coord always sets: nothing blocks without a timeout and close never hangs.
    public struct Options: Sendable {
        public var sendTimeoutMs: Int32 = 1000
        public var receiveTimeoutMs: Int32 = 1000
        /// Bounded so closing a socket with unsent messages cannot hang shutdown.
        public var lingerMs: Int32 = 200
        /// Messages larger than this make libzmq drop the peer (protects memory); -1 means unlimited.
        public var maxMessageBytes: Int64 = -1
        public var sendHighWaterMark: Int32 = 1000
        public var receiveHighWaterMark: Int32 = 1000
        /// ROUTER only: fail a send to an unknown peer with EHOSTUNREACH instead of dropping silently.
        public var routerMandatory = false
        /// CURVE: encrypted and authenticated (nil: ZeroMQ's NULL mechanism, for loopback and the demo).
        public var curve: Curve?
        public init() {}
    }

    /// CURVE roles. A server needs only its own secret key (its clients are judged by the context's
    /// `ZAPHandler`); a client pins the server's public key and proves its own pair.
    public enum Curve: Sendable, Equatable {
        case server(secretKey: String)
        case client(serverKey: String, publicKey: String, secretKey: String)
    }

    private var raw: UnsafeMutableRawPointer?
    private var lastEndpointDescription = "socket"

    init(_ raw: UnsafeMutableRawPointer) { self.raw = raw }

    deinit { close() }

    func apply(_ options: Options) throws(ZMQError) {
        try setInt32(ZMQ_SNDTIMEO, options.sendTimeoutMs, "ZMQ_SNDTIMEO")
        try setInt32(ZMQ_RCVTIMEO, options.receiveTimeoutMs, "ZMQ_RCVTIMEO")
        try setInt32(ZMQ_LINGER, options.lingerMs, "ZMQ_LINGER")
        try setInt32(ZMQ_SNDHWM, options.sendHighWaterMark, "ZMQ_SNDHWM")
        try setInt32(ZMQ_RCVHWM, options.receiveHighWaterMark, "ZMQ_RCVHWM")
        var max = options.maxMessageBytes
        _ = try check("zmq_setsockopt(ZMQ_MAXMSGSIZE)") { zmq_setsockopt(raw, ZMQ_MAXMSGSIZE, &max, MemoryLayout<Int64>.size) }
        if options.routerMandatory { try setInt32(ZMQ_ROUTER_MANDATORY, 1, "ZMQ_ROUTER_MANDATORY") }
        if let curve = options.curve { try setCurve(curve) }
    }

    /// Sets the CURVE keys for the next bind or connect (libzmq copies a socket's options at each connect, so a
    /// SUB socket can pin a different server key before each of its connections).
    public func setCurve(_ curve: Curve) throws(ZMQError) {
        switch curve {
        case .server(let secretKey):
            try setInt32(ZMQ_CURVE_SERVER, 1, "ZMQ_CURVE_SERVER")
            try setKey(ZMQ_CURVE_SECRETKEY, secretKey, "ZMQ_CURVE_SECRETKEY")
            // Every CURVE server in coord is judged by the context's ZAP handler, under this domain.
            _ = try check("zmq_setsockopt(ZMQ_ZAP_DOMAIN)") { zmq_setsockopt(raw, ZMQ_ZAP_DOMAIN, ZAPHandler.domain, ZAPHandler.domain.utf8.count) }
        case .client(let serverKey, let publicKey, let secretKey):
            try setKey(ZMQ_CURVE_SERVERKEY, serverKey, "ZMQ_CURVE_SERVERKEY")
            try setKey(ZMQ_CURVE_PUBLICKEY, publicKey, "ZMQ_CURVE_PUBLICKEY")
            try setKey(ZMQ_CURVE_SECRETKEY, secretKey, "ZMQ_CURVE_SECRETKEY")
        }
    }

    /// A Z85 key is 40 characters; libzmq reads 41 bytes (with the NUL) as text, 32 as binary.
    private func setKey(_ option: Int32, _ z85: String, _ name: String) throws(ZMQError) {
        guard CurveKeyPair.isZ85Key(z85) else { throw ZMQError(operation: "zmq_setsockopt(\(name))", endpoint: nil, code: EINVAL) }
        _ = try check("zmq_setsockopt(\(name))") { z85.withCString { zmq_setsockopt(raw, option, $0, 41) } }
    }

    private func setInt32(_ option: Int32, _ value: Int32, _ name: String) throws(ZMQError) {
        var v = value
        _ = try check("zmq_setsockopt(\(name))") { zmq_setsockopt(raw, option, &v, MemoryLayout<Int32>.size) }
    }

    /// Binds and returns the endpoint actually bound (a `*` port resolved to the real one).
    @discardableResult
    public func bind(_ endpoint: String) throws(ZMQError) -> String {
        _ = try check("zmq_bind", endpoint: endpoint) { zmq_bind(raw, endpoint) }
        var buffer = [CChar](repeating: 0, count: 256)
        var size = buffer.count
        _ = try check("zmq_getsockopt(ZMQ_LAST_ENDPOINT)", endpoint: endpoint) { zmq_getsockopt(raw, ZMQ_LAST_ENDPOINT, &buffer, &size) }
        let bound = String(cString: buffer)
        lastEndpointDescription = bound
        return bound
    }

    /// A subscriber receives the messages that start with `prefix` (empty: all).
    public func subscribe(_ prefix: [UInt8] = []) throws(ZMQError) {
        _ = try check("zmq_setsockopt(ZMQ_SUBSCRIBE)") { prefix.withUnsafeBytes { zmq_setsockopt(raw, ZMQ_SUBSCRIBE, $0.baseAddress, $0.count) } }
    }

    public func disconnect(_ endpoint: String) throws(ZMQError) {
        _ = try check("zmq_disconnect", endpoint: endpoint) { zmq_disconnect(raw, endpoint) }
    }

    public func connect(_ endpoint: String) throws(ZMQError) {
        _ = try check("zmq_connect", endpoint: endpoint) { zmq_connect(raw, endpoint) }
        lastEndpointDescription = endpoint
    }

    /// Sends a multipart message. Returns false if the send timed out (peer absent or queue full).
    @discardableResult
    public func send(_ frames: [[UInt8]]) throws(ZMQError) -> Bool {
        for (index, frame) in frames.enumerated() {
            let flags: Int32 = index < frames.count - 1 ? ZMQ_SNDMORE : 0
            let rc = frame.withUnsafeBytes { bytes in
                sendRetryingEINTR(bytes.baseAddress, bytes.count, flags)
            }
            if rc < 0 {
                let code = zmq_errno()
                if code == czmq_EAGAIN && index == 0 { return false }
                throw ZMQError(operation: "zmq_send", endpoint: lastEndpointDescription, code: code)
            }
        }
        return true
    }

    /// Sends `frames` and then `tail` as the last frame without copying it: libzmq takes the buffer and frees it
    /// once sent (or at once when the send fails). Returns false if the first frame timed out.
    @discardableResult
    public func send(_ frames: [[UInt8]], tail: OwnedBytes) throws(ZMQError) -> Bool {
        var tailTaken = false
        defer { if !tailTaken { tail.free() } }
        for (index, frame) in frames.enumerated() {
            let rc = frame.withUnsafeBytes { bytes in sendRetryingEINTR(bytes.baseAddress, bytes.count, ZMQ_SNDMORE) }
            if rc < 0 {
                let code = zmq_errno()
                if code == czmq_EAGAIN && index == 0 { return false }
                throw ZMQError(operation: "zmq_send", endpoint: lastEndpointDescription, code: code)
            }
        }
        var message = zmq_msg_t()
        // From here on libzmq owns the buffer: zmq_msg_close frees it if the send fails.
        tailTaken = true
        _ = zmq_msg_init_data(&message, tail.base, tail.count, { data, _ in
            if let data { ChunkBuffers.shared.giveBack(data) }
        }, nil)
        while true {
            if zmq_msg_send(&message, raw, 0) >= 0 { return true }
            let code = zmq_errno()
            if code == czmq_EINTR { continue }
            zmq_msg_close(&message)
            throw ZMQError(operation: "zmq_msg_send", endpoint: lastEndpointDescription, code: code)
        }
    }

    /// Receives one multipart message as `Data`, each frame of 64 KiB or more without a copy (the `Data` keeps
    /// libzmq's message until it is released); nil when the receive timeout passed with nothing to read.
    public func receiveData() throws(ZMQError) -> [Data]? {
        var frames: [Data] = []
        while true {
            let message = UnsafeMutablePointer<zmq_msg_t>.allocate(capacity: 1)
            _ = zmq_msg_init(message)
            let rc = zmq_msg_recv(message, raw, 0)
            if rc < 0 {
                zmq_msg_close(message)
                message.deallocate()
                let code = zmq_errno()
                if code == czmq_EINTR { continue }
                if code == czmq_EAGAIN && frames.isEmpty { return nil }
                throw ZMQError(operation: "zmq_msg_recv", endpoint: lastEndpointDescription, code: code)
            }
            let size = zmq_msg_size(message)
            let more = zmq_msg_more(message) != 0
            if size >= 64 << 10, let data = zmq_msg_data(message) {
                frames.append(Data(bytesNoCopy: data, count: size, deallocator: .custom { _, _ in
                    zmq_msg_close(message)
                    message.deallocate()
                }))
            } else {
                frames.append(size > 0 ? Data(bytes: zmq_msg_data(message)!, count: size) : Data())
                zmq_msg_close(message)
                message.deallocate()
            }
            if !more { return frames }
        }
    }

    private func sendRetryingEINTR(_ base: UnsafeRawPointer?, _ count: Int, _ flags: Int32) -> Int32 {
        while true {
            let rc = zmq_send(raw, base, count, flags)
            if rc < 0 && zmq_errno() == czmq_EINTR { continue }
            return rc
        }
    }

    /// Receives one multipart message; nil when the receive timeout passed with nothing to read.
    public func receive() throws(ZMQError) -> [[UInt8]]? {
        var ignored: String?
        return try receive(userID: &ignored)
    }

    /// Receives one multipart message and the User-Id its peer was admitted under (the ZAP handler's answer: the
    /// client's public key for CURVE; nil for a peer no handler judged). Checked per message, so a key revoked
    /// after its connection was admitted can be refused on that same connection.
    public func receive(userID: inout String?) throws(ZMQError) -> [[UInt8]]? {
        userID = nil
        var frames: [[UInt8]] = []
        var message = zmq_msg_t()
        _ = zmq_msg_init(&message)
        defer { zmq_msg_close(&message) }
        while true {
            let rc = zmq_msg_recv(&message, raw, 0)
            if rc < 0 {
                let code = zmq_errno()
                if code == czmq_EINTR { continue }
                if code == czmq_EAGAIN && frames.isEmpty { return nil }
                throw ZMQError(operation: "zmq_msg_recv", endpoint: lastEndpointDescription, code: code)
            }
            let size = zmq_msg_size(&message)
            let data = zmq_msg_data(&message)
            if let data, size > 0 {
                frames.append(Array(UnsafeRawBufferPointer(start: data, count: size)))
            } else {
                frames.append([])
            }
            // A ROUTER's identity frame is made locally and carries no metadata; the peer's frames do.
            if let id = zmq_msg_gets(&message, "User-Id") { userID = String(cString: id) }
            if zmq_msg_more(&message) == 0 { return frames }
        }
    }

    /// Waits up to `timeoutMs` until the socket is readable, or until `wakeFD` (an eventfd or pipe) is.
    /// Returns (socketReadable, wakeReadable).
    public func poll(timeoutMs: Int, wakeFD: Int32? = nil) throws(ZMQError) -> (socket: Bool, wake: Bool) {
        var items = [zmq_pollitem_t(socket: raw, fd: 0, events: Int16(ZMQ_POLLIN), revents: 0)]
        if let wakeFD { items.append(zmq_pollitem_t(socket: nil, fd: wakeFD, events: Int16(ZMQ_POLLIN), revents: 0)) }
        let count = Int32(items.count)
        let rc = zmq_poll(&items, count, timeoutMs)
        if rc < 0 {
            let code = zmq_errno()
            if code == czmq_EINTR { return (false, false) }
            throw ZMQError(operation: "zmq_poll", endpoint: lastEndpointDescription, code: code)
        }
        let socketReady = items[0].revents & Int16(ZMQ_POLLIN) != 0
        let wakeReady = items.count > 1 && items[1].revents & Int16(ZMQ_POLLIN) != 0
        return (socketReady, wakeReady)
    }

    public func close() {
        if let raw {
            _ = zmq_close(raw)
            self.raw = nil
        }
    }
}

/// Bytes in a buffer of `ChunkBuffers`, handed to libzmq to send without a copy (`ZMQSocket.send(_:tail:)`),
/// which gives the buffer back once the bytes are on their way.
// @unchecked: a raw pointer; the bytes have one owner at a time (the filler, then libzmq), never two threads at once.
public struct OwnedBytes: @unchecked Sendable {
    public let base: UnsafeMutableRawPointer
    public let count: Int

    /// Room for `count` bytes (at least 1, so the pointer is never null).
    public static func allocate(_ count: Int) -> OwnedBytes? {
        ChunkBuffers.shared.take(count).map { OwnedBytes(base: $0, count: count) }
    }

    /// These bytes with `count` cut to `n` (n ≤ count).
    public func prefix(_ n: Int) -> OwnedBytes { OwnedBytes(base: base, count: min(n, count)) }

    /// Gives the buffer back; only for bytes that were never given to `send(_:tail:)`.
    public func free() { ChunkBuffers.shared.giveBack(base) }
}

/// Buffers for chunks being sent, reused: a fresh megabyte from the system costs 256 page faults and as many
/// zeroed pages (a node serving a take spent a fifth of its CPU on that), so up to `keep` given-back buffers are
/// held for the next chunk, and `trim()` returns them when collection is over.
public final class ChunkBuffers: Sendable {
    public static let shared = ChunkBuffers(keep: 16)
    private let keep: Int
    // Addresses as integers: raw pointers are not Sendable, and the pool only ever hands them back.
    private struct State {
        var capacity: [UInt: Int] = [:]
        var idle: [UInt] = []
    }
    private let state = Mutex(State())

    init(keep: Int) { self.keep = keep }

    /// A buffer of at least `count` bytes.
    public func take(_ count: Int) -> UnsafeMutableRawPointer? {
        let want = max(1, count)
        let reused: UInt? = state.withLock { s in
            guard let i = s.idle.firstIndex(where: { s.capacity[$0]! >= want }) else { return nil }
            return s.idle.remove(at: i)
        }
        if let reused { return UnsafeMutableRawPointer(bitPattern: reused) }
        guard let base = Glibc.malloc(want) else { return nil }
        state.withLock { $0.capacity[UInt(bitPattern: base)] = want }
        return base
    }

    /// Takes a buffer back (any thread, libzmq's I/O thread included).
    public func giveBack(_ base: UnsafeMutableRawPointer) {
        let address = UInt(bitPattern: base)
        let drop: UInt? = state.withLock { s in
            s.idle.append(address)
            guard s.idle.count > keep else { return nil }
            // Full: free the smallest, so the pool follows the chunk size in use.
            let smallest = s.idle.indices.min { s.capacity[s.idle[$0]]! < s.capacity[s.idle[$1]]! }!
            let victim = s.idle.remove(at: smallest)
            s.capacity[victim] = nil
            return victim
        }
        if let drop { Glibc.free(UnsafeMutableRawPointer(bitPattern: drop)) }
    }

    /// Frees every idle buffer; how many were freed.
    @discardableResult
    public func trim() -> Int {
        let freed: [UInt] = state.withLock { s in
            let idle = s.idle
            s.idle.removeAll()
            for p in idle { s.capacity[p] = nil }
            return idle
        }
        for p in freed { Glibc.free(UnsafeMutableRawPointer(bitPattern: p)) }
        return freed.count
    }

    /// Buffers idle in the pool.
    public var idleCount: Int { state.withLock { $0.idle.count } }
}

/// libzmq's version, e.g. "4.3.4".
public var zmqVersion: String {
    var major: Int32 = 0, minor: Int32 = 0, patch: Int32 = 0
    zmq_version(&major, &minor, &patch)
    return "\(major).\(minor).\(patch)"
}
