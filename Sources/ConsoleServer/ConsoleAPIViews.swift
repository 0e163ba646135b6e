import CoordCore
import Coordinator

// The live rig's snapshots as the types generated from openapi.yaml: the one place they meet.

extension CameraControls {
    init(_ c: Components.Schemas.Controls) {
        self.init(exposureMicroseconds: c.exposureUs, gainDecibels: c.gainDb, whiteBalanceKelvin: c.whiteBalanceK, focus: c.focus)
    }
}

extension Components.Schemas.ControlValues {
    init(_ c: CameraControls) {
        self.init(exposureUs: c.exposureMicroseconds, gainDb: c.gainDecibels, whiteBalanceK: c.whiteBalanceKelvin, focus: c.focus)
    }
}

extension Components.Schemas.CameraControls {
    init(_ v: LiveRig.CameraControlsView) {
        self.init(node: v.node, camera: v.camera, controls: .init(v.controls), inForceFromGroup: v.inForceFromGroup)
    }
}

extension Components.Schemas.NodeState {
    init(_ state: LiveRig.NodeState) {
        switch state {
        case .idle: self = .idle
        case .configured: self = .configured
        case .armed: self = .armed
        case .recording: self = .recording
        case .finished: self = .finished
        case .failed: self = .failed
        case .unreachable: self = .unreachable
        }
    }
}

extension Components.Schemas.Pressure {
    init(_ level: PressureLevel) {
        switch level {
        case .nominal: self = .nominal
        case .fair: self = .fair
        case .serious: self = .serious
        case .critical: self = .critical
        case .shutdown: self = .shutdown
        }
    }
}

extension Components.Schemas.TakeState {
    init(_ state: LiveRig.TakeState) {
        switch state {
        case .starting: self = .starting
        case .recording: self = .recording
        case .stopping: self = .stopping
        case .collecting: self = .collecting
        case .done: self = .done
        case .partial: self = .partial
        case .failed: self = .failed
        }
    }
}

extension Components.Schemas.Rig {
    init(_ v: LiveRig.RigView) {
        self.init(
            nodes: v.nodes.map { n in
                .init(name: n.name, reachable: n.reachable, state: .init(n.state), pressure: .init(n.pressure),
                      clockUncertaintyUs: n.clockUncertaintyUs, takeId: n.takeId, message: n.message,
                      mics: n.mics.map { .init(mic: $0.mic, levelDbfs: $0.levelDbfs, error: $0.error) },
                      lastHeardS: n.lastHeardS, diskFreeBytes: n.diskFreeBytes,
                      recordingLeftS: n.recordingLeftS)
            },
            cameras: v.cameras.map { c in
                .init(node: c.node, camera: c.camera, width: c.width, height: c.height, fps: c.fps, controls: .init(c.controls),
                      takeControls: .init(c.takeControls), drops: c.drops, phaseErrorUs: c.phaseErrorUs)
            },
            // Said only when there is one: absent is none (a demo's).
            rigFile: v.rigFile ? true : nil,
            // Said only while asked for or running: absent is off.
            previewTrain: v.previewTrain.on || !v.previewTrain.nodes.isEmpty ? .init(on: v.previewTrain.on, nodes: v.previewTrain.nodes) : nil)
    }
}

extension Components.Schemas.Multiview {
    init(_ v: LiveRig.MultiviewView) {
        self.init(group: v.group, centerUs: v.centerUs, complete: v.complete, takeId: v.takeId, tiles: v.tiles.map { t in
            .init(node: t.node, camera: t.camera, group: t.group, centerUs: t.centerUs, image: t.image, missing: t.missing,
                  phaseErrorUs: t.phaseErrorUs, drops: t.drops)
        })
    }
}

extension Components.Schemas.Take {
    init(_ v: LiveRig.TakeView) {
        self.init(takeId: v.takeId, name: v.name, state: .init(v.state), seconds: v.seconds, elapsedS: v.elapsedS,
                  message: v.message, report: v.report, startsInS: v.startsInS)
    }
}

extension Components.Schemas.TakeEntry {
    init(_ v: LiveRig.TakeEntry) {
        self.init(takeId: v.takeId, name: v.name, status: v.status, started: v.started, report: v.report)
    }
}

extension Components.Schemas.Event {
    init(_ v: LiveRig.EventView) {
        self.init(time: v.time, kind: v.kind, node: v.node, camera: v.camera, text: v.text)
    }
}
