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
    public enum State: String, Sendable { case idle, configured, armed, recording, finished, failed }

    public private(set) var state: State = .idle
    public private(set) var takeID: String?

    public init() {}

    public mutating func configure(takeID: String) throws(NodeFailure) {
        switch state {
        case .armed, .recording:
            throw NodeFailure(.badState, "cannot configure take \(takeID): take \(self.takeID ?? "?") is \(state.rawValue) on this node.")
        default:
            state = .configured
            self.takeID = takeID
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

    public mutating func fail() { state = .failed }

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
