import CoordCore
import Foundation
import Logging
import Platform
import Synchronization
import ZeroMQ

/// A node's keys: its own pair (`--cert NAME.key_secret`) and the directory of coordinators' public certificates it
/// serves (`--authorized DIR`).
public struct NodeSecurity: Sendable {
    public var keys: CurveKeyPair
    public var authorizedDirectory: String

    public init(keys: CurveKeyPair, authorizedDirectory: String) {
        self.keys = keys
        self.authorizedDirectory = authorizedDirectory
    }

    /// Reads both; throws one sentence naming the file or directory at fault.
    public static func load(cert: String, authorized: String) throws(CurveCertificateError) -> NodeSecurity {
        let pair = try CurveCertificate.loadPair(cert)
        _ = try AuthorizedKeys.load(directory: authorized)
        return NodeSecurity(keys: pair, authorizedDirectory: authorized)
    }
}

/// Decides, for every context's ZAP handler, which CURVE clients may talk to this node: those whose public key is
/// in the authorized directory. The directory is looked at again at most every `lookInterval` when asked (a key
/// added or removed takes effect without a restart), and every message is judged again by the key it came under
/// (`serves(userID:)`), so a key removed from the directory stops being served within a second on a connection
/// that is already open. A denied peer is logged once per address and key per minute; a revoked key once.
final class Gatekeeper: Sendable {
    /// How stale the key set may be: revocation takes at most this (plus the time to read the directory).
    static let lookInterval: Int64 = 200_000
    private let security: NodeSecurity
    private let logger: Logger
    private struct State {
        var keys = AuthorizedKeys.none
        var directoryStamp: [Int64] = []
        var lastLook: Int64?
        var denials = RepeatLimiter()
        /// Keys whose messages are being dropped since they left the directory (logged once each; bounded by the
        /// keys ever admitted, and a key served again leaves it).
        var revokedLogged: Set<String> = []
        /// Counts key removals, so a socket that cannot judge each message (the preview's PUB) knows to make its
        /// subscribers pass the ZAP handler again.
        var revocations = 0
    }
    private let state = Mutex(State())

    init(security: NodeSecurity, logger: Logger) {
        self.security = security
        self.logger = logger
        _ = refresh(now: MonotonicClock.now())
    }

    var serverCurve: ZMQSocket.Curve { .server(secretKey: security.keys.secretKey) }

    /// Binds a ZAP handler on `context` that asks this gatekeeper (before any server socket of it binds).
    func guardContext(_ context: ZMQContext) throws(ZMQError) -> ZAPHandler {
        try ZAPHandler(context: context) { [self] request in decide(request) }
    }

    func decide(_ request: ZAPHandler.Request) -> Bool {
        let now = MonotonicClock.now()
        let keys = refresh(now: now)
        guard request.domain == ZAPHandler.domain, request.mechanism == "CURVE", let key = request.publicKey else {
            deny(request, why: "not CURVE", now: now)
            return false
        }
        guard keys.keys[key] != nil else {
            deny(request, why: "its public key is not in \(security.authorizedDirectory)", now: now)
            return false
        }
        return true
    }

    /// Whether a message that came under `userID` (the key ZAP admitted its connection with) is still to be
    /// served; a key no longer in the directory is logged once and its messages dropped.
    func serves(userID: String?) -> Bool {
        let keys = refresh(now: MonotonicClock.now())
        let key = userID ?? ""
        if keys.keys[key] != nil {
            state.withLock { s in
                if !s.revokedLogged.isEmpty { s.revokedLogged.remove(key) }
            }
            return true
        }
        let first = state.withLock { $0.revokedLogged.insert(key).inserted }
        if first {
            logger.warning("dropping the messages of a coordinator whose key left the authorized directory", metadata: [
                "public_key": "\(key.isEmpty ? "-" : key)", "directory": "\(security.authorizedDirectory)",
            ])
        }
        return false
    }

    /// How many times a key has left the directory (looked at now if due).
    var revocationCount: Int {
        _ = refresh(now: MonotonicClock.now())
        return state.withLock { $0.revocations }
    }

    private func deny(_ request: ZAPHandler.Request, why: String, now: Int64) {
        let key = request.publicKey ?? "-"
        let admission = state.withLock { $0.denials.admit("\(request.address) \(key)", now: now) }
        guard case .log(let heldBack) = admission else { return }
        logger.warning("denied a peer", metadata: [
            "address": "\(request.address.prefix(64))", "public_key": "\(key)", "why": "\(why)",
            "denied_since_last_line": "\(heldBack)",
        ])
    }

    /// The authorized keys, read again when the directory's or a key file's modification time, size or inode
    /// changed (looked at no more often than every `lookInterval`: a few stat calls).
    private func refresh(now: Int64) -> AuthorizedKeys {
        let (keys, due) = state.withLock { s -> (AuthorizedKeys, Bool) in
            guard let last = s.lastLook else { return (s.keys, true) }
            return (s.keys, now - last >= Self.lookInterval)
        }
        guard due else { return keys }
        let stamp = Self.stamp(security.authorizedDirectory)
        let changed = state.withLock { s -> Bool in
            s.lastLook = now
            return s.directoryStamp != stamp
        }
        guard changed else { return keys }
        do {
            let fresh = try AuthorizedKeys.load(directory: security.authorizedDirectory)
            for problem in fresh.problems { logger.warning("authorized key not used: \(problem)") }
            logger.info("authorized keys", metadata: ["directory": "\(security.authorizedDirectory)", "keys": "\(fresh.keys.count)"])
            state.withLock { s in
                if s.keys.keys.keys.contains(where: { fresh.keys[$0] == nil }) { s.revocations += 1 }
                s.keys = fresh
                s.directoryStamp = stamp
            }
            return fresh
        } catch {
            // An unreadable directory admits nobody (never everybody).
            logger.error("\(error.description) No coordinator is admitted until it can be read.")
            state.withLock { s in
                if !s.keys.keys.isEmpty { s.revocations += 1 }
                s.keys = AuthorizedKeys.none
                s.directoryStamp = stamp
            }
            return AuthorizedKeys.none
        }
    }

    /// The directory's and its key files' modification times and sizes: changes when a key file is added,
    /// removed or rewritten.
    private static func stamp(_ directory: String) -> [Int64] {
        var result: [Int64] = []
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for path in [directory] + names.sorted().filter({ $0.hasSuffix(".key") }).map({ directory + "/" + $0 }) {
            var info = stat()
            guard stat(path, &info) == 0 else { result.append(-1); continue }
            result += [Int64(info.st_mtim.tv_sec), Int64(info.st_mtim.tv_nsec), Int64(info.st_size), Int64(info.st_ino)]
        }
        return result
    }
}
