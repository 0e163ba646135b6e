/// A phase a take enters after it starts, as `TakeSession.phases` publishes it (the live console follows it).
public enum TakePhase: Sendable, Equatable {
    /// Every camera records from group 0; the take's directory has its id.
    case recording(takeID: String)
    /// Recording has ended; the files are coming home.
    case collecting
}
