import ArgumentParser
import CoordCore
import Coordinator
import Foundation
import Platform

/// `coord snap`: one synchronized still from every camera of a rig (or a burst of them), CONTRACT §18.
struct Snap: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Take one synchronized still from every camera of the rig (or a burst on the grid), with its sync report and ASC MHL.",
        discussion: """
            A cold snap plans, aligns clocks and arms the cameras as a take does (a few seconds), records the span from \
            group 0 through the last shot losslessly, collects it and keeps the shots' frames as images: \
            <take-id>/<node>/<camera>[_<n>].<ext>. Shot k of a burst is group k × --every / frame period.
            """)

    @Option(help: "The rig file (YAML).") var rig: String
    @Option(help: "Shot name (default: the rig's take.name, else \"snap\").") var name: String?
    @Option(help: "Shots in the burst.") var count: Int = 1
    @Option(help: "Milliseconds between shots: a whole number of frame periods.") var every: Int?
    @Option(help: "Still size: WxH for every camera, or max (each camera's largest); default: the take's.") var size: String?
    @Option(help: "Image format: png, tiff or jpeg.") var format: String = "png"
    @Option(help: "Directory that receives the shot's directory (default: the rig's take.takes_dir, else ./takes).") var takesDir: String?
    @Flag(help: "Log the coordinator's debug output.") var verbose = false

    func run() async throws {
        let began = ContinuousClock.now
        bootstrapLogging(verbose)
        let console = Console()
        let file = try loadRig(rig)
        let spec = file.spec
        let template = try takeRequest(file, name: name ?? spec.take.name ?? "snap", seconds: 1, takesDir: takesDir, fps: nil,
                                       size: nil, codec: nil)
        let plan = try snapPlan(count: count, every: every, fps: template.fps, size: size, format: format)
        let request = SnapSession.takeRequest(template, plan: plan)
        console.step("rig \(rig): \(spec.nodes.count) node(s); a cold snap plans, aligns clocks and arms every camera first (a few seconds), then records \(plan.spanGroups) group(s) for \(plan.count) shot(s)")
        let outcome = try await recordTake(endpoints: spec.nodes.map(\.endpoint),
                                           names: Dictionary(spec.nodes.map { ($0.endpoint, $0.name) }) { first, _ in first },
                                           keys: spec.linkKeysByEndpoint, request: request, console: console) {
            let unreached = await withTimeout(seconds: 3) { await RigStatus.abandon(spec, reason: "the operator abandoned the shot") }
            return (unreached ?? []).isEmpty ? "the shot is abandoned." : "the shot is abandoned, but some nodes could not be told."
        } collectionInterrupted: { [rig] directory in
            "the files stay on the nodes. Finish with: coord collect --rig \(rig) \(directory.path)"
        }
        let took = ContinuousClock.now - began
        console.step("the shot took \(took.formatted(.units(allowed: [.seconds], fractionalPart: .show(length: 1)))) from the command: planning, clock alignment and arming come first, then \(plan.spanGroups) group(s) at \(template.fps) fps and collection")
        try finishSnap(outcome, plan: plan, console: console)
    }
}

/// The shot the flags ask for; a usage error (exit 2) in one sentence.
func snapPlan(count: Int, every: Int?, fps: Int, size: String?, format: String) throws -> SnapPlan {
    do {
        return try SnapPlan(count: count, everyMilliseconds: every, fps: fps, size: size, format: format,
                            firstGroup: SnapPlan.settledFirstGroup(fps: fps, count: count, everyMilliseconds: every))
    } catch {
        throw usageError(error.sentence)
    }
}

/// Keeps the shot's stills from a collected span and prints where they are and how simultaneous they were.
func finishSnap(_ take: TakeOutcome, plan: SnapPlan, console: Console) throws {
    let shot = try SnapSession.keepStills(take, plan: plan, console: console)
    let spread = shot.report.spreadMicroseconds
    console.result("""
        shot \(shot.manifest.takeID): \(shot.stills.count) still(s) from \(shot.manifest.cameras.count) camera(s), \(plan.count) shot(s); \
        spread of centres p50 \(spread.p50) µs, max \(spread.max) µs
          \(shot.directory.path)
        """)
    // A triggered camera's output and its pulses' timing (CONTRACT §17), as a take's summary prints them.
    for c in shot.manifest.cameras { if let t = c.trigger { console.result("  " + t.reportLine(node: c.node, camera: c.camera)) } }
    if shot.manifest.status == .partial {
        throw CoordError(.partial, "the shot is partial: \(shot.manifest.partialCause).")
    }
}
