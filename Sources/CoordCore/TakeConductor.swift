/// The decisions of a take from the moment every node accepted its start until every file is final, in the
/// manner of SWIM's instance: what happened goes in (a node's status, an acknowledged or lost stop, the
/// operator's stop, the clock), what to do comes out (send a stop, ask for statuses, record an event, tell the
/// operator, finish). It touches no socket and reads no clock, so every path is a unit test; `TakeSession` only
/// carries the directives out, and a console's Stop button is the same input as Ctrl-C.
public struct TakeConductor: Sendable {
    public struct Timing: Sendable {
        /// How far ahead an early stop is placed: time for a StopAt to reach a node that is briefly unreachable.
        public var stopLead: Int64 = 2_000_000
        /// Past the stop instant, a node silent this long is given up on and the others are collected.
        public var silentAfter: Int64 = 5_000_000
        /// Nodes finish on their own at the stop group; this allows for encoders to drain and files to be hashed.
        public var finishAllowance: Int64 = 30_000_000
        /// A node whose cameras have all ended is checksumming its files (gigabytes after a long take: found by
        /// the 30-minute soak, which gave up on both nodes after 30 s); it is waited for this long.
        public var checksumAllowance: Int64 = 600_000_000
        public init() {}
    }

    /// A node's state as its status reports it.
    public typealias NodeState = CoordCore.NodeState

    /// What one status reply says, in the conductor's words.
    public struct NodeReport: Sendable, Equatable {
        public var takeID: String
        public var state: NodeState
        /// The group the node's take stops before (0: none placed).
        public var stopGroup: Int64
        /// Why the node failed, when it did.
        public var detail: String
        /// Each camera's error, if it has one (it stays in every status after it happened).
        public var cameraErrors: [(camera: String, error: String)]
        /// Cameras disabled mid-take (by this coordinator's pressure policy, or by someone else).
        public var disabledCameras: [String]
        /// The last group any of the node's cameras has written (-1: none yet).
        public var lastGroup: Int64
        /// Every camera of the node has ended its files: while still recording, the node is checksumming them.
        public var camerasFinished: Bool

        public init(takeID: String, state: NodeState, stopGroup: Int64 = 0, detail: String = "",
                    cameraErrors: [(camera: String, error: String)] = [], disabledCameras: [String] = [],
                    lastGroup: Int64 = -1, camerasFinished: Bool = false) {
            self.takeID = takeID; self.state = state; self.stopGroup = stopGroup; self.detail = detail
            self.cameraErrors = cameraErrors; self.disabledCameras = disabledCameras; self.lastGroup = lastGroup
            self.camerasFinished = camerasFinished
        }

        public static func == (a: NodeReport, b: NodeReport) -> Bool {
            a.takeID == b.takeID && a.state == b.state && a.stopGroup == b.stopGroup && a.detail == b.detail
                && a.disabledCameras == b.disabledCameras && a.lastGroup == b.lastGroup
                && a.cameraErrors.map { "\($0.camera)\u{0}\($0.error)" } == b.cameraErrors.map { "\($0.camera)\u{0}\($0.error)" }
        }
    }

    public enum Input: Sendable {
        /// The operator asked to stop (Ctrl-C, a console's Stop button).
        case operatorStop(now: Int64)
        case status(node: String, NodeReport, now: Int64)
        case statusFailed(node: String, now: Int64)
        case stopAcknowledged(node: String, now: Int64)
        case stopFailed(node: String)
        /// Time passed: says what to do now.
        case tick(now: Int64)
    }

    public enum Directive: Sendable, Equatable {
        /// Send StopAt(group) to these nodes; those in `freshConnection` over a new connection, since the old one
        /// may sit in TCP's retransmission back-off for seconds after the path is back.
        case sendStop(group: Int64, nodes: [String], freshConnection: [String])
        case requestStatus(nodes: [String])
        case record(TakeEvent)
        /// One line of progress for the operator.
        case say(String)
        case finish(Finish)
    }

    /// How recording ended.
    public struct Finish: Sendable, Equatable {
        /// Groups the take holds (fewer than planned if it was stopped early).
        public var groups: Int64
        /// Nodes that did not report their files final, failed or went silent.
        public var unfinished: Set<String>
        public init(groups: Int64, unfinished: Set<String>) { self.groups = groups; self.unfinished = unfinished }
    }

