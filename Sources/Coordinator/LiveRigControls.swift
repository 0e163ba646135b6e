import CoordCore
import CoordWire
import Foundation
import Logging
import Platform
import Synchronization
import VersionedYAML
import ZeroMQ

// Camera controls from the console.
extension LiveRig {
    // MARK: Controls

    /// Sets one camera's controls on its node (at once if the camera is open, else when it opens); the values the
    /// node applied. An unknown camera is `.notFound`; a control it lacks or a value out of range `.invalid`,
    /// with the node's sentence naming camera, control and range.
    public func setControls(node: String, camera: String, _ controls: CameraControls) async throws(Refusal) -> CameraControlsView {
        guard let target = state.withLock({ $0.nodes.first { $0.name == node } }),
              target.cameras.contains(where: { $0.camera == camera }) else {
            throw Refusal(.notFound, "the rig has no camera \(node)/\(camera).")
        }
        guard let link = target.link, target.view.reachable else { throw Refusal(.conflict, "node \(node) is unreachable: \(target.view.message ?? "no answer").") }
        if let problem = Self.basicProblem(controls, camera: "\(node)/\(camera)") { throw Refusal(.invalid, problem) }
        let applied = try await sendControls(controls, node: node, camera: camera, link: link)
        // The node had applied them by now: a frame centred two periods on was exposed wholly after.
        let inForceFrom = previewGrid.nearestGroup(to: MonotonicClock.now()) + 2
        state.withLock { s in
            guard let i = s.nodes.firstIndex(where: { $0.name == node }) else { return }
            s.nodes[i].controls[camera] = applied
            s.nodes[i].operatorControls[camera] =
                (s.nodes[i].operatorControls[camera] ?? CameraControls()).updated(with: Self.asked(controls, applied: applied))
        }
        event("controls", node: node, camera: camera, "camera \(node)/\(camera): \(Self.describe(applied))")
        let rig = self.rig
        state.withLock { $0.lastRig = rig }
        broadcast(.rig(rig))
        return CameraControlsView(node: node, camera: camera, controls: applied, inForceFromGroup: inForceFrom)
    }

    /// Sends one camera's controls to its node; the values it applied (every control in force), or one sentence.
    func sendControls(_ controls: CameraControls, node: String, camera: String, link: NodeLink) async throws(Refusal) -> CameraControls {
        var m = Coord_V1_SetControls()
        m.camera = camera
        m.controls = controls.wire
        do {
            let (reply, _) = try await link.ask(.setControls(m), timeout: 3, what: "the controls")
            guard case .controlsApplied(let r) = reply.body else { throw Refusal(.conflict, "node \(node) answered the controls with something else.") }
            do throws(FieldFault) { return try NodeReply.controlsApplied(r, from: "node \(node)") } catch { throw Refusal(.conflict, error.sentence) }
        } catch let refusal as Refusal {
            throw refusal
        } catch let refusal as NodeRefusal {
            throw Refusal(Self.kind(of: refusal.failure.code), refusal.description)
        } catch {
            // No answer, or the link closed: the node cannot take controls now.
            throw Refusal(.conflict, "\(error)")
        }
    }

    /// The controls the operator asked for, at the values the node applied (a camera may round them).
    static func asked(_ asked: CameraControls, applied: CameraControls) -> CameraControls {
        CameraControls(exposureMicroseconds: asked.exposureMicroseconds.map { applied.exposureMicroseconds ?? $0 },
                       gainDecibels: asked.gainDecibels.map { applied.gainDecibels ?? $0 },
                       whiteBalanceKelvin: asked.whiteBalanceKelvin.map { applied.whiteBalanceKelvin ?? $0 },
                       focus: asked.focus.map { applied.focus ?? $0 })
    }

