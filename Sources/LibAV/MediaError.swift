/// A failure in the media layer (opening, encoding or closing a recording), rendered as one sentence for the operator.
public struct MediaError: Error, CustomStringConvertible, Sendable, Equatable {
    /// What was being attempted, phrased to read "cannot <operation> <path>", e.g. "create", "encode a frame into".
    public let operation: String
    /// The file concerned, if any.
    public let path: String?
    /// The C call that failed (e.g. "avio_open"), or nil when the input was rejected before any call.
    public let call: String?
    /// The AVERROR code (negative errno or FFERRTAG); AVERROR(EINVAL) for rejected input.
    public let code: Int32
    /// Human-readable cause: av_strerror text, or what was wrong with the input.
    public let reason: String

    public init(operation: String, path: String?, call: String? = nil, code: Int32, reason: String) {
        self.operation = operation
        self.path = path
        self.call = call
        self.code = code
        self.reason = reason
    }

    public var description: String {
        let target = path ?? "the recording"
        var reason = self.reason
        while reason.hasSuffix(".") { reason.removeLast() }
        if let call {
            return "cannot \(operation) \(target): \(call) failed: \(reason) (AVERROR \(code))."
        }
        return "cannot \(operation) \(target): \(reason)."
    }
}
