import CoordCore
import Foundation

/// `coord plan --snap`: the budget of the span a shot records (as `coord plan` tallies a take) and the shot's bytes
/// against each node's staging disk and the takes directory. Nothing is configured or recorded.
public enum SnapPlanning {
    public static func run(_ spec: RigSpec, request template: TakeRequest, plan: SnapPlan) async throws -> RigPlan.Outcome {
        let request = SnapSession.takeRequest(template, plan: plan)
        let planned = try await RigPlan.plannedNodes(spec, request: request)
        let budget = Budget.evaluate(planned)
        var lines = ["budget of the shot's span: \(planned.flatMap(\.cameras).count) camera(s) on \(planned.count) node(s), \(request.fps) fps, sensors at one group in \(request.recordEvery ?? 1), \(request.codec.rawValue):", ""]
        lines += budget.table()
        let nodes = planned.map { node in
            SnapBudget.Node(name: node.name, freeDiskBytes: node.resources.freeDiskBytes,
                            sizes: node.cameras.map { (width: $0.settings.width, height: $0.settings.height) },
                            ffv1BytesPerPixel: node.resources.calibration?.encode[VideoCodec.ffv1.rawValue]?.bytesPerPixel)
        }
        let shot = SnapBudget(plan: plan, recordEvery: request.recordEvery ?? 1, nodes: nodes,
                              takesDirectory: request.takesDirectory.path, takesFreeBytes: freeBytes(near: request.takesDirectory))
        lines += [""] + shot.lines
        let refusal = budget.refusal() ?? shot.refusal
        if budget.refusal() != nil { lines.append("the span is over budget: \(budget.refusal()!)") }
        return RigPlan.Outcome(text: lines.joined(separator: "\n"), refusal: refusal)
    }

    /// Free bytes on the file system that holds `directory` (or its nearest existing parent).
    static func freeBytes(near directory: URL) -> UInt64? {
        var url = directory.standardizedFileURL
        while !FileManager.default.fileExists(atPath: url.path), url.path != "/" { url.deleteLastPathComponent() }
        let attributes = try? FileManager.default.attributesOfFileSystem(forPath: url.path)
        return (attributes?[.systemFreeSize] as? NSNumber)?.uint64Value
    }
}
