import CoordCore
import Foundation
import Pixels
import Platform
import Synchronization

/// A synthetic camera that behaves like a free-running sensor (CONTRACT §5): its frame clock runs on the
/// host's real time with its own rate error and a random start phase; the node sees each frame only
/// through its (simulated) local clock and a noisy start-of-exposure buffer timestamp, as from V4L2.
/// Every frame carries the SYNCSTRIPE with the true exposure-centre time, which only tests read.
public final class SyntheticSensor: CameraSource, ControllableCamera, Sendable {
    public var identity: DeviceIdentity { .synthetic }
    public struct Spec: Sendable {
        public var ordinal: UInt8
        public var width: Int
        public var height: Int
        public var nominalPeriodMicroseconds: Double
        /// The sensor's own rate error: its real frame period is nominal × (1 + ppm·1e-6).
        public var rateErrorPPM: Double
        public var exposureMicroseconds: Double
        /// Standard deviation of the buffer timestamp's noise, as a driver's.
        public var timestampJitterMicroseconds: Double
        /// Frame-duration limits the sensor declares (as a real sensor's VBLANK range allows).
        public var minPeriodMicroseconds: Double
        public var maxPeriodMicroseconds: Double
        public var seed: UInt64
        /// Buffers in the capture queue, as V4L2's REQBUFS count: when all are held downstream, frames drop.
        public var bufferCount: Int
        /// Sensor-like noise added to every frame outside the stripe (`TestPattern.addGrain`); 0: the clean pattern.
        public var grain: Int = 0
        /// When and in what steps a requested frame duration applies: by default the very next frame, any duration;
        /// `coord demo --sensor-delay-frames N --sensor-line-us L` makes it a Raspberry Pi sensor's.
        public var frameDurationTiming: FrameDurationTiming = .immediate

        /// The shortest frame the synthetic sensor can run (60 fps), as the node declares it in the handshake.
        public static let fastestPeriodMicroseconds: Double = 16_667

        public init(ordinal: UInt8, width: Int, height: Int, fps: Int, rateErrorPPM: Double, timestampJitterMicroseconds: Double,
                    seed: UInt64, bufferCount: Int = 6) {
            self.init(ordinal: ordinal, width: width, height: height, periodMicroseconds: 1_000_000 / Double(fps),
                      rateErrorPPM: rateErrorPPM, timestampJitterMicroseconds: timestampJitterMicroseconds, seed: seed,
                      bufferCount: bufferCount)
        }

        /// A sensor running one frame every `periodMicroseconds` (nominal), e.g. a frame-rate cap's fps / k; the
        /// exposure is half the period.
        public init(ordinal: UInt8, width: Int, height: Int, periodMicroseconds: Double, rateErrorPPM: Double,
                    timestampJitterMicroseconds: Double, seed: UInt64, bufferCount: Int = 6) {
            precondition(periodMicroseconds > 0, "a sensor's frame period must be positive")
            self.ordinal = ordinal; self.width = width; self.height = height
            self.nominalPeriodMicroseconds = periodMicroseconds
            self.rateErrorPPM = rateErrorPPM
            self.exposureMicroseconds = periodMicroseconds / 2
            self.timestampJitterMicroseconds = timestampJitterMicroseconds
            // Like a typical USB/CSI sensor: at most 60 frames a second, a frame as long as a second.
            self.minPeriodMicroseconds = Spec.fastestPeriodMicroseconds
            self.maxPeriodMicroseconds = 1_000_000
            self.seed = seed
            self.bufferCount = bufferCount
        }
    }

    public let spec: Spec
    private let localClock: @Sendable (Int64) -> Int64
    private let state: Mutex<State>
    /// The picture the operator's controls make; a room of its own, since only `apply` and the painting touch it.
    private let picture = Mutex(Picture())
    /// Where the grain's xorshift64 starts: only the sensor thread draws from it, so its state is that thread's own.
    private let grainSeed: UInt64
    /// Captured frames waiting for `next`.
    private let queue = CaptureQueue<Capture>()

