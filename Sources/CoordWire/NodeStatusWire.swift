import CoordCore

extension NodeStatus {
    /// The Status reply a node sends, from its status in the rig's words (the inverse of `init(wire:)`; the
    /// node's local clock and resources are the node's to add).
    public var wire: Coord_V1_Status {
        var s = Coord_V1_Status()
        s.node = node
        s.takeID = takeID
        s.detail = detail
        if let pressure { s.pressure = Coord_V1_PressureLevel(rawValue: pressure.rawValue) ?? .nominal }
        s.pressureCause = pressureCause
        s.events = events.map(\.wire)
        if let grid {
            s.t0Us = grid.t0
            s.framePeriodUs = UInt64(grid.periodMicroseconds)
            (s.fpsNum, s.fpsDen) = Wire.rateFields(grid.rationalRate)
        }
        s.rigNowUs = rigNowMicroseconds
        s.stopGroup = stopGroup
        s.clockUncertaintyUs = clockUncertaintyMicroseconds ?? 0
        s.controls = controls.sorted { $0.key < $1.key }.map { camera, values in
            var c = Coord_V1_ControlsApplied()
            c.camera = camera
            c.controls = values.wire
            return c
        }
        switch state {
        case .idle: s.state = .idle
        case .configured: s.state = .configured
        case .armed: s.state = .armed
        case .recording: s.state = .recording
        case .finished: s.state = .finished
        case .failed: s.state = .failed
        }
        s.cameras = cameras.map { camera in
            var c = Coord_V1_CameraStatus()
            c.camera = camera.camera
            c.frames = UInt64(clamping: camera.frames)
            c.dropped = UInt64(clamping: camera.dropped)
            c.lastGroup = camera.lastGroup
            c.finished = camera.finished
            c.error = camera.error
            c.timestampNoiseUs = camera.timestampNoiseMicroseconds
            c.centerUncertaintyUs = camera.centerUncertaintyMicroseconds
            c.phaseRestarts = UInt32(clamping: camera.phaseRestarts)
            c.held = UInt64(clamping: camera.held)
            c.recordEvery = UInt32(clamping: camera.recordEvery)
            c.disabled = camera.disabled
            c.bytesWritten = camera.bytesWritten
            if let t = camera.trigger {
                c.trigger = .with {
                    $0.output = t.output; $0.source = t.source; $0.pulses = UInt64(clamping: t.pulses)
                    $0.errorP50Us = t.error.p50; $0.errorP99Us = t.error.p99; $0.errorMaxUs = t.error.max
                    $0.extraFrames = UInt64(clamping: camera.extraFrames)
                }
            }
            return c
        }
        s.mics = mics.map { mic in
            var m = Coord_V1_MicStatus()
            m.mic = mic.mic
            m.frames = UInt64(clamping: mic.frames)
            m.sampleRate = UInt32(clamping: mic.sampleRate)
            m.channels = UInt32(clamping: mic.channels)
            m.startUs = mic.startMicroseconds
            m.avOffsetP50Us = mic.offsetP50Microseconds
            m.avOffsetP99Us = mic.offsetP99Microseconds
            m.rateErrorPpm = mic.rateErrorPPM
            m.finished = mic.finished
            m.error = mic.error
            m.levelDbfs = mic.levelDBFS
            m.bytesWritten = mic.bytesWritten
            return m
        }
        return s
    }
}
