import CAravis
import CoordCore
import Foundation
import Capture
import Pixels
import Platform

/// A machine-vision camera (GigE Vision or USB3 Vision) through Aravis, as a camera source: opened by its device id
/// (`Aravis-Fake-GV01`, `Basler-21234567`), set to the take's size, pixel format and frame rate through GenICam's
/// standard feature names (with the `…Abs`/`…Raw` names older cameras still use), free-running.
///
/// Buffers are popped on the recorder's thread. One that arrives incomplete (lost packets) is counted in
/// `incompleteBuffers` and never delivered: its group is filled by the recorder, no torn frame reaches the file. A
/// camera that stops answering ends the source with one sentence.
///
/// Timing. Each buffer's device timestamp goes through a `DeviceClockFit` (device time → arrival on the node's
/// clock) and is taken as the start of exposure, as SFNC cameras latch it. The camera free-runs, so `start` starts
/// acquisition at the instant that puts the first exposure centre on the grid and the phase reached is measured
/// (`settledPhaseMicroseconds`), not assumed; docs/genicam.md says why hardware trigger or PTP is what real rigs use.
// @unchecked: the ArvCamera and ArvStream pointers; the stream is popped by the recorder's thread only, feature
// access (controls from the console's thread, the liveness probe) is serialized under `deviceLock`.
public final class GenICamCamera: CameraSource, ControllableCamera, @unchecked Sendable {
    /// Buffers queued to the stream: enough for a recorder thread late by a few frames.
    public static let bufferCount: UInt32 = 8

    public let deviceID: String
    public let identity: DeviceIdentity
    public let pixelFormat: GenICamPixelFormat
    public let width: Int, height: Int
    /// The frame period the camera was set to, µs.
    public let periodMicroseconds: Double
    /// The device's timestamp clock in Hz (GevTimestampTickFrequency), nil when it has none.
    public let tickFrequency: Int64?
    public let controlRanges: ControlRanges
    /// Buffers that arrived incomplete (lost packets, timeouts) and were dropped.
    public var incompleteBuffers: Int { deviceLock.holding { incomplete } }
    /// The phase (µs from the nearest grid instant) of the first frame, once `settlePhase` has measured it.
    public private(set) var settledPhaseMicroseconds: Double?
    /// A camera bound to a trigger output: its TriggerDelay as read back (µs), and its trigger features as they were
    /// before the take, put back at `stop` (CONTRACT §17).
    public private(set) var triggerDelayMicroseconds: Double?
    private var triggerBefore: Features.TriggerState?

    private let features: Features
    private let camera: UnsafeMutablePointer<ArvCamera>
    private var stream: UnsafeMutablePointer<ArvStream>?
    private let localClock: @Sendable (Int64) -> Int64
    private let deviceLock = NSLock()
    private var incomplete = 0
    private var exposureInForce: Double
    private var pool: [PlanarFrame] = []
    private var stopped = false
    /// Until `stop`: the camera is let go of then, so a GigE Vision camera's control is free for the next take.
    private var cameraOpen = true
    private var endReason: String?
    private var fit = DeviceClockFit()
    private var lastFrameID: UInt64?
    private var sequence: UInt32 = 0
    private var lastArrival = MonotonicClock.now()

    /// Opens `deviceID` (a GigE Vision camera found on `interfaces` only, or a USB3 Vision camera) and sets it up
    /// for `width`×`height` every `periodMicroseconds`. `localClock` maps CLOCK_MONOTONIC µs to the node's clock.
    /// Throws one sentence naming the device when it cannot.
    public init(deviceID: String, interfaces: [String], width: Int, height: Int, periodMicroseconds: Double,
                trigger: CameraTrigger? = nil, localClock: @escaping @Sendable (Int64) -> Int64) throws {
        self.deviceID = deviceID
        self.localClock = localClock
        let camera = try Features.open(deviceID, interfaces: interfaces)
        self.camera = camera
        let features = Features(camera: camera, deviceID: deviceID)
        self.features = features
        do {
            identity = features.identity()
            let offered = try features.pixelFormats()
            guard let format = GenICamPixelFormat.preferred(among: offered) else {
                throw CameraSourceError("\(deviceID) offers no pixel format coord can record (it offers \(offered.joined(separator: ", ")); coord takes Mono8, Mono16, RGB8 or Bayer 8-bit)")
            }
            pixelFormat = format
            let before = trigger.map { _ in features.triggerState() }
            try features.prepareFreeRun()
            if let trigger {
                triggerBefore = before
                triggerDelayMicroseconds = try features.applyTrigger(trigger)
            }
            try features.setString("PixelFormat", format.name(among: offered))
            try features.setSize(width: width, height: height)
            self.width = width
            self.height = height
            let kept = try features.setFramePeriod(periodMicroseconds)
            self.periodMicroseconds = kept
            tickFrequency = features.tickFrequency()
            // An exposure longer than the frame would slow the camera below the rig's rate: half the frame, as the
            // synthetic cameras run, until the operator sets another.
            if let exposure = features.exposureMicroseconds(), exposure > kept * 0.9 { try? features.setExposure(kept / 2) }
            exposureInForce = features.exposureMicroseconds() ?? kept / 2
            controlRanges = features.controlRanges()
            carv_camera_gv_disable_packet_socket(camera)
        } catch {
            carv_camera_close(camera)
            throw error
        }
    }

