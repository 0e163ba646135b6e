/// How a command-line program (`coord`, `coord-node`) says it failed: one line on stderr, `<program>: <sentence>`,
/// and its exit status. Both programs' `runFromCommandLine` render every failure through this, once.
public struct CommandLineFailure: Equatable, Sendable {
    /// The whole line, newline included.
    public var line: String
    public var status: Int32

    /// A failure the program itself raised: its sentence and exit status (CONTRACT §1).
    public init(program: String, sentence: String, status: Int32) {
        line = "\(program): \(sentence)\n"
        self.status = status
    }

    /// An error the argument parser found or a command threw: a usage error (the parser's status 64) is status 2
    /// and points at --help; anything else is a failure, status 1. Long words (an echoed argument) are cut short.
    public init(program: String, parserMessage: String, isUsage: Bool) {
        line = "\(program): \(Echo.capWords(in: parserMessage))\(isUsage ? " (see \(program) --help)" : "")\n"
        status = isUsage ? 2 : 1
    }
}

/// A decoding failure (JSON or any `Decodable`) as the end of a sentence: which key, and what is wrong with it —
/// "the key cameras[0].name is missing", "the value of fps has the wrong type", "it is not valid JSON".
public enum DecodingProblem {
    public static func sentence(_ error: DecodingError) -> String {
        switch error {
        case .keyNotFound(let key, let context): return "the key \(path(context.codingPath + [key])) is missing"
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return "the value of \(path(context.codingPath)) has the wrong type"
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty ? "it is not valid JSON" : "the value of \(path(context.codingPath)) is not valid"
        @unknown default: return "\(error)"
        }
    }

    /// `cameras[0].name`: a key path as a reader writes it.
    public static func path(_ keys: [any CodingKey]) -> String {
        var text = ""
        for key in keys {
            if let index = key.intValue { text += "[\(index)]" } else { text += (text.isEmpty ? "" : ".") + key.stringValue }
        }
        return text
    }
}
