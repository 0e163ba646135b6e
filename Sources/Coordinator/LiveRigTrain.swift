import CoordCore
import CoordWire
import Foundation

/// The operator's free-running trigger train while the console previews (CONTRACT §17; NodePreviewTrain.swift):
/// asked of every reached node, asked again with each preview renewal while wanted (a node whose preview reopened
/// starts it again), and ended by each node on its own when the console's preview lease runs out.
extension LiveRig {
    public struct PreviewTrainView: Equatable, Sendable {
        public var on: Bool
        public var nodes: [String]
    }

    /// Turns the train on or off on every reached node; on is refused while a take records, or when no node could
    /// run it (each node's sentence: no trigger outputs, no previewed camera bound to one, not previewing).
    public func setPreviewTrain(on: Bool) async throws(Refusal) -> PreviewTrainView {
        if on, let take, take.state.isRunning {
            throw Refusal(.conflict, "take \(take.takeId ?? take.name) is \(take.state.rawValue); the preview train runs while no take records.")
        }
        let nodes = state.withLock { $0.nodes }.filter { $0.link != nil && $0.view.reachable && !$0.cameras.isEmpty }
        var refusals: [String: String?] = [:]
        await withTaskGroup(of: (String, String?).self) { group in
            for node in nodes { group.addTask { (node.name, await self.askPreviewTrain(node, on: on)) } }
            for await (name, refusal) in group { refusals[name] = refusal }
        }
        let answer = PreviewTrain.answer(on: on, refusals: refusals)
        let view = state.withLock { s -> PreviewTrainView in
            switch answer {
            case .success(let running): s.previewTrain = PreviewTrain(wanted: on, running: Set(running))
            case .failure: s.previewTrain = PreviewTrain()
            }
            return PreviewTrainView(s.previewTrain)
        }
        if case .failure(let refusal) = answer { throw refusal }
        event("trigger", on ? "preview train on: \(view.nodes.joined(separator: ", "))" : "preview train off")
        return view
    }

    /// While the train is wanted: asks `node` again once its preview is renewed (nothing new for a node it runs on).
    func keepPreviewTrain(_ node: Node) async {
        guard state.withLock({ $0.previewTrain.wanted }) else { return }
        let refusal = await askPreviewTrain(node, on: true)
        state.withLock { $0.previewTrain.node(node.name, runs: refusal == nil) }
    }

    /// The node's refusal sentence, or nil when it carried the ask out.
    private func askPreviewTrain(_ node: Node, on: Bool) async -> String? {
        do {
            _ = try await node.link!.request(CoordRequest.previewTrain(on: on), timeout: 4, what: "the preview train")
            return nil
        } catch {
            return "\(error)"
        }
    }
}

extension LiveRig.PreviewTrainView {
    init(_ train: PreviewTrain) { self.init(on: train.wanted, nodes: train.running.sorted()) }
}
