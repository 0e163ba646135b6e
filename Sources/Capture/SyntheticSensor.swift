import CoordCore
import Foundation
import Pixels
import Platform

/// A synthetic camera that behaves like a free-running sensor (CONTRACT §5): its frame clock runs on the
/// host's real time with its own rate error and a random start phase; the node sees each frame only
/// through its (simulated) local clock and a noisy start-of-exposure buffer timestamp, as from V4L2.
/// Every frame carries the SYNCSTRIPE with the true exposure-centre time, which only tests read.
// @unchecked: shared state is under `lock` or `available`; the grain and counters belong to the sensor thread.
public final class SyntheticSensor: CameraSource, ControllableCamera, @unchecked Sendable {
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
    private let lock = NSLock()
    private var free: [PlanarFrame]
    private var queue: [Capture] = []
    private let available = NSCondition()
    private var running = false
    private var pendingPeriod: Double?
    private var random: SeededRandom
    /// The grain's xorshift64 state (only the sensor thread touches it).
    private var grainState: UInt64
    /// The controls in force (under `lock`): the picture follows exposure and gain (brightness) and white balance
    /// (tint); the frame timing does not change, so sync is unaffected.
    private var controls = CameraControls()
    private var look = TestPattern.Look()
    /// Frames the sensor produced with no free buffer to put them in.
    public private(set) var droppedAtSensor: UInt64 = 0
    public private(set) var produced: UInt64 = 0

    /// `localClock` maps the host's CLOCK_MONOTONIC (µs) to the node's local clock (µs).
    public init(spec: Spec, localClock: @escaping @Sendable (Int64) -> Int64) {
        self.spec = spec
        self.localClock = localClock
        self.free = (0..<spec.bufferCount).map { _ in PlanarFrame(width: spec.width, height: spec.height) }
        self.random = SeededRandom(seed: spec.seed)
        var seeder = SeededRandom(seed: spec.seed ^ 0x6772_6169_6E00_0000)
        self.grainState = seeder.next() | 1
    }

    /// Like a typical sensor: exposure up to the frame period, 0…24 dB of gain, 2500…9000 K, a focus motor.
    public var controlRanges: ControlRanges { Self.controlRanges(periodMicroseconds: spec.nominalPeriodMicroseconds) }

    public static func controlRanges(periodMicroseconds: Double) -> ControlRanges {
        ControlRanges(exposureMicroseconds: 10...max(10, Int(periodMicroseconds)), gainDecibels: 0...24,
                      whiteBalanceKelvin: 2500...9000, focus: 0...1)
    }

    public var isStreaming: Bool {
        lock.lock()
        defer { lock.unlock() }
        return running
    }

    public func apply(_ new: CameraControls) throws -> CameraControls {
        if let problem = controlRanges.problem(with: new, camera: "synthetic") { throw CameraSourceError(problem) }
        lock.lock()
        defer { lock.unlock() }
        controls = controls.updated(with: new)
        let exposure = Double(controls.exposureMicroseconds ?? Int(spec.exposureMicroseconds))
        let gain = pow(10, (controls.gainDecibels ?? 0) / 20)
        look = TestPattern.Look(gain: exposure / spec.exposureMicroseconds * gain,
                                warmth: ((controls.whiteBalanceKelvin ?? 5000) - 5000) / 100)
        return CameraControls(exposureMicroseconds: Int(exposure), gainDecibels: controls.gainDecibels ?? 0,
                              whiteBalanceKelvin: controls.whiteBalanceKelvin ?? 5000, focus: controls.focus ?? 0)
    }

    public var minPeriodMicroseconds: Double { spec.minPeriodMicroseconds }
    public var maxPeriodMicroseconds: Double { spec.maxPeriodMicroseconds }
    /// A synthetic sensor takes a frame-duration change for its next frame, as a real sensor's VBLANK control does.
    public var canSteerPhase: Bool { true }