    deinit { stop() }

    // MARK: Controls

    public var isStreaming: Bool { deviceLock.holding { stream != nil && !stopped } }

    /// Sets exposure (ExposureTime, µs) and gain (Gain in dB, or GainRaw in the camera's own units); a GenICam
    /// camera has no white balance temperature or focus coord sets. Returns the values in force.
    public func apply(_ controls: CameraControls) throws -> CameraControls {
        if let problem = controlRanges.problem(with: controls, camera: deviceID) { throw CameraSourceError(problem) }
        return try deviceLock.holding {
            guard cameraOpen else { throw CameraSourceError("\(deviceID) is closed (its take is over)") }
            if let us = controls.exposureMicroseconds {
                try features.setExposure(Double(us))
                exposureInForce = features.exposureMicroseconds() ?? Double(us)
            }
            if let gain = controls.gainDecibels { try features.setGain(gain) }
            return CameraControls(exposureMicroseconds: features.exposureMicroseconds().map { Int($0.rounded()) },
                                  gainDecibels: features.gain())
        }
    }

    // MARK: CameraSource

    public var minPeriodMicroseconds: Double { periodMicroseconds }
    public var maxPeriodMicroseconds: Double { periodMicroseconds }
    public var canSteerPhase: Bool { false }

    /// Starts acquisition at the instant that puts the first frame's exposure centre on a grid instant.
    public func start(alignedTo anchor: GridAnchor?) throws {
        try deviceLock.holding {
            guard cameraOpen, !stopped else { throw CameraSourceError("\(deviceID) was stopped before it started") }
            let payload = try features.payload()
            var err = [CChar](repeating: 0, count: 512)
            guard let opened = carv_stream_open(camera, payload, Self.bufferCount, &err, 512) else {
                throw CameraSourceError("\(deviceID) could not open its stream: \(text(err))")
            }
            stream = opened
        }
        if let anchor {
            ThreadPriority.withRealtime {
                let host = MonotonicClock.now()
                let local = Double(localClock(host))
                let lead = exposureInForce / 2
                // 2 ms to wake up and reach AcquisitionStart.
                let instant = anchor.nextInstant(atOrAfter: local + lead + 2_000)
                MonotonicClock.sleep(until: host + Int64((instant - lead - local).rounded()))
            }
        }
        try deviceLock.holding {
            guard cameraOpen, !stopped else { throw CameraSourceError("\(deviceID) was stopped before it started") }
            lastArrival = MonotonicClock.now()
            try features.call("AcquisitionStart") { carv_start_acquisition(camera, $0, $1) }
        }
    }

    /// Measures the phase of the first frame against the grid (a free-running camera keeps it, drifting by its
    /// rate error); the frame is not delivered.
    public func settlePhase(on anchor: GridAnchor) {
        guard anchor.periodMicroseconds > 0 else { return }
        let deadline = MonotonicClock.now() + Int64(3 * anchor.periodMicroseconds) + 500_000
        while MonotonicClock.now() < deadline {
            switch next(timeoutMicroseconds: deadline - MonotonicClock.now()) {
            case .frame(let capture):
                let centre = capture.stampedCenterLocal
                let nearest = anchor.instantLocal + ((centre - anchor.instantLocal) / anchor.periodMicroseconds).rounded() * anchor.periodMicroseconds
                settledPhaseMicroseconds = centre - nearest
                release(capture)
                return
            case .none: continue
            case .ended: return
            }
        }
    }

    public func stop() {
        deviceLock.holding {
            guard !stopped else { return }
            stopped = true
            if let stream {
                var err = [CChar](repeating: 0, count: 256)
                _ = carv_stop_acquisition(camera, &err, 256)
                carv_stream_close(stream)
                self.stream = nil
            }
            if cameraOpen {
                if let triggerBefore { features.restoreTrigger(triggerBefore) }
                carv_camera_close(camera)
                cameraOpen = false
            }
        }
    }

