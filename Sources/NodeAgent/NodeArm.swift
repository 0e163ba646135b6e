import CoordCore
import GenICam
import CoordWire
import Foundation
import Logging
import Capture
import Pixels
import Platform

/// The arm: the take decides, then the devices open outside the lock (up to seconds, so status and clock probes
/// are answered meanwhile) and the take is told how that went; an abort that arrives while they open wins.
extension NodeAgent {
    /// Serves an Arm: the take decides, its `openDevices` is carried out (`openDevices(_:for:)`), and the Armed
    /// reply tells what opened.
    func arm(_ request: NodeRequest.Arm) throws(NodeFailure) -> Coord_V1_Armed {
        // The cameras open for the take: an idle preview lets go of them first.
        stopPreview()
        let carried = try decide(for: request) { $0.handle(.arm(takeID: request.takeID, grid: request.grid, clock: request.clock)) }
        guard let opened = carried.armed else {
            throw NodeFailure(.internal, "the take of node \(configuration.name) opened no devices for take \(request.takeID).")
        }
        var armed = Coord_V1_Armed()
        armed.takeID = request.takeID
        armed.cameras = opened.settings.map(\.camera)
        armed.warnings = opened.cameras.compactMap(\.phaseWarning)
        armed.warnings += zip(opened.settings, opened.identities).compactMap { s, device in
            device.timestamp?.warning(node: configuration.name, camera: s.camera)
        }
        let open = controlsRoom.withLock { $0.openCameras }
        armed.controls = opened.settings.compactMap { s in
            guard let camera = open[s.camera]?.camera, let inForce = try? camera.apply(CameraControls()) else { return nil }
            var c = Coord_V1_ControlsApplied()
            c.camera = s.camera
            c.controls = inForce.wire
            return c
        }
        armed.devices = zip(opened.settings, opened.identities).map { s, identity in .init(camera: s.camera, identity) }
            + opened.microphones.map { .init(microphone: $0.name, card: $0.deviceName) }
        return armed
    }

    /// What an arm's devices opened as.
    struct OpenedDevices {
        var settings: [CameraSettings]
        var cameras: [CameraRecorder]
        var identities: [DeviceIdentity]
        var microphones: [MicrophoneRecorder]
    }