    /// Starts the free-running frame clock at a random phase; the phase loop steers it onto the grid, so the
    /// anchor is not used.
    public func start(alignedTo anchor: GridAnchor?) {
        start()
    }

    /// Starts the free-running frame clock at a random phase.
    public func start() {
        lock.lock()
        guard !running else { lock.unlock(); return }
        running = true
        lock.unlock()
        let firstStart = Double(MonotonicClock.now()) + Double.random(in: 0..<spec.nominalPeriodMicroseconds, using: &random)
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
        lock.lock()
        running = false
        lock.unlock()
        available.lock()
        available.broadcast()
        available.unlock()
    }

    /// Requests one frame duration for the next frame, as a sensor's frame-duration control does.
    /// Returns false (and changes nothing) outside the declared limits.
    @discardableResult
    public func requestNextFramePeriod(_ microseconds: Double) -> Bool {
        guard microseconds >= spec.minPeriodMicroseconds, microseconds <= spec.maxPeriodMicroseconds else { return false }
        lock.lock()
        pendingPeriod = microseconds
        lock.unlock()
        return true
    }

    /// The next captured frame, waiting at most `timeoutMicroseconds`; `.none` on timeout or after stop.
    public func next(timeoutMicroseconds: Int64) -> CaptureResult {
        available.lock()
        defer { available.unlock() }
        let deadline = Date().addingTimeInterval(Double(timeoutMicroseconds) / 1_000_000)
        while queue.isEmpty {
            if !isRunning { return .none }
            if !available.wait(until: deadline) { return .none }
        }
        return .frame(queue.removeFirst())
    }

    public func release(_ capture: Capture) {
        if case .picture(let picture) = capture.payload { release(picture) }
    }

    /// Gives a picture back to the sensor's buffer pool.
    public func release(_ picture: PlanarFrame) {
        lock.lock()
        free.append(picture)
        lock.unlock()
    }

    private var isRunning: Bool {
        lock.lock()
        defer { lock.unlock() }
        return running
    }

    private func run(firstStart: Double) {
        var start = firstStart
        var counter: UInt32 = 0
        while true {
            let exposure = spec.exposureMicroseconds
            // The frame is readable once its exposure has ended.
            MonotonicClock.sleep(until: Int64((start + exposure).rounded(.up)))
            lock.lock()
            let keepRunning = running
            // A requested duration is counted by the sensor's own (slightly wrong) clock, as a real sensor's is.
            let duration = pendingPeriod ?? spec.nominalPeriodMicroseconds
            let period = duration * (1 + spec.rateErrorPPM * 1e-6)
            pendingPeriod = nil
            let buffer = free.popLast()
            let look = self.look
            lock.unlock()
            guard keepRunning else { break }

            let center = start + exposure / 2
            produced += 1
            if let buffer {
                TestPattern.paint(into: buffer, frameCounter: counter, ordinal: spec.ordinal, look: look)
                if spec.grain > 0 { TestPattern.addGrain(to: buffer, amplitude: spec.grain, state: &grainState) }
                SyncStripe(ordinal: spec.ordinal, frameCounter: counter, trueCenterMicroseconds: Int64(center.rounded()))
                    .paint(into: buffer)
                let noise = random.gaussian(standardDeviation: spec.timestampJitterMicroseconds)
                let stamp = localClock(Int64(start.rounded())) + Int64(noise.rounded())
                let capture = Capture(payload: .picture(buffer), sequence: counter, timestampLocal: stamp,
                                      timestampMeaning: .startOfExposure, exposureMicroseconds: Int64(exposure.rounded()),
                                      durationMicroseconds: duration)
                available.lock()
                queue.append(capture)
                available.signal()
                available.unlock()
            } else {
                droppedAtSensor += 1
            }
            counter &+= 1
            start += period
        }
        // Pictures still queued go back to the pool.
        available.lock()
        let leftover = queue
        queue.removeAll()
        available.unlock()
        for capture in leftover { release(capture) }
    }
}
