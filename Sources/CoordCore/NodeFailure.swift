/// Why a node could not serve a request: a code the coordinator can act on and one sentence for the operator.
public struct NodeFailure: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        case malformed, unknownMessage, versionMismatch, tooLarge, badState, badConfig, notFound, io, `internal`
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}

/// The node's take life cycle. Each request is checked here first; the answer is a decision, not an action.
public struct NodeTakeMachine: Sendable {
    public typealias State = NodeState

    public private(set) var state: State = .idle
    public private(set) var takeID: String?

    public init() {}

    /// How long a configured take holds the node against another take: a coordinator arms within seconds of
    /// configuring, and one that vanished must not block the node for long.
    public static let configureLeaseMicroseconds: Int64 = 10_000_000
    private var configuredAt: Int64 = 0

    /// Takes the node for `takeID`. Refused while another take is armed or recording, and while another take was
    /// configured less than the lease ago, so of two coordinators racing for one rig the first to reach a node
    /// keeps it. `now` is any monotonic clock in µs.
    public mutating func configure(takeID: String, at now: Int64) throws(NodeFailure) {
        switch state {
        case .armed, .recording:
            throw NodeFailure(.badState, "cannot configure take \(takeID): take \(self.takeID ?? "?") is \(state.rawValue) on this node.")
        case .configured where self.takeID != takeID && now - configuredAt < Self.configureLeaseMicroseconds:
            let age = max(0, now - configuredAt) / 1000
            throw NodeFailure(.badState, "cannot configure take \(takeID): this node was configured for take \(self.takeID ?? "?") \(age) ms ago by another start (it is released if not armed within \(Self.configureLeaseMicroseconds / 1_000_000) s).")
        default:
            state = .configured
            self.takeID = takeID
            configuredAt = now
        }
    }

    public mutating func arm(takeID: String) throws(NodeFailure) {
        try expect(takeID, in: [.configured], to: "arm")
        state = .armed
    }

    public mutating func start(takeID: String) throws(NodeFailure) {
        try expect(takeID, in: [.armed], to: "start")
        state = .recording
    }

    public func stop(takeID: String) throws(NodeFailure) {
        try expect(takeID, in: [.recording, .finished], to: "stop")
    }

    public mutating func finish() { if state == .recording { state = .finished } }

    /// A restarted node repaired `takeID`, which its predecessor was recording when it stopped: the take's files
    /// are final (what was recorded up to the crash), so its coordinator can collect them.
    public mutating func recovered(takeID: String) {
        state = .finished
        self.takeID = takeID
    }

    public mutating func fail() { state = .failed }

    /// The coordinator confirmed it holds `takeID`'s files: a finished take is done with, and the node idle again.
    public mutating func collected(takeID: String) {
        guard self.takeID == takeID, state == .finished else { return }
        state = .idle
        self.takeID = nil
    }

    /// Back to idle after an abort; the take id is forgotten.
    public mutating func abort(takeID: String) throws(NodeFailure) {
        guard self.takeID == takeID else {
            throw NodeFailure(.notFound, "cannot abort take \(takeID): this node's take is \(self.takeID ?? "none").")
        }
        state = .idle
        self.takeID = nil
    }

    private func expect(_ takeID: String, in states: [State], to verb: String) throws(NodeFailure) {
        guard self.takeID == takeID else {
            throw NodeFailure(.badState, "cannot \(verb) take \(takeID): this node has \(self.takeID.map { "take \($0)" } ?? "no configured take").")
        }
        guard states.contains(state) else {
            throw NodeFailure(.badState, "cannot \(verb) take \(takeID): it is \(state.rawValue), not \(states.map(\.rawValue).joined(separator: " or ")).")
        }
    }
}
