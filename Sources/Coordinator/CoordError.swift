import CoordCore

/// A failure the operator sees: one sentence naming the node, camera, field or file at fault, and the
/// exit code of CONTRACT §1.
public struct CoordError: Error, CustomStringConvertible, Sendable {
    public enum Kind: Int32, Sendable {
        case failure = 1, usage = 2, overBudget = 3, partial = 4
    }

    public let kind: Kind
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        // Whatever a sentence quotes back (a rig value, an endpoint, a node's reply) is cut short here, once.
        self.message = Echo.capWords(in: message)
    }

    public var description: String { message }
    public var exitCode: Int32 { kind.rawValue }
}