    /// The frame clock and its buffers: the sensor thread, `start`/`stop`, the phase loop and `release` meet here.
    private struct State {
        var free: [PlanarFrame]
        var running = false
        var durations: FrameDurationPipeline
        var random: SeededRandom
        var droppedAtSensor: UInt64 = 0
        var produced: UInt64 = 0
    }

    /// The controls in force: the picture follows exposure and gain (brightness) and white balance (tint); the
    /// frame timing does not change, so sync is unaffected.
    private struct Picture {
        var controls = CameraControls()
        var look = TestPattern.Look()
    }

    /// What the sensor thread takes from `state` for one frame.
    private struct Exposed {
        var duration: Double
        var buffer: PlanarFrame?
        var noise: Double
    }

    /// Frames the sensor produced with no free buffer to put them in.
    public var droppedAtSensor: UInt64 { state.withLock { $0.droppedAtSensor } }
    public var produced: UInt64 { state.withLock { $0.produced } }

    /// `localClock` maps the host's CLOCK_MONOTONIC (µs) to the node's local clock (µs).
    public init(spec: Spec, localClock: @escaping @Sendable (Int64) -> Int64) {
        self.spec = spec
        self.localClock = localClock
        var seeder = SeededRandom(seed: spec.seed ^ 0x6772_6169_6E00_0000)
        let durations = FrameDurationPipeline(timing: spec.frameDurationTiming, minPeriodMicroseconds: spec.minPeriodMicroseconds,
                                              maxPeriodMicroseconds: spec.maxPeriodMicroseconds,
                                              nominalPeriodMicroseconds: spec.nominalPeriodMicroseconds)
        state = Mutex(State(free: (0..<spec.bufferCount).map { _ in PlanarFrame(width: spec.width, height: spec.height) },
                            durations: durations, random: SeededRandom(seed: spec.seed)))
        grainSeed = seeder.next() | 1
    }

    /// Like a typical sensor: exposure up to the frame period, 0…24 dB of gain, 2500…9000 K, a focus motor.
    public var controlRanges: ControlRanges { Self.controlRanges(periodMicroseconds: spec.nominalPeriodMicroseconds) }

    public static func controlRanges(periodMicroseconds: Double) -> ControlRanges {
        ControlRanges(exposureMicroseconds: 10...max(10, Int(periodMicroseconds)), gainDecibels: 0...24,
                      whiteBalanceKelvin: 2500...9000, focus: 0...1)
    }

    public var isStreaming: Bool { state.withLock { $0.running } }

    public func apply(_ new: CameraControls) throws -> CameraControls {
        if let problem = controlRanges.problem(with: new, camera: "synthetic") { throw CameraSourceError(problem) }
        let controls = picture.withLock { picture in
            picture.controls = picture.controls.updated(with: new)
            let exposure = Double(picture.controls.exposureMicroseconds ?? Int(spec.exposureMicroseconds))
            let gain = pow(10, (picture.controls.gainDecibels ?? 0) / 20)
            picture.look = TestPattern.Look(gain: exposure / spec.exposureMicroseconds * gain,
                                            warmth: ((picture.controls.whiteBalanceKelvin ?? 5000) - 5000) / 100)
            return picture.controls
        }
        let exposure = Double(controls.exposureMicroseconds ?? Int(spec.exposureMicroseconds))
        return CameraControls(exposureMicroseconds: Int(exposure), gainDecibels: controls.gainDecibels ?? 0,
                              whiteBalanceKelvin: controls.whiteBalanceKelvin ?? 5000, focus: controls.focus ?? 0)
    }

    public var minPeriodMicroseconds: Double { spec.minPeriodMicroseconds }
    public var maxPeriodMicroseconds: Double { spec.maxPeriodMicroseconds }
    /// A synthetic sensor takes a frame-duration change for its next frame, as a real sensor's VBLANK control does.
    public var canSteerPhase: Bool { true }
    public var frameDurationTiming: FrameDurationTiming { spec.frameDurationTiming }

