import CoordCore
import Foundation

// The page's budget: the hardware cost the take was planned with, per node and resource. A node without a calibration
// has no encoding or disk-write figure to count, so its cost is no figure at all: the page says "not calibrated" where
// it would otherwise show the 0.00 that nothing was measured against.
extension SyncReportPage {
    /// Whether the manifest's budget counted `node` without a calibration. `Budget.evaluate` notes such a node
    /// ("node NAME is not calibrated: its encoding and disk write are not counted …") and leaves its encoding and disk
    /// write out, so its cost holds at most its bus load.
    static func isUncalibrated(_ node: TakeManifest.BudgetSummary.Node) -> Bool {
        node.notes.contains { $0.hasPrefix("node \(node.node) is not calibrated") }
    }

    static func budgetSection(_ budget: TakeManifest.BudgetSummary) -> PageContext.BudgetSection {
        var rows: [PageContext.BudgetRow] = []
        for node in budget.nodes {
            if isUncalibrated(node) {
                rows.append(.init(isNote: false, rowClass: "uncalibrated", node: node.node, resource: "encoding and disk write",
                                  demand: "not counted", capacity: "not measured", cost: "not calibrated", note: ""))
            }
            for load in node.loads {
                let (unit, scale) = load.unit == "pixels/s" ? ("Mpx/s", 1e6) : load.unit == "bytes/s" ? ("MB/s", 1e6) : (load.unit, 1.0)
                rows.append(.init(isNote: false, rowClass: load.cost >= 1 ? "over" : load.cost >= 0.8 ? "hot" : "", node: node.node,
                                  resource: load.resource, demand: "\(fixed(load.demand / scale)) \(unit)",
                                  capacity: "\(fixed(load.capacity / scale)) \(unit)", cost: fixed(load.cost, 2), note: ""))
            }
            for note in node.notes {
                rows.append(.init(isNote: true, rowClass: "", node: node.node, resource: "", demand: "", capacity: "", cost: "", note: note))
            }
        }
        let uncalibrated = budget.nodes.filter(isUncalibrated).map(\.node)
        // Every node uncalibrated: the rig's cost counted no encoding and no disk anywhere, so it is not a figure.
        let none = !budget.nodes.isEmpty && uncalibrated.count == budget.nodes.count
        var uncounted: String?
        if !uncalibrated.isEmpty {
            let one = uncalibrated.count == 1
            let names = one ? "Node \(uncalibrated[0]) is" : "Nodes \(uncalibrated.dropLast().joined(separator: ", ")) and \(uncalibrated.last!) are"
            uncounted = "\(names) not calibrated, so \(one ? "its" : "their") encoding and disk write are not counted"
                + (none ? "" : " in the cost") + " (run coord-node calibrate on \(one ? "it" : "them"))"
        }
        return .init(cost: none ? "not calibrated" : fixed(budget.cost, 2), counted: !none, longestTake: budget.longestSeconds.map(Budget.duration),
                     uncounted: uncounted, rows: rows, hasChanges: !budget.changes.isEmpty, changes: budget.changes)
    }
}
