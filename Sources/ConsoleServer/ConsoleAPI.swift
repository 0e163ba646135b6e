import CoordCore
import Coordinator
import OpenAPIRuntime

/// The console's JSON API (the operations of openapi.yaml tagged `api`) over a live rig. Bodies arrive decoded and
/// within 64 KiB (ConsoleBodies); what a handler cannot carry out is answered with its status and one sentence.
struct ConsoleAPI: APIProtocol {
    let rig: LiveRig

    func rig(_ input: Operations.Rig.Input) async throws -> Operations.Rig.Output {
        .ok(.init(body: .json(.init(rig.rig))))
    }

    func multiview(_ input: Operations.Multiview.Input) async throws -> Operations.Multiview.Output {
        switch rig.currentMultiview {
        case .success(let set): return .ok(.init(body: .json(.init(set))))
        case .failure(let refusal) where refusal.kind == .notFound: return .notFound(.init(body: .json(.init(error: refusal.sentence))))
        // Never an old set as if current: how old it is and which cameras are silent.
        case .failure(let refusal): return .serviceUnavailable(.init(body: .json(.init(error: refusal.sentence))))
        }
    }

    func setControls(_ input: Operations.SetControls.Input) async throws -> Operations.SetControls.Output {
        let controls: CameraControls
        switch input.body { case .json(let body): controls = CameraControls(body) }
        do throws(LiveRig.Refusal) {
            let applied = try await rig.setControls(node: input.path.node, camera: input.path.camera, controls)
            return .ok(.init(body: .json(.init(applied))))
        } catch {
            let sentence = Components.Schemas._Error(error: error.sentence)
            switch error.kind {
            case .conflict, .unavailable: return .conflict(.init(body: .json(sentence)))
            case .invalid: return .unprocessableContent(.init(body: .json(sentence)))
            case .notFound: return .notFound(.init(body: .json(sentence)))
            }
        }
    }

    func setControlsEverywhere(_ input: Operations.SetControlsEverywhere.Input) async throws -> Operations.SetControlsEverywhere.Output {
        let controls: CameraControls
        switch input.body { case .json(let body): controls = CameraControls(body) }
        if let problem = LiveRig.basicProblem(controls, camera: "(every camera)") {
            return .unprocessableContent(.init(body: .json(.init(error: problem))))
        }
        let (applied, refused) = await rig.setControlsEverywhere(controls)
        guard refused.isEmpty else {
            // Applied where it could be; the answer names each camera that refused.
            return .unprocessableContent(.init(body: .json(.init(error: refused.joined(separator: " ")))))
        }
        return .ok(.init(body: .json(.init(cameras: applied.map(Components.Schemas.CameraControls.init), refused: refused))))
    }

    func saveRigFile(_ input: Operations.SaveRigFile.Input) async throws -> Operations.SaveRigFile.Output {
        do throws(LiveRig.Refusal) {
            let saved = try rig.saveRigFile()
            return .ok(.init(body: .json(.init(path: saved.path, backup: saved.backup, cameras: saved.cameras))))
        } catch {
            return .conflict(.init(body: .json(.init(error: error.sentence))))
        }
    }

    func takes(_ input: Operations.Takes.Input) async throws -> Operations.Takes.Output {
        .ok(.init(body: .json(.init(current: rig.take.map { .init(value1: .init($0)) }, takes: rig.takes.map(Components.Schemas.TakeEntry.init)))))
    }

    func startTake(_ input: Operations.StartTake.Input) async throws -> Operations.StartTake.Output {
        var request: Components.Schemas.TakeRequest?
        if case .json(let body) = input.body { request = body }
        if let name = request?.name, let problem = RigName.problem(with: name, kind: "take") {
            return .unprocessableContent(.init(body: .json(.init(error: problem))))
        }
        do throws(LiveRig.Refusal) {
            return .accepted(.init(body: .json(.init(try rig.startTake(name: request?.name, seconds: request?.seconds)))))
        } catch {
            let sentence = Components.Schemas._Error(error: error.sentence)
            switch error.kind {
            case .conflict: return .conflict(.init(body: .json(sentence)))
            case .invalid, .notFound, .unavailable: return .unprocessableContent(.init(body: .json(sentence)))
            }
        }
    }

    func snap(_ input: Operations.Snap.Input) async throws -> Operations.Snap.Output {
        var request: Components.Schemas.SnapRequest?
        if case .json(let body) = input.body { request = body }
        do throws(LiveRig.Refusal) {
            let shot = try await rig.snap(.init(name: request?.name, format: request?.format, size: request?.size, count: request?.count,
                                                everyMilliseconds: request?.every, clickedAtMs: request?.clickedAtMs))
            return .ok(.init(body: .json(.init(takeId: shot.takeID, directory: shot.directory, status: shot.status, group: shot.group,
                                               centerUs: shot.centerMicroseconds, framePeriodUs: shot.periodMicroseconds,
                                               leadUs: shot.leadMicroseconds, latencyUs: shot.latencyMicroseconds,
                                               latencyFrom: shot.latencyFrom, stills: shot.stills, message: shot.message, groups: shot.groups,
                                               switched: shot.switched, switchLeadUs: shot.switchLeadMicroseconds))))
        } catch {
            let sentence = Components.Schemas._Error(error: error.sentence)
            switch error.kind {
            case .invalid: return .unprocessableContent(.init(body: .json(sentence)))
            case .conflict, .notFound, .unavailable: return .conflict(.init(body: .json(sentence)))
            }
        }
    }

    func setPreviewTrain(_ input: Operations.SetPreviewTrain.Input) async throws -> Operations.SetPreviewTrain.Output {
        let on: Bool
        switch input.body { case .json(let body): on = body.on }
        do throws(LiveRig.Refusal) {
            let train = try await rig.setPreviewTrain(on: on)
            return .ok(.init(body: .json(.init(on: train.on, nodes: train.nodes))))
        } catch {
            return .conflict(.init(body: .json(.init(error: error.sentence))))
        }
    }

    func stopTake(_ input: Operations.StopTake.Input) async throws -> Operations.StopTake.Output {
        do throws(LiveRig.Refusal) {
            return .accepted(.init(body: .json(.init(try await rig.stopTake()))))
        } catch {
            return .conflict(.init(body: .json(.init(error: error.sentence))))
        }
    }
}