    /// Starts the free-running frame clock at a random phase; the phase loop steers it onto the grid, so the
    /// anchor is not used.
    public func start(alignedTo anchor: GridAnchor?) {
        start()
    }

    /// Starts the free-running frame clock at a random phase.
    public func start() {
        let phase: Double? = state.withLock { state in
            guard !state.running else { return nil }
            state.running = true
            return Double.random(in: 0..<spec.nominalPeriodMicroseconds, using: &state.random)
        }
        guard let phase else { return }
        let firstStart = Double(MonotonicClock.now()) + phase
        let thread = Thread { [self] in
            ThreadPriority.makeCurrentThreadNormal()
            ThreadPriority.nameCurrentThread("sensor-\(spec.ordinal)")
            run(firstStart: firstStart)
        }
        thread.name = "sensor-\(spec.ordinal)"
        thread.qualityOfService = .userInteractive
        thread.start()
    }

    public func stop() {
        state.withLock { $0.running = false }
        queue.wake()
    }

    /// Requests one frame duration for the next frame (or the one `delayFrames` after it, in whole lines), as a
    /// sensor's frame-duration control does. Returns false (and changes nothing) outside the declared limits.
    @discardableResult
    public func requestNextFramePeriod(_ microseconds: Double) -> Bool {
        state.withLock { $0.durations.request(microseconds) }
    }

    /// The next captured frame, waiting at most `timeoutMicroseconds`; `.none` on timeout or after stop.
    public func next(timeoutMicroseconds: Int64) -> CaptureResult {
        queue.next(timeoutMicroseconds: timeoutMicroseconds) { isStreaming }.map { .frame($0) } ?? .none
    }

    public func release(_ capture: Capture) {
        if case .picture(let picture) = capture.payload { release(picture) }
    }

    /// Gives a picture back to the sensor's buffer pool.
    public func release(_ picture: PlanarFrame) {
        state.withLock { $0.free.append(picture) }
    }

    private func run(firstStart: Double) {
        var start = firstStart
        var counter: UInt32 = 0
        var grainState = grainSeed
        while true {
            let exposure = spec.exposureMicroseconds
            // The frame is readable once its exposure has ended.
            MonotonicClock.sleep(until: Int64((start + exposure).rounded(.up)))
            // A requested duration is counted by the sensor's own (slightly wrong) clock, as a real sensor's is.
            let next = state.withLock { state -> Exposed? in
                guard state.running else { return nil }
                let duration = state.durations.nextFrameDuration()
                state.produced += 1
                let buffer = state.free.popLast()
                if buffer == nil { state.droppedAtSensor += 1 }
                let noise = buffer == nil ? 0 : state.random.gaussian(standardDeviation: spec.timestampJitterMicroseconds)
                return Exposed(duration: duration, buffer: buffer, noise: noise)
            }
            guard let frame = next else { break }
            let duration = frame.duration
            let period = duration * (1 + spec.rateErrorPPM * 1e-6)

            let center = start + exposure / 2
            if let buffer = frame.buffer {
                let look = picture.withLock { $0.look }
                TestPattern.paint(into: buffer, frameCounter: counter, ordinal: spec.ordinal, look: look)
                if spec.grain > 0 { TestPattern.addGrain(to: buffer, amplitude: spec.grain, state: &grainState) }
                SyncStripe(ordinal: spec.ordinal, frameCounter: counter, trueCenterMicroseconds: Int64(center.rounded()))
                    .paint(into: buffer)
                let stamp = localClock(Int64(start.rounded())) + Int64(frame.noise.rounded())
                let capture = Capture(payload: .picture(buffer), sequence: counter, timestampLocal: stamp,
                                      timestampMeaning: .startOfExposure, exposureMicroseconds: Int64(exposure.rounded()),
                                      durationMicroseconds: duration)
                queue.push(capture)
            }
            counter &+= 1
            start += period
        }
        // Pictures still queued go back to the pool.
        for capture in queue.drain() { release(capture) }
    }
}