    public func next(timeoutMicroseconds: Int64) -> CaptureResult {
        if let endReason { return .ended(endReason) }
        let deadline = MonotonicClock.now() + max(0, timeoutMicroseconds)
        while true {
            let left = deadline - MonotonicClock.now()
            guard left > 0 else { return .none }
            // Popped in slices so that `stop` from another thread is seen.
            let popped: OpaquePointer? = deviceLock.holding {
                guard !stopped, let stream else { return nil }
                return carv_stream_pop(stream, UInt64(min(left, 50_000)))
            }
            let stoppedNow = deviceLock.holding { stopped }
            if stoppedNow { return .none }
            guard let buffer = popped else {
                if let reason = livenessProblem() {
                    endReason = reason
                    return .ended(reason)
                }
                continue
            }
            let arrived = MonotonicClock.now()
            lastArrival = arrived
            let made = capture(from: buffer, arrivedHost: arrived)
            deviceLock.holding {
                if let stream, !stopped { carv_stream_push(stream, buffer) }
            }
            if let made { return .frame(made) }
        }
    }

    public func release(_ capture: Capture) {
        guard case .picture(let picture) = capture.payload else { return }
        deviceLock.holding { pool.append(picture) }
    }

    /// A free-running GenICam camera takes no per-frame duration (see the type's note).
    public func requestNextFramePeriod(_ microseconds: Double) -> Bool { false }

    // MARK: Buffers

    /// The buffer as a capture, or nil when it is incomplete or not the image asked for (counted as a drop).
    private func capture(from buffer: OpaquePointer, arrivedHost: Int64) -> Capture? {
        let frameID = carv_buffer_frame_id(buffer)
        advanceSequence(to: frameID)
        guard carv_buffer_status(buffer) == 0, Int(carv_buffer_width(buffer)) == width, Int(carv_buffer_height(buffer)) == height,
              GenICamPixelFormat(code: carv_buffer_pixel_format(buffer)) == pixelFormat else {
            deviceLock.holding { incomplete += 1 }
            return nil
        }
        var size = 0
        guard let data = carv_buffer_data(buffer, &size) else {
            deviceLock.holding { incomplete += 1 }
            return nil
        }
        let picture = deviceLock.holding { pool.popLast() } ?? PlanarFrame(width: width, height: height)
        guard GenICamConversion.convert(UnsafeRawBufferPointer(start: data, count: size), format: pixelFormat, into: picture) else {
            deviceLock.holding { pool.append(picture); incomplete += 1 }
            return nil
        }
        let arrivedLocal = Double(localClock(arrivedHost))
        let device = Double(carv_buffer_timestamp_ns(buffer)) / 1000
        let stamped: Double
        if device > 0 {
            fit.add(deviceMicroseconds: device, arrivedLocal: arrivedLocal)
            stamped = fit.local(ofDevice: device) ?? arrivedLocal
        } else {
            stamped = arrivedLocal
        }
        let exposure = deviceLock.holding { exposureInForce }
        return Capture(payload: .picture(picture), sequence: sequence, timestampLocal: Int64(stamped.rounded()),
                       timestampMeaning: device > 0 ? .startOfExposure : .endOfFrame(readoutMicroseconds: 0),
                       exposureMicroseconds: Int64(exposure.rounded()), durationMicroseconds: periodMicroseconds)
    }

    /// The frame counter as the recorder sees it: the device's block id, unwrapped.
    private func advanceSequence(to frameID: UInt64) {
        defer { lastFrameID = frameID }
        guard let last = lastFrameID else { return }
        sequence &+= UInt32(clamping: Self.sequenceStep(from: last, to: frameID))
    }

    /// How many frames on from block id `last` is `id`: GigE Vision's 16-bit id wraps from 65535 to 1 (0 is never
    /// used); an id that goes backwards otherwise (the camera restarted its count) counts as the next frame.
    static func sequenceStep(from last: UInt64, to id: UInt64) -> UInt64 {
        if id > last { return id - last }
        if last >= 60_000, last <= 65_535, id < 5_536 { return id + 65_535 - last }
        return 1
    }

    /// One sentence when the camera has stopped answering: nothing for a second and ten frame periods, and a
    /// feature read fails.
    private func livenessProblem() -> String? {
        let quiet = MonotonicClock.now() - lastArrival
        guard quiet > max(1_000_000, Int64(10 * periodMicroseconds)) else { return nil }
        lastArrival = MonotonicClock.now()
        return deviceLock.holding {
            guard cameraOpen else { return nil }
            do {
                _ = try features.integer("Width")
                return nil
            } catch {
                return "\(deviceID) stopped answering: no frame for \(String(format: "%.1f", Double(quiet) / 1e6)) s, and \(error)"
            }
        }
    }
}