    public let takeID: String
    public let nodes: [String]
    public let grid: FrameGrid
    public let timing: Timing
    public private(set) var groups: Int64
    public private(set) var finished: Set<String> = []
    public private(set) var silent: Set<String> = []
    /// An early stop was placed (by the operator here or by `coord stop-take` elsewhere).
    public private(set) var stopping = false
    public private(set) var isDone = false
    private var failed: Set<String> = []
    private var lastHeard: [String: Int64]
    /// Nodes still to acknowledge an early stop, and those that needed more than one try.
    private var unstopped: Set<String> = []
    private var stopRetried: Set<String> = []
    private var reportedErrors: Set<String> = []
    /// Cameras ("node/camera") this coordinator's pressure policy disabled, and those someone else disabled.
    private var disabledHere: Set<String> = []
    private var stopsNamed: Set<String> = []
    public private(set) var disabledElsewhere: Set<String> = []
    /// Nodes that no longer hold this take: someone else aborted it there.
    public private(set) var lost: Set<String> = []
    /// Nodes whose cameras have ended and which are checksumming their files.
    public private(set) var checksumming: Set<String> = []

    public init(takeID: String, nodes: [String], grid: FrameGrid, groups: Int64, now: Int64, timing: Timing = Timing()) {
        self.takeID = takeID
        self.nodes = nodes
        self.grid = grid
        self.groups = groups
        self.timing = timing
        lastHeard = Dictionary(uniqueKeysWithValues: nodes.map { ($0, now) })
    }

    /// The instant the last group ends.
    public var stopInstant: Int64 { grid.instant(ofGroup: groups) }
    private var deadline: Int64 { stopInstant + timing.finishAllowance }

    /// How long the shell waits before the next tick: half a second, sooner once the stop instant is near.
    public func pollInterval(now: Int64) -> Int64 {
        let untilStop = stopInstant - now
        return max(100_000, min(500_000, untilStop > 0 ? untilStop : 200_000))
    }

    /// This coordinator's pressure policy disabled the camera (so a status saying so is no surprise).
    public mutating func disabledByPolicy(node: String, camera: String) {
        disabledHere.insert("\(node)/\(camera)")
    }

    public mutating func handle(_ input: Input) -> [Directive] {
        guard !isDone else { return [] }
        switch input {
        case .operatorStop(let now):
            let stop = max(1, min(groups, grid.nearestGroup(to: now + timing.stopLead) + 1))
            guard stop < groups else { return [] }
            let seconds = Double(grid.instant(ofGroup: stop) - now) / 1e6
            return placeStop(stop, now: now, node: "",
                             say: "stopping every camera after group \(stop - 1), in \(Self.tenths(seconds)) s",
                             detail: "stopped early at group \(stop)")
        case .status(let node, let report, let now):
            return status(node, report, now: now)
        case .statusFailed(let node, let now):
            let heard = lastHeard[node] ?? now
            guard now > stopInstant + timing.silentAfter, now - heard > timing.silentAfter,
                  silent.insert(node).inserted else { return [] }
            return [.say("node \(node) has not answered for \((now - heard) / 1_000_000) s; collecting the others")]
        case .stopAcknowledged(let node, let now):
            guard unstopped.remove(node) != nil, stopRetried.contains(node) else { return [] }
            let ahead = Double(stopInstant - now) / 1e6
            return [.record(TakeEvent(.stopDelivered, at: now, node: node,
                                      "the stop reached node \(node) only on a retry, \(Self.tenths(ahead)) s before the stop instant"))]
        case .stopFailed(let node):
            guard stopRetried.insert(node).inserted else { return [] }
            return [.say("node \(node) did not acknowledge the stop yet; retrying")]
        case .tick(let now):
            let pending = nodes.filter { !finished.contains($0) && !silent.contains($0) }
            let waitedFor = pending.filter { now <= (checksumming.contains($0) ? stopInstant + timing.checksumAllowance : deadline) }
            if waitedFor.isEmpty { return finish(now: now) }
            var directives: [Directive] = []
            let toStop = nodes.filter { unstopped.contains($0) && !silent.contains($0) }
            if !toStop.isEmpty {
                directives.append(.sendStop(group: groups, nodes: toStop, freshConnection: toStop.filter { stopRetried.contains($0) }))
            }
            directives.append(.requestStatus(nodes: pending))
            return directives
        }
    }

