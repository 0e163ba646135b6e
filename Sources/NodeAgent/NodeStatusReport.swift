import CoordCore
import CoordWire
import Foundation
import Capture
import Platform

/// What the node says it is doing: its Status reply (built in the rig's words and converted by CoordWire), its
/// metrics and its one line for the service manager.
extension NodeAgent {
    public func status() -> Coord_V1_Status {
        let (take, recorders) = takeRoom.withLock { ($0.take, $0.recorders) }
        let resources = pressureRoom.withLock { $0.resources }
        let local = localNow()
        var status = NodeStatus(node: configuration.name, state: take.state.reported, takeID: take.takeID ?? "")
        status.detail = take.detail
        status.pressure = take.pressure.level
        status.pressureCause = take.pressure.cause
        status.events = take.events
        // A node stopping keeps answering until someone has seen the take it ended as final (NodeServer).
        if take.stoppingCause != nil, !take.isActive { stopping.withLock { $0.endSeen = true } }
        if take.isActive { status.clockUncertaintyMicroseconds = take.clock?.uncertaintyMicroseconds }
        if take.isActive, let grid = take.grid, let rigNow = take.rigNow(localNow: local) {
            status.grid = grid
            status.rigNowMicroseconds = Int64(rigNow.rounded())
            status.stopGroup = take.stopGroup
        }
        for recorder in recorders {
            switch recorder.kind {
            case .camera(let camera): status.cameras.append(camera.status)
            case .microphone(let mic): status.mics.append(mic.status)
            }
        }
        status.controls = controlsInForce()
        var wire = status.wire
        wire.localNowUs = local
        wire.resources = resources.wire
        return wire
    }

    /// Each camera's controls as now in force: the values last read back from the camera (while it is open and no
    /// take records) with whatever was set since over them. The read-back (at most once a second per camera) runs on
    /// its own thread, never on the status request's path: a GigE camera gone from the network times out each
    /// register read, and the node's status must stay prompt; the next status carries what it read.
    func controlsInForce() -> [String: CameraControls] {
        let now = MonotonicClock.now()
        // Only while no take's recorders hold the cameras: during a take the values change only by a set, whose
        // answer is kept, and a camera that vanished mid-take must not be asked (each read would time out).
        let held = takeRoom.withLock { $0.take.isActive || !$0.recorders.cameras.isEmpty }
        let due: [(String, any ControllableCamera & Sendable)] = held ? [] : controlsRoom.withLock { s in
            let due = s.openCameras.compactMap { name, open -> (String, any ControllableCamera & Sendable)? in
                guard let camera = open.camera, camera.isStreaming, !s.controlsReading.contains(name),
                      now - (s.controlsRead[name]?.at ?? .min / 2) >= 1_000_000 else { return nil }
                return (name, camera)
            }
            s.controlsReading.formUnion(due.map(\.0))
            return due
        }
        if !due.isEmpty {
            Thread.detachNewThread { [self] in
                for (name, camera) in due {
                    let values = try? camera.apply(CameraControls())
                    controlsRoom.withLock { s in
                        if let values { s.controlsRead[name] = (MonotonicClock.now(), values) }
                        s.controlsReading.remove(name)
                    }
                }
            }
        }
        return controlsRoom.withLock { s in
            var out: [String: CameraControls] = [:]
            for camera in cameras.map(\.name) {
                // Never read (never open): what was set, which it opens with.
                let values = s.controlsRead[camera]?.controls ?? s.controls[camera] ?? CameraControls()
                if !values.isEmpty { out[camera] = values }
            }
            return out
        }
    }

    /// What `--metrics` exports now (CONTRACT §7).
    public func metricsSample() -> NodeMetricsSample {
        let freeDiskBytes = pressureRoom.withLock { $0.resources.freeDiskBytes }
        let bytesServed = servingRoom.withLock { $0.bytesServed }
        return takeRoom.withLock { s in
            let take = s.take
            var sample = NodeMetricsSample(node: configuration.name)
            sample.recording = take.state == .recording
            // Over the process's life (CONTRACT §7): the takes gone, plus the one whose recorders are here now.
            var counts = s.pastCameraCounts
            let live = take.state == .recording || take.state == .finished
            for recorder in s.recorders.cameras {
                let p = recorder.snapshot
                let name = recorder.settings.camera
                var c = counts[name] ?? NodeMetricsSample.Camera(camera: name, takeID: "")
                c.frames += UInt64(max(0, p.frames))
                c.dups += UInt64(max(0, p.dropped))
                c.drops += UInt64(max(0, p.sensorSkips))
                c.bytesWritten += p.bytesWritten
                c.phaseErrorMicroseconds = live ? p.phaseError : nil
                counts[name] = c
            }
            sample.cameras = counts.values.sorted { $0.camera < $1.camera }
            sample.clockUncertaintyMicroseconds = take.clock?.uncertaintyMicroseconds
            sample.pressure = take.pressure.level
            sample.freeDiskBytes = freeDiskBytes
            sample.takesRecorded = take.takesRecorded
            sample.bytesServed = bytesServed
            return sample
        }
    }

    /// One line for the service manager (systemd's STATUS=): what the node is doing now.
    public var statusLine: String {
        let take = takeRoom.withLock { $0.take }
        let cameras = "\(configuration.cameraNames.count) camera(s)"
        guard take.state != .idle, let takeID = take.takeID else { return "idle, \(cameras)" }
        return "\(take.state.rawValue) take \(takeID), \(cameras)"
    }
}

extension NodeState {
    /// The state as a Status reply says it: the machine's own.
    var reported: NodeState { self }
}

extension CameraRecorder {
    var status: NodeStatus.Camera {
        let p = snapshot
        var c = NodeStatus.Camera(camera: settings.camera)
        c.frames = p.frames
        c.dropped = p.dropped
        c.lastGroup = p.lastGroup
        c.finished = p.finished
        c.error = p.error ?? ""
        c.timestampNoiseMicroseconds = p.timestampNoise
        c.centerUncertaintyMicroseconds = p.centerUncertainty
        c.phaseRestarts = p.phaseRestarts
        c.held = p.held
        c.recordEvery = p.recordEvery
        c.disabled = p.disabled
        c.bytesWritten = p.bytesWritten
        c.trigger = triggerFigures
        c.extraFrames = p.extraFrames
        return c
    }
}

extension MicrophoneRecorder {
    var status: NodeStatus.Mic {
        let p = snapshot
        var m = NodeStatus.Mic(mic: mic)
        m.frames = p.frames
        m.sampleRate = sampleRate
        m.channels = 1
        m.startMicroseconds = p.startMicroseconds
        m.offsetP50Microseconds = p.offsetP50
        m.offsetP99Microseconds = p.offsetP99
        m.rateErrorPPM = p.rateErrorPPM
        m.finished = p.finished
        m.error = p.error ?? ""
        m.levelDBFS = p.levelDBFS
        m.bytesWritten = p.bytesWritten
        return m
    }
}