    /// A node that restarted starts from its cameras' own controls: the ones the operator set here are sent to it
    /// again, and its message says so (or, in one sentence each, which could not be).
    func reapplyControls(_ name: String) async {
        let found = state.withLock { s -> (NodeLink, [String], [String: CameraControls])? in
            guard let n = s.nodes.first(where: { $0.name == name }), let link = n.link,
                  n.operatorControls.values.contains(where: { !$0.isEmpty }) else { return nil }
            return (link, n.cameras.map(\.camera), n.operatorControls)
        }
        guard case let (link, cameras, wanted)? = found else { return }
        var done: [String] = [], refused: [String] = []
        for (camera, controls) in wanted.sorted(by: { $0.key < $1.key }) where !controls.isEmpty {
            guard cameras.contains(camera) else {
                refused.append("camera \(name)/\(camera) is gone from the restarted node, so its controls were not set again.")
                continue
            }
            do throws(Refusal) {
                let applied = try await sendControls(controls, node: name, camera: camera, link: link)
                state.withLock { s in
                    if let i = s.nodes.firstIndex(where: { $0.name == name }) { s.nodes[i].controls[camera] = applied }
                }
                done.append("\(camera): \(Self.describe(Self.asked(controls, applied: applied)))")
            } catch {
                refused.append("camera \(name)/\(camera)'s controls could not be set again: \(error.sentence)")
            }
        }
        let time = ISO8601DateFormatter().string(from: Date())
        let note = refused.isEmpty
            ? "restarted at \(time); the controls set in this console were applied again (\(done.joined(separator: "; ")))."
            : refused.joined(separator: " ")
        state.withLock { s in
            if let i = s.nodes.firstIndex(where: { $0.name == name }) {
                s.nodes[i].controlsNote = note
                if s.nodes[i].view.message == nil { s.nodes[i].view.message = note }
            }
        }
        if !done.isEmpty { event("controls-reapplied", node: name, "node \(name) restarted: the controls set in this console applied again — \(done.joined(separator: "; "))") }
        for sentence in refused { event("controls-not-reapplied", node: name, sentence) }
    }

    /// "Apply to all": the same controls on every camera of the rig, in parallel. The cameras that took them, and
    /// one sentence for each that did not.
    public func setControlsEverywhere(_ controls: CameraControls) async -> (applied: [CameraControlsView], refused: [String]) {
        let cameras = state.withLock { $0.nodes.flatMap { n in n.cameras.map { (n.name, $0.camera) } } }
        return await withTaskGroup(of: Result<CameraControlsView, Refusal>.self) { group in
            for (node, camera) in cameras {
                group.addTask {
                    do throws(Refusal) { return .success(try await self.setControls(node: node, camera: camera, controls)) } catch { return .failure(error) }
                }
            }
            var applied: [CameraControlsView] = [], refused: [String] = []
            for await result in group {
                switch result {
                case .success(let v): applied.append(v)
                case .failure(let r): refused.append(r.sentence)
                }
            }
            return (applied.sorted { ($0.node, $0.camera) < ($1.node, $1.camera) }, refused.sorted())
        }
    }