    /// The take's `openDevices`: the devices open outside the lock (up to seconds, so status and clock probes are
    /// answered meanwhile) and the take is told how that went; an abort that arrives while they open wins.
    func openDevices(_ arming: NodeTake.Arming, settings: [CameraSettings], grid: FrameGrid, clock: ClockMapping,
                     for request: NodeRequest.Arm) throws(NodeFailure) -> OpenedDevices {
        let takeID = request.takeID
        let mapping = ClockMappingBox(clock)
        /// Ends an arm whose devices failed: the take fails unless an abort already took the node elsewhere.
        func failed(_ failure: NodeFailure, _ made: [any TakeRecorder]) -> NodeFailure {
            made.forEach { $0.abandonRecording() }
            do {
                try decide { $0.handle(.openFailed(arming, failure)) }
            } catch {
                return error
            }
            return failure
        }
        var metadata = ["coord_take": takeID, "coord_node": configuration.name]
        if !request.timecode.isEmpty { metadata["timecode"] = request.timecode }
        let directory = store.takeDirectory(takeID).appendingPathComponent(configuration.name, isDirectory: true)
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw failed(NodeFailure(.io, "node \(configuration.name) cannot create its staging directory \(directory.path): \(reason(error))."), [])
        }
        let preview = (request.preview?.width ?? 0) > 0 ? self.preview : nil
        let triggering: [String: CameraTriggering]
        do {
            triggering = try openTriggerOutputs(settings: settings, grid: grid, mapping: mapping)
        } catch {
            throw failed(error, [])
        }
        /// A failed arm's outputs stop at once (its recorders, abandoned, would stop them too).
        func failedTriggered(_ failure: NodeFailure, _ made: [any TakeRecorder]) -> NodeFailure {
            triggering.generators.forEach { $0.cancel() }
            return failed(failure, made)
        }
        var made: [CameraRecorder] = []
        var identities: [DeviceIdentity] = []
        for (index, s) in settings.enumerated() {
            do {
                let source = try cameraSource(for: s, index: index)
                identities.append(source.identity)
                let camera = s.camera
                made.append(try CameraRecorder(
                    settings: s, node: configuration.name, directory: directory, source: source, grid: grid, clock: mapping,
                    metadata: metadata.merging(["coord_camera": s.camera]) { $1 },
                    localNow: { [weak self] in self?.localNow() ?? 0 }, logger: logger,
                    onFinish: { [weak self] in self?.report(.recorderFinished(arming, recorder: camera)) },
                    onEvent: { [weak self] kind, detail in self?.recorderEvent(arming, camera, kind, detail) },
                    preview: preview, takeID: takeID, triggering: triggering[s.camera]))
            } catch {
                throw failedTriggered(error, made)
            }
        }
        if let settings = request.preview, let preview = self.preview {
            preview.configure(settings, framePeriodMicroseconds: grid.periodMicroseconds)
        }
        made.forEach { $0.arm() }
        // Every source starts on its recorder's thread (a V4L2 camera waits there for its start instant, at most
        // a frame): the arm succeeds only once all of them stream.
        let startDeadline = DispatchTime.now() + .milliseconds(3000)
        if let failure = made.lazy.compactMap({ $0.waitUntilStarted(deadline: startDeadline) }).first {
            throw failedTriggered(NodeFailure(.io, failure.hasSuffix(".") ? failure : failure + "."), made)
        }
        let mics = armMicrophones(arming, directory: directory, grid: grid, mapping: mapping, metadata: metadata)
        let recorders: [any TakeRecorder] = made + mics
        do {
            try decide { take in
                take.handle(.opened(arming, cameras: made.map(\.name), microphones: mics.map(\.name)))
            } keeping: { s in
                s.recorders = recorders
                s.clock = mapping
            }
        } catch {
            recorders.forEach { $0.abandonRecording() }
            throw error
        }
        logger.info("armed", metadata: ["take": "\(takeID)", "t0_us": "\(grid.t0)"])
        return OpenedDevices(settings: settings, cameras: made, identities: identities, microphones: mics)
    }

    /// The source a configured camera records from: a synthetic sensor, or its V4L2 device opened and set up for
    /// the take's size, rate and codec. Throws one sentence naming the camera when the device cannot do it.
    func cameraSource(for s: CameraSettings, index: Int) throws(NodeFailure) -> any CameraSource & ControllableCamera & Sendable {
        let source = try openSource(for: s, index: index)
        let wanted = controlsRoom.withLock { st in
            st.openCameras[s.camera] = .init(camera: source)
            return st.controls[s.camera]
        }
        if let wanted, !wanted.isEmpty {
            do {
                _ = try source.apply(wanted)
            } catch {
                logger.warning("controls not applied", metadata: ["camera": "\(s.camera)", "why": "\(error)"])
            }
        }
        return source
    }

    private func openSource(for s: CameraSettings, index: Int) throws(NodeFailure) -> any CameraSource & ControllableCamera & Sendable {
        let clock = simulatedClock
        // A frame-rate cap runs the camera itself at fps / record_every (CameraRecorder locks it to every k-th group).
        let period = 1_000_000 / s.capturedFPS
        if let entry = configuration.v4l2Cameras.first(where: { $0.name == s.camera }) {
            let codec = s.codec
            configuration.v4l2.setStripeOrdinal(UInt8(clamping: s.ordinal), camera: s.camera)
            do {
                let camera = try configuration.v4l2.open(camera: s.camera, path: entry.device, width: s.width, height: s.height,
                                                         periodMicroseconds: period, codec: codec) { host in clock.local(fromHost: host) }
                for note in camera.controlNotes {
                    logger.warning("control not locked", metadata: ["camera": "\(s.camera)", "note": "\(note)"])
                }
                logger.info("camera configured", metadata: [
                    "camera": "\(s.camera)", "device": "\(entry.device)", "format": "\(camera.choice.fourcc)",
                    "passthrough": "\(camera.choice.passthrough)", "exposure_us": "\(Int(camera.exposureMicroseconds))"])
                return camera
            } catch {
                throw NodeFailure(.io, "camera \(configuration.name)/\(s.camera): \(error).")
            }
        }
        if let entry = configuration.libcameraCameras.first(where: { $0.name == s.camera }) {
            return try LibcameraCameras.open(entry, node: configuration.name, width: s.width, height: s.height, periodMicroseconds: period,
                                             logger: logger) { host in clock.local(fromHost: host) }
        }
        if let entry = configuration.genicamCameras.first(where: { $0.name == s.camera }) {
            do {
                let camera = try GenICamCamera(deviceID: entry.deviceID, interfaces: configuration.genicamInterfaces, width: s.width, height: s.height, periodMicroseconds: period,
                                               trigger: configuration.cameraTriggers[s.camera]) { host in
                    clock.local(fromHost: host)
                }
                logger.info("camera configured", metadata: [
                    "camera": "\(s.camera)", "genicam": "\(entry.deviceID)", "format": "\(camera.pixelFormat.rawValue)",
                    "tick_hz": "\(camera.tickFrequency.map(String.init) ?? "none")"])
                return camera
            } catch {
                throw NodeFailure(.io, "camera \(configuration.name)/\(s.camera): \(error).")
            }
        }
        if configuration.syntheticOpenMilliseconds > 0 { usleep(UInt32(configuration.syntheticOpenMilliseconds) * 1000) }
        var spec = SyntheticSensor.Spec(
            ordinal: UInt8(s.ordinal), width: s.width, height: s.height, periodMicroseconds: period,
            rateErrorPPM: sensorRateError(index), timestampJitterMicroseconds: configuration.timestampJitterMicroseconds,
            seed: configuration.seed &* 1_000_003 &+ UInt64(index))
        spec.grain = configuration.syntheticGrain
        spec.frameDurationTiming = configuration.syntheticFrameDurationTiming
        return SyntheticSensor(spec: spec) { host in clock.local(fromHost: host) }
    }

    private func sensorRateError(_ index: Int) -> Double {
        var random = SeededRandom(seed: configuration.seed &+ 7919 &* UInt64(index + 1))
        return Double.random(in: -configuration.sensorRateErrorPPM...configuration.sensorRateErrorPPM, using: &random)
    }
}
