import CoordCore
import Foundation
import Platform

/// The operator's free-running trigger train while the node previews (CONTRACT §17): a triggered camera exposes
/// nothing without pulses, so for focusing and framing each output bound to a previewed camera emits one pulse per
/// group of the preview's grid, placed as a take's (`openTriggerOutputs` on an unbounded schedule). The train
/// belongs to the preview run: it ends when asked, when the preview ends (its lease ran out because the console is
/// gone, or a take's Arm closed it so the take's own train can open the lines), and a Snap meanwhile keeps the
/// train's frame of each shot group instead of pulsing on its own.
extension NodeAgent {
    func previewTrain(on: Bool) throws(NodeFailure) -> String {
        let outputs = configuration.triggerOutputs.map(\.name)
        guard !outputs.isEmpty else {
            throw NodeFailure(.badConfig, "node \(configuration.name) has no trigger outputs, so it has no preview train to run.")
        }
        guard on else {
            let train = previewRoom.withLock { run -> [TriggerGenerator] in
                defer { run?.train = [] }
                return run?.train ?? []
            }
            endPreviewTrain(train, deadline: .now() + .seconds(2))
            return train.isEmpty ? "no preview train runs" : "preview train stopped on \(train.map(\.output.name).sorted().joined(separator: ", "))"
        }
        if let takeID = takeRoom.withLock({ $0.take.holdsCameras ? $0.take.takeID ?? "" : nil }) {
            throw NodeFailure(.badState, "take \(takeID) holds the trigger outputs of node \(configuration.name); the preview train can run once it ends.")
        }
        guard let run = previewRoom.withLock({ $0 }), let grid = run.grid else {
            throw NodeFailure(.badState, "node \(configuration.name) does not preview, so it has no preview grid to pulse on.")
        }
        if !run.train.isEmpty { return "preview train runs on \(run.train.map(\.output.name).sorted().joined(separator: ", "))" }
        // The exposure the camera runs at places the pulses (delay + exposure/2 ahead), as a Snap's are placed.
        let bound = run.cameras.map(\.settings).filter { configuration.cameraTriggers[$0.camera] != nil }.map { s in
            var s = s
            let set = controlsRoom.withLock { $0.controls[s.camera]?.exposureMicroseconds }
            s.controls.exposureMicroseconds = stills.triggers.exposure(of: s.camera).map { Int($0) } ?? set ?? s.controls.exposureMicroseconds
            return s
        }
        guard !bound.isEmpty else {
            throw NodeFailure(.badConfig, "node \(configuration.name) previews no camera bound to its trigger outputs (\(outputs.joined(separator: ", "))).")
        }
        let train = try openTriggerOutputs(settings: bound, grid: grid, mapping: run.clock).generators
        let placed = previewRoom.withLock { current -> Bool in
            guard current?.clock === run.clock else { return false }
            current?.train = train
            return true
        }
        guard placed else {
            endPreviewTrain(train, deadline: .now() + .seconds(2))
            throw NodeFailure(.badState, "the preview of node \(configuration.name) ended while its train started.")
        }
        let names = train.map(\.output.name).sorted().joined(separator: ", ")
        logger.info("preview train started", metadata: ["outputs": "\(names)", "cameras": "\(bound.map(\.camera))"])
        return "preview train runs on \(names)"
    }

    /// Ends a preview run's train and waits (at most until `deadline`) until its lines are free for a take or a Snap.
    func endPreviewTrain(_ train: [TriggerGenerator], deadline: DispatchTime) {
        guard !train.isEmpty else { return }
        train.forEach { $0.cancel() }
        let released = train.allSatisfy { $0.waitReleased(deadline: deadline) }
        logger.info("preview train stopped", metadata: ["outputs": "\(train.map(\.output.name))", "released": "\(released)",
                                                      "pulses": "\(train.map(\.edges.count))"])
    }

    /// The cameras whose output the preview train drives: a Snap keeps their train frames rather than pulsing.
    var previewTrainCameras: Set<String> {
        let outputs = Set(previewRoom.withLock { $0?.train.map(\.output.name) ?? [] })
        return Set(configuration.cameraTriggers.filter { outputs.contains($0.value.output) }.keys)
    }
}
