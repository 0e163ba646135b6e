import CoordCore
import CoordWire
import Foundation
import Logging
import Platform
import ZeroMQ

/// Request routing: which lane serves a request, and which of the agent's parts answers it.
extension NodeAgent {
    /// Where a request is served: on the socket thread, or on a lane of its own.
    public enum Lane: Sendable {
        /// Opening cameras and probing the host (Arm, Hello): up to seconds.
        case control
        /// Listing and deleting take files (ListFiles, ConfirmCollected, and FetchChunk asked for inline bytes).
        case files
    }

    /// A reply and, for a chunk asked for as a raw frame, its bytes to send after it without a copy.
    public struct Reply: Sendable {
        public var envelope: Envelope
        public var rawFrame: OwnedBytes?
    }

    /// What the socket thread does with one request.
    public enum Handling: Sendable {
        /// The reply, made at once: clock probes, status and acks take microseconds.
        case reply(Envelope)
        /// Work that may take long, done on its lane; the socket thread sends its reply when it is ready, so clock
        /// probes are stamped and answered meanwhile.
        case deferred(Lane, @Sendable () -> Envelope)
        /// A chunk read: served several at a time off the socket thread, its bytes sent as a raw frame.
        case chunk(@Sendable () -> Reply)
    }

    /// Checks one request and says how it is served. `receivedLocal` is the local time the bytes came off the
    /// socket.
    public func receive(_ bytes: [UInt8], receivedLocal: Int64) -> Handling {
        let envelope: Envelope
        do {
            envelope = try Wire.parse(bytes)
        } catch {
            logBadInput("rejected a message", error)
            return .reply(Wire.error(0, error))
        }
        let id = envelope.requestID
        let request: NodeRequest
        do {
            request = try Wire.request(envelope)
        } catch {
            logBadInput("request refused", error)
            return .reply(Wire.error(id, error))
        }
        switch request {
        case .hello, .arm, .startPreview, .setControls, .previewTrain:
            return .deferred(.control) { [self] in respond(to: request, id, receivedLocal: receivedLocal) }
        case .fetchChunk(let fetch) where fetch.rawFrame:
            return .chunk { [self] in chunkReply(id, fetch) }
        case .listFiles, .fetchChunk, .confirmCollected:
            return .deferred(.files) { [self] in respond(to: request, id, receivedLocal: receivedLocal) }
        default:
            return .reply(respond(to: request, id, receivedLocal: receivedLocal))
        }
    }

    /// Bad input is logged once a minute per kind of fault, with how many like it were not logged: a stream of
    /// garbage cannot fill the disk or the journal.
    func logBadInput(_ what: String, _ failure: NodeFailure, request: String = "") {
        let admission = badInputLog.withLock { $0.admit("\(what) \(request) \(failure.code)", now: MonotonicClock.now()) }
        guard case .log(let heldBack) = admission else { return }
        var metadata: Logger.Metadata = ["reason": "\(failure.message)"]
        if heldBack > 0 { metadata["like_it_since_last_line"] = "\(heldBack)" }
        logger.warning("\(what)", metadata: metadata)
    }

    /// Handles one request to its reply on the calling thread, whatever its lane.
    public func handle(_ bytes: [UInt8], receivedLocal: Int64) -> Envelope {
        switch receive(bytes, receivedLocal: receivedLocal) {
        case .reply(let reply): return reply
        case .deferred(_, let work): return work()
        case .chunk(let work):
            // No socket here: the bytes go back inline.
            var reply = work()
            if let raw = reply.rawFrame, case .chunk(var chunk) = reply.envelope.body {
                chunk.data = Data(bytes: raw.base, count: raw.count)
                raw.free()
                reply.envelope.body = .chunk(chunk)
            }
            return reply.envelope
        }
    }

    private func respond(to request: NodeRequest, _ id: UInt64, receivedLocal: Int64) -> Envelope {
        do {
            return try reply(to: request, id, receivedLocal: receivedLocal)
        } catch {
            // Limited like bad input (a peer can send a refused request in a loop), per kind of request, so a
            // refusal of one kind is never hidden behind a stream of another.
            logBadInput("request refused", error, request: request.kind)
            return Wire.error(id, error)
        }
    }

    private func reply(to request: NodeRequest, _ id: UInt64, receivedLocal: Int64) throws(NodeFailure) -> Envelope {
        switch request {
        case .hello(let coordinator):
            logger.info("hello", metadata: ["coordinator": "\(coordinator.prefix(64))"])
            var r = Coord_V1_HelloReply()
            r.node = configuration.name
            r.agentVersion = NodeAgent.version
            r.cameras = cameras.map(\.wire)
            r.host = ProcessInfo.processInfo.hostName
            r.instanceID = instanceID
            r.previewEndpoint = preview?.endpoint ?? ""
            r.mics = configuration.micNames
            r.timeService = TimeService.describe()
            r.resources = probe.resources(staging: configuration.staging, calibration: calibration(),
                                          buses: buses).wire
            return Wire.envelope(id, .helloReply(r))
        case .clockProbe(let sentLocal):
            var r = Coord_V1_ClockProbeReply()
            r.t1Us = sentLocal
            r.t2Us = receivedLocal
            r.t3Us = localNow()
            return Wire.envelope(id, .clockProbeReply(r))
        case .configure(let takeID, let cameras):
            try configure(takeID: takeID, cameras: cameras)
            return ack(id, "configured \(cameras.count) camera(s)")
        case .arm(let arm):
            return Wire.envelope(id, .armed(try self.arm(arm)))
        case .adjustCamera(let takeID, let camera, let adjustment, let reason):
            return ack(id, try adjust(takeID: takeID, camera: camera, adjustment, reason: reason))
        case .startPreview(let start):
            return ack(id, try startPreview(start))
        case .setControls(let camera, let controls):
            return Wire.envelope(id, .controlsApplied(try setControls(camera: camera, controls)))
        case .previewTrain(let on):
            return ack(id, try previewTrain(on: on))
        case .keepStills(let shotID, let groups, let format, let modes):
            return ack(id, try keepStills(shotID: shotID, groups: groups, format: format, modes: modes))
        case .clockUpdate(let takeID, let clock):
            return ack(id, try updateClock(takeID: takeID, clock))
        case .startAt(let takeID, let startGroup, let stopGroup):
            try start(takeID: takeID, startGroup: startGroup, stopGroup: stopGroup)
            return ack(id, "recording")
        case .stopAt(let takeID, let stopGroup):
            try stop(takeID: takeID, stopGroup: stopGroup)
            return ack(id, "stopping at group \(stopGroup)")
        case .abort(let takeID, let reason):
            try abort(takeID: takeID, reason: reason)
            return ack(id, "aborted")
        case .status:
            return Wire.envelope(id, .status(status()))
        case .listFiles(let takeID):
            return Wire.envelope(id, .fileList(try files(takeID)))
        case .fetchChunk(let fetch):
            return Wire.envelope(id, .chunk(try chunk(fetch)))
        case .confirmCollected(let takeID, let files, let keep):
            return ack(id, try confirmed(takeID: takeID, files: files, keep: keep))
        }
    }

    private func ack(_ id: UInt64, _ detail: String) -> Envelope {
        var a = Coord_V1_Ack()
        a.detail = detail
        return Wire.envelope(id, .ack(a))
    }

}