    private mutating func status(_ node: String, _ report: NodeReport, now: Int64) -> [Directive] {
        lastHeard[node] = now
        var directives: [Directive] = []
        // The node holds another take or none: someone else aborted ours there. Named now, not at the deadline.
        if report.takeID != takeID {
            guard lost.insert(node).inserted else { return [] }
            finished.insert(node)
            failed.insert(node)
            let holds = report.takeID.isEmpty ? "no take" : "take \(report.takeID)"
            // A node that holds no take and says nothing of an abort has most likely been restarted (a node
            // stopped mid-take by its own signal says so, and a restarted one still reports that take).
            let detail = report.takeID.isEmpty && report.detail.isEmpty
                ? "take \(takeID) is gone from node \(node), which now holds no take and says nothing of it: the node was restarted without it, or another coordinator or peer aborted it"
                : "take \(takeID) was aborted on node \(node) by another coordinator or peer, not by this one (the node now holds \(holds)\(report.detail.isEmpty ? "" : ": \(report.detail)"))"
            return [.say(detail), .record(TakeEvent(.takeAborted, at: now, node: node, detail))]
        }
        for camera in report.disabledCameras where !disabledHere.contains("\(node)/\(camera)") {
            guard disabledElsewhere.insert("\(node)/\(camera)").inserted else { continue }
            let detail = "camera \(node)/\(camera) was disabled by another coordinator or peer, not by this one: its files end early"
            directives += [.say(detail), .record(TakeEvent(.cameraDisabled, at: now, node: node, camera: camera, detail))]
        }
        // A stop the node's cameras had already written past cannot hold the take equal (this coordinator and
        // coord stop-take place theirs seconds ahead): it came from elsewhere, and is named, not adopted.
        if report.stopGroup > 0, report.stopGroup < groups, report.lastGroup >= report.stopGroup {
            if stopsNamed.insert("\(node)/\(report.stopGroup)").inserted {
                let detail = "node \(node) was told by another coordinator or peer to stop before group \(report.stopGroup), which had already passed: its cameras ended early"
                directives += [.say(detail), .record(TakeEvent(.stopUndelivered, at: now, node: node, detail))]
            }
        } else if report.stopGroup > 0, report.stopGroup < groups {
            // `coord stop-take` (from any machine) placed a stop: adopt it, and make sure every node has it.
            directives += placeStop(report.stopGroup, now: now, node: node,
                                    say: "coord stop-take: every camera stops after group \(report.stopGroup - 1)",
                                    detail: "stopped by coord stop-take after group \(report.stopGroup - 1)")
        }
        if report.state == .finished { finished.insert(node) }
        if report.state == .recording, report.camerasFinished, checksumming.insert(node).inserted {
            directives.append(.say("node \(node): every camera has ended; checksumming its files"))
        }
        if report.state == .failed, finished.insert(node).inserted {
            failed.insert(node)
            directives.append(.record(TakeEvent(.nodeFailed, at: now, node: node, report.detail)))
        }
        for (camera, error) in report.cameraErrors where !error.isEmpty && reportedErrors.insert("\(node)/\(camera): \(error)").inserted {
            directives.append(.record(TakeEvent(.cameraError, at: now, node: node, camera: camera, error)))
        }
        return directives
    }

    private mutating func placeStop(_ stop: Int64, now: Int64, node: String, say: String, detail: String) -> [Directive] {
        groups = stop
        unstopped = Set(nodes)
        stopping = true
        return [.say(say), .record(TakeEvent(.operatorStop, at: now, node: node, detail))]
    }

    private mutating func finish(now: Int64) -> [Directive] {
        isDone = true
        var directives: [Directive] = []
        for node in nodes where unstopped.contains(node) {
            directives.append(.record(TakeEvent(.stopUndelivered, at: now, node: node,
                                                "node \(node) never acknowledged the stop at group \(groups)")))
        }
        let missing = Set(nodes).subtracting(finished)
        for node in nodes where missing.contains(node) {
            let detail = silent.contains(node) ? "node \(node) stopped answering after the stop; its files could not be collected then"
                : checksumming.contains(node) ? "node \(node) did not finish checksumming its files within \(timing.checksumAllowance / 1_000_000) s of the stop instant"
                : "node \(node) did not report its files final within \(timing.finishAllowance / 1_000_000) s of the stop instant"
            directives.append(.record(TakeEvent(.nodeUnfinished, at: now, node: node, detail)))
        }
        directives.append(.record(TakeEvent(.stop, at: stopInstant, "all cameras stop after group \(groups - 1)")))
        directives.append(.finish(Finish(groups: groups, unfinished: missing.union(failed))))
        return directives
    }

    private static func tenths(_ seconds: Double) -> String {
        let tenths = Int((seconds * 10).rounded())
        return "\(tenths < 0 ? "-" : "")\(abs(tenths) / 10).\(abs(tenths) % 10)"
    }
}

