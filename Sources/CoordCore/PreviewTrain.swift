/// The operator's free-running trigger train while the console previews (pure; CONTRACT §17): whether it is
/// wanted, which nodes run it, and the console's answer to an ask from each node's reply.
public struct PreviewTrain: Equatable, Sendable {
    /// The operator asked for it (kept across a take: the nodes start it again once the preview resumes).
    public var wanted = false
    /// Nodes whose train runs, as their newest answer said.
    public var running: Set<String> = []

    public init(wanted: Bool = false, running: Set<String> = []) { self.wanted = wanted; self.running = running }

    /// The answer to turning the train on or off, given each asked node's refusal sentence (nil: it accepted).
    /// On: the nodes running it, or every refusal when none accepted (no node with trigger outputs, say); off: never
    /// refused (a node with no outputs has nothing to stop).
    public static func answer(on: Bool, refusals: [String: String?]) -> Result<[String], LiveView.Refusal> {
        guard on else { return .success([]) }
        let running = refusals.filter { $0.value == nil }.keys.sorted()
        guard running.isEmpty else { return .success(running) }
        guard !refusals.isEmpty else {
            return .failure(LiveView.Refusal(.conflict, "no node previews yet, so no trigger output can pulse on the preview's grid."))
        }
        return .failure(LiveView.Refusal(.conflict, refusals.sorted { $0.key < $1.key }.compactMap(\.value).joined(separator: " ")))
    }

    /// One node's newest answer: its train runs or not.
    public mutating func node(_ name: String, runs: Bool) {
        if runs { running.insert(name) } else { running.remove(name) }
    }
}
