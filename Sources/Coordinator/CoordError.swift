import CoordCore
import CoordWire

/// A failure the operator sees: one sentence naming the node, camera, field or file at fault, and the exit code
/// of CONTRACT §1. The subject's fields say the same for a program (a console, a script) that acts on them.
public struct CoordError: Error, CustomStringConvertible, Sendable {
    public enum Kind: Int32, Sendable {
        case failure = 1, usage = 2, overBudget = 3, partial = 4
    }

    /// What the failure is about; nil where the sentence does not name one.
    public struct Subject: Sendable, Equatable {
        public var node: String?
        public var camera: String?
        public var file: String?
        /// A flag or rig-file key, e.g. `--seconds`, `take.fps`.
        public var field: String?
        public init(node: String? = nil, camera: String? = nil, file: String? = nil, field: String? = nil) {
            self.node = node; self.camera = camera; self.file = file; self.field = field
        }
    }

    public let kind: Kind
    public let subject: Subject
    /// The operator's one sentence.
    public let message: String

    public init(_ kind: Kind, _ message: String, node: String? = nil, camera: String? = nil, file: String? = nil,
                field: String? = nil) {
        self.kind = kind
        self.subject = Subject(node: node, camera: camera, file: file, field: field)
        // Whatever a sentence quotes back (a rig value, an endpoint, a node's reply) is cut short here, once.
        self.message = Echo.capWords(in: message)
    }

    /// A node's reply with a field the coordinator cannot act on (CoordWire's NodeReply checks): a failure naming
    /// the node and the field.
    public init(_ fault: FieldFault, node: String? = nil) {
        self.init(.failure, fault.sentence, node: node, field: fault.field)
    }

    public var description: String { message }
    /// CONTRACT §1's exit code: the one place a failure becomes one.
    public var exitCode: Int32 { kind.rawValue }
}