/// The decisions of a take's start, before anything records: configure the rig file's first node alone (of two
/// coordinators racing for one rig, the one that takes it goes on), then the others; arm every node; start
/// every node on group 0 if the start instant is still far enough ahead. Any failure aborts the take on every
/// node and nothing is recorded. Pure: the shell reports each step's results and carries out the next.
public struct TakeStart: Sendable {
    public enum Directive: Sendable, Equatable {
        case configure(nodes: [String])
        case arm(nodes: [String])
        case start(nodes: [String])
        /// Arming ran past the start instant (`note` says so): tell every node to drop the arm, then configure and
        /// arm them again, with group 0 placed as far ahead as `learned` (this arming) shows it needs. At most once a
        /// take.
        case rearm(nodes: [String], learned: Arming, note: String)
        /// Tell every node to drop the take, then fail with the sentence.
        case abandon(reason: String, failure: String)
        /// Every node accepted the start: recording begins at group 0.
        case recording
    }

    public let nodes: [String]
    public private(set) var isDone = false
    /// The take was armed again after an arming that ran past its start instant.
    public private(set) var isRearmed = false

    /// How long arming took in a take from this coordinator: from the first arm sent to the last node's reply
    /// (µs), over `nodes` nodes.
    public struct Arming: Sendable, Equatable {
        public var nodes: Int
        public var took: Int64
        public init(nodes: Int, took: Int64) {
            self.nodes = nodes
            self.took = took
        }
    }

    /// How far ahead of the arm command group 0 is placed: 2 s for the cameras' phase loops to settle on the grid
    /// once a node has the arm, plus room for arming every node, at least 0.1 s and at most 3 s. The room is three
    /// times the slowest configure round trip just measured (the arm fans out as configure does, and a node does
    /// more to arm: 64 loaded debug nodes took 1.7 s to arm after a configure round one third of that), and, when
    /// this coordinator armed a take before, what that arming took, scaled to this many nodes, with half again
    /// as margin. So it grows with what arming at that many nodes takes, and stays 2.1 s on a quick rig.
    public static func groupZeroLead(slowestConfigure: Int64, nodes: Int = 1, previous: Arming? = nil) -> Int64 {
        var room = max(100_000, Saturating.multiply(3, slowestConfigure))
        if let previous, previous.nodes > 0, previous.took > 0 {
            let scaled = Double(previous.took) * 1.5 * Double(max(nodes, previous.nodes)) / Double(previous.nodes)
            room = max(room, Int64(min(scaled, 3e6)))
        }
        return 2_000_000 + min(3_000_000, room)
    }

    public init(nodes: [String]) { self.nodes = nodes }

    /// The first step.
    public func begin() -> Directive { .configure(nodes: Array(nodes.prefix(1))) }

    /// Each node's failure (one sentence), in node order; a node that is not listed succeeded.
    public mutating func configured(_ asked: [String], failures: [String: String]) -> Directive {
        if let failure = firstFailure(asked, failures) { return abandon("a node could not be configured", failure) }
        let rest = nodes.filter { !asked.contains($0) && $0 != nodes.first }
        return asked == Array(nodes.prefix(1)) && !rest.isEmpty ? .configure(nodes: rest) : .arm(nodes: nodes)
    }

    /// `armTimes`: how long each node took to arm (µs); `now`, `t0` and `margin` on the rig timebase.
    public mutating func armed(failures: [String: String], armTimes: [String: Int64], now: Int64, t0: Int64,
                               margin: Int64) -> Directive {
        if let failure = firstFailure(nodes, failures) { return abandon("a node could not be armed", failure) }
        // The start instant must still be ahead once every node is armed, or nothing starts. A lead is a guess
        // (cameras slow to open, a loaded host): the first miss is measured and armed again with room for it, so
        // the operator's next try does not meet the same wall; a second miss ends the take.
        if now > t0 - margin {
            let slowest = nodes.max { (armTimes[$0] ?? 0) < (armTimes[$1] ?? 0) } ?? ""
            let took = armTimes[slowest] ?? 0
            if !isRearmed {
                isRearmed = true
                return .rearm(nodes: nodes, learned: Arming(nodes: nodes.count, took: took),
                              note: "node \(slowest) took \(took / 1000) ms to arm, past the start instant; arming every node again with more lead")
            }
            return abandon("arming took too long",
                           "node \(slowest) took \(took / 1000) ms to arm, past the start instant, also when armed again with more lead.")
        }
        return .start(nodes: nodes)
    }

    /// Every node dropped the late arm (`rearm`): configure them all again, then arm.
    public func rearming() -> Directive { .configure(nodes: nodes) }

    public mutating func started(failures: [String: String]) -> Directive {
        if let failure = firstFailure(nodes, failures) { return abandon("a node did not accept the start", failure) }
        isDone = true
        return .recording
    }

    private func firstFailure(_ asked: [String], _ failures: [String: String]) -> String? {
        asked.lazy.compactMap { failures[$0] }.first
    }

    private mutating func abandon(_ reason: String, _ failure: String) -> Directive {
        isDone = true
        return .abandon(reason: reason, failure: "nothing was recorded: \(failure)")
    }
}
