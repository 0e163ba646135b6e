import CoordCore
import Foundation
import ZeroMQ

/// `coord plan`: the budget table of a rig as its nodes describe themselves now, and with `fit` the changes
/// that bring it under budget. Nothing is configured or recorded.
public enum RigPlan {
    public struct Outcome: Sendable {
        /// What to print on stdout.
        public var text: String
        /// Why the rig is refused (exit 3), one sentence; nil when it fits (after the proposed changes, with `fit`).
        public var refusal: String?
    }

    /// The rig's nodes as they describe themselves now, planned for `request`: what `coord plan` and `coord plan
    /// --snap` both tally.
    static func plannedNodes(_ spec: RigSpec, request: TakeRequest) async throws -> [PlannedNode] {
        let context = ZMQContext()
        let links = try spec.nodes.map { try NodeLink(endpoint: $0.endpoint, name: $0.name, context: context, keys: spec.linkKeys(for: $0)) }
        defer { links.forEach { $0.close() } }
        let hellos = try await TakeSession.handshake(links)
        return try RigPlanner.plannedNodes(hellos, request: request)
    }

    public static func run(_ spec: RigSpec, request: TakeRequest, fit: Bool) async throws -> Outcome {
        let planned = try await plannedNodes(spec, request: request)
        let budget = Budget.evaluate(planned)
        var lines = ["budget for \(planned.flatMap(\.cameras).count) camera(s) on \(planned.count) node(s) at \(request.width)x\(request.height), \(request.fps) fps, \(request.codec.rawValue):", ""]
        lines += budget.table()
        let conflicts = budget.conflicts
        if !conflicts.isEmpty {
            lines += ["", "cameras that cannot run together:"] + conflicts.map { "  \($0)" }
        }
        lines += ["", budget.forecastSentence]
        let asked = request.untilStopped ? nil : request.seconds
        func pressure(_ b: RigBudget) -> String? { asked.flatMap { b.pressureRefusal(requestedSeconds: $0) } }
        guard let refusal = budget.refusal() else {
            let uncounted = planned.filter { $0.resources.calibration == nil && !$0.cameras.isEmpty }.count
            lines.append(uncounted == 0 ? "the rig is under budget (hardware cost \(String(format: "%.2f", budget.cost)))."
                         : "the rig is under budget as far as it can be counted (hardware cost \(String(format: "%.2f", budget.cost))); \(uncounted) node(s) not calibrated are not counted.")
            return Outcome(text: lines.joined(separator: "\n"), refusal: pressure(budget))
        }
        guard fit else {
            lines.append("the rig is over budget; coord plan --fit proposes changes.")
            return Outcome(text: lines.joined(separator: "\n"), refusal: refusal)
        }
        let fitted = Budget.fit(planned)
        lines += ["", "--fit proposes \(fitted.changes.count) change(s), lowest priority first:"]
        lines += fitted.changes.map { "  \($0.sentence)" }
        lines += ["", "budget with the changes:", ""] + fitted.budget.table()
        guard fitted.fits else {
            lines.append("even with every change the rig stays over budget.")
            return Outcome(text: lines.joined(separator: "\n"),
                           refusal: (fitted.budget.refusal() ?? refusal).dropLast() + ", even after --fit lowered every camera it could.")
        }
        lines += ["", "nothing was changed. To record with these changes: coord start-take --rig RIG --fit; or set in the rig file:"]
        lines += RigPlanner.rigFileLines(fitted.changes, fitted: fitted.nodes, fps: request.fps).map { "  \($0)" }
        return Outcome(text: lines.joined(separator: "\n"), refusal: pressure(fitted.budget))
    }
}
