import Platform

/// Bad input to `coord deliver`: one sentence, exit 2.
public struct DeliverProblem: Error, Equatable, Sendable, CustomStringConvertible {
    public let sentence: String
    public init(_ sentence: String) { self.sentence = sentence }
    public var description: String { sentence }
}

/// A deliverable that could not be made: one sentence (exit 1).
public struct DeliverFailure: Error, Equatable, Sendable, CustomStringConvertible {
    public let sentence: String
    public init(_ sentence: String) { self.sentence = sentence }
    public var description: String { sentence }
}

extension TakeFileError {
    /// A path of the take the funnel would not use: refused for what it is (bad input, exit 2), or a failure to
    /// read or write it (exit 1); one sentence naming it either way.
    package var deliverError: Error { isRefusal ? DeliverProblem(sentence) : DeliverFailure(sentence) }
}