    /// The controls set here, as the `nodes:` part of a rig file (each camera's `controls:`), to paste into the
    /// rig file so every take starts with them.
    public var controlsYAML: String {
        let nodes = state.withLock { $0.nodes }
        var lines = ["# Camera controls from coord console, \(ISO8601DateFormatter().string(from: Date())).",
                     "# Paste each camera's controls into the rig file's nodes[].cameras[] entries.", "nodes:"]
        for node in nodes where !node.cameras.isEmpty {
            lines.append("  - name: \(node.name)")
            lines.append("    endpoint: \(node.spec.endpoint)")
            lines.append("    cameras:")
            for camera in node.cameras {
                lines.append("      - name: \(camera.camera)")
                let c = node.controls[camera.camera] ?? CameraControls()
                var parts: [String] = []
                if let v = c.exposureMicroseconds { parts.append("exposure_us: \(v)") }
                if let v = c.gainDecibels { parts.append("gain_db: \(v)") }
                if let v = c.whiteBalanceKelvin { parts.append("white_balance_k: \(v)") }
                if let v = c.focus { parts.append("focus: \(v)") }
                if !parts.isEmpty { lines.append("        controls: {\(parts.joined(separator: ", "))}") }
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The rig file with the controls the operator set here written in (CONTRACT §6 controls as the rig's
    /// defaults): the console's own rig file edited in place (its comments and layout kept), or for a demo a rig
    /// file of its nodes. Its name and text; `original` is the text to edit (default: the file as it is now).
    public func rigFileWithControls(original given: String? = nil) throws(Refusal) -> (name: String, text: String) {
        let nodes = state.withLock { $0.nodes }
        var cameras: [String: [RigFileControls.Camera]] = [:]
        for node in nodes {
            cameras[node.name] = node.cameras.map { .init(name: $0.camera, controls: node.operatorControls[$0.camera] ?? CameraControls()) }
        }
        let original: String, path: String
        if let rigFile {
            if let given {
                original = given
            } else {
                do throws(YAMLFileError) { original = try VersionedYAML.read(rigFile, kind: "rig file") } catch { throw Refusal(.conflict, error.description) }
            }
            path = rigFile
        } else {
            let stamp = ISO8601DateFormatter().string(from: Date())
            original = "# The demo's rig with the camera controls set in coord console, \(stamp): every take starts with them.\n"
                + DiscoveredNode.rigFile(spec.nodes.map {
                    DiscoveredNode(name: $0.name, endpoint: $0.endpoint, cameras: [], version: "", publicKey: $0.publicKey)
                }, coordinatorCert: nil)
            path = "rig.yaml"
        }
        let text: String
        do throws(YAMLFileError) { text = try RigFileControls.text(original, path: path, cameras: cameras) } catch { throw Refusal(.conflict, error.description) }
        return ((path as NSString).lastPathComponent, text)
    }

    /// The console's answer to a node's refusal of the controls: a camera the node does not have is not found, a
    /// request out of turn a conflict, and anything else (a control the camera lacks, a value out of its range, a
    /// device that failed to apply it) a request it cannot carry out.
    static func kind(of code: NodeFailure.Code) -> Refusal.Kind {
        switch code {
        case .notFound: .notFound
        case .badState: .conflict
        case .malformed, .unknownMessage, .versionMismatch, .tooLarge, .badConfig, .io, .internal: .invalid
        }
    }

    /// What no camera can take (the node checks each camera's own ranges), said in the operator's words before the
    /// node's request checks would name wire fields.
    public static func basicProblem(_ c: CameraControls, camera: String) -> String? {
        if c.isEmpty { return "no control given for camera \(camera): set any of exposure_us, gain_db, white_balance_k, focus." }
        if let e = c.exposureMicroseconds, e <= 0 { return "camera \(camera): exposure_us \(e) must be positive." }
        return anyCamera.problem(with: c, camera: camera)
    }

    /// The widest values any camera's controls take (what a node accepts on the wire; focus 0 nearest … 1 farthest).
    static let anyCamera = ControlRanges(exposureMicroseconds: 1...10_000_000, gainDecibels: -100...1_000,
                                         whiteBalanceKelvin: 1_000...15_000, focus: 0...1)

    /// Each previewing camera's current controls, read once (an empty SetControls changes nothing and answers
    /// every control's value in force), so the API and the page show them before anyone sets one.
    func readControls(_ node: Node) async {
        guard let link = node.link else { return }
        for camera in node.cameras where (node.controls[camera.camera] ?? CameraControls()).isEmpty {
            var m = Coord_V1_SetControls()
            m.camera = camera.camera
            guard let answer = try? await link.ask(.setControls(m), timeout: 2, what: "the controls"),
                  case .controlsApplied(let r) = answer.0.body,
                  let current = try? NodeReply.controlsApplied(r, from: "node \(node.name)"), !current.isEmpty else { continue }
            state.withLock { s in
                guard let i = s.nodes.firstIndex(where: { $0.name == node.name }), s.nodes[i].controls[camera.camera] == nil else { return }
                s.nodes[i].controls[camera.camera] = current
            }
        }
    }

    static func describe(_ c: CameraControls) -> String {
        var parts: [String] = []
        if let v = c.exposureMicroseconds { parts.append("exposure \(v) µs") }
        if let v = c.gainDecibels { parts.append("gain \(v)") }
        if let v = c.whiteBalanceKelvin { parts.append("white balance \(v) K") }
        if let v = c.focus { parts.append("focus \(v)") }
        return parts.joined(separator: ", ")
    }
}
