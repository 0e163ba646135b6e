import CoordCore
import Foundation
import Synchronization
import Platform

/// One buffer of sound as a capture device delivers it: interleaved 16-bit samples and the node's local time
/// (µs) at which its first sample was captured, as the driver stamps it (with the driver's noise).
public struct AudioBuffer: Sendable {
    public var samples: [Int16]
    /// Node-local capture time of the first sample frame.
    public var localTimestamp: Int64
    /// Sample frames before this buffer since the source started (gaps the device reported count too).
    public var firstFrame: Int64

    /// The buffer's peak level, dBFS (−100 for silence): the console's meter. One loop with no call per sample,
    /// as it runs on every buffer of every microphone.
    public var peakDBFS: Double {
        var peak: UInt16 = 0
        samples.withUnsafeBufferPointer { buffer in
            guard let p = buffer.baseAddress else { return }
            var i = 0
            while i < buffer.count {
                let magnitude = p[i].magnitude
                if magnitude > peak { peak = magnitude }
                i += 1
            }
        }
        return peak == 0 ? -100 : 20 * log10(Double(peak) / 32767)
    }
}

public enum AudioRead: Sendable {
    case buffer(AudioBuffer)
    case timeout
    /// The device is gone for good (unplugged, the sound server ended): one sentence.
    case ended(String)
}

/// A microphone the node records beside its cameras: a synthetic one (SYNCCLICK v1) or an ALSA device.
public protocol AudioSource: AnyObject, Sendable {
    var sampleRate: Int { get }
    var channels: Int { get }
    /// Starts capturing; throws one sentence when the device cannot.
    func start() throws
    /// The next buffer, waiting at most `timeoutMicroseconds`.
    func next(timeoutMicroseconds: Int64) -> AudioRead
    /// Stops capturing and lets go of the device; safe to call repeatedly.
    func stop()
    /// What the microphone is (the manifest's `audio[].device`): the ALSA card's name, or "synthetic".
    var deviceName: String { get }
}

/// The buffers a source's capture thread has made, waiting for the recorder: bounded (a reader that stops reading
/// loses the oldest sound, never grows memory), and the running flag both sides look at. Shared by every source.
// Sendable: the queue and the flag are in `state`; `changed` wakes the one reader when either changes.
final class AudioQueue: Sendable {
    private struct State {
        var queue: [AudioRead] = []
        var running = false
    }
    private let state = Mutex(State())
    /// Signalled on every push, end and stop: a signal given before the reader waits is counted, so none is lost.
    private let changed = DispatchSemaphore(value: 0)
    private let capacity: Int
    private let stoppedSentence: String

    /// `capacity`: buffers kept at most; `stoppedSentence`: what `next` says once the source was stopped.
    init(capacity: Int, stoppedSentence: String) {
        self.capacity = capacity
        self.stoppedSentence = stoppedSentence
    }

    /// Marks the source running; false if it already was.
    func begin() -> Bool {
        state.withLock { s in
            guard !s.running else { return false }
            s.running = true
            return true
        }
    }

    var isRunning: Bool { state.withLock { $0.running } }

    func stop() {
        state.withLock { $0.running = false }
        changed.signal()
    }

    /// Adds a buffer; false once the source was stopped (the capture thread then ends).
    @discardableResult
    func push(_ buffer: AudioBuffer) -> Bool {
        let capacity = self.capacity
        let pushed = state.withLock { s in
            guard s.running else { return false }
            if s.queue.count >= capacity { s.queue.removeFirst() }
            s.queue.append(.buffer(buffer))
            return true
        }
        if pushed { changed.signal() }
        return pushed
    }

    /// The device went away: the reader gets `why` after the buffers before it.
    func end(_ why: String) {
        state.withLock { s in
            s.queue.append(.ended(why))
            s.running = false
        }
        changed.signal()
    }

    /// The oldest buffer; `.ended` once the source stopped and nothing is left; `.timeout` after
    /// `timeoutMicroseconds` without one. One reader at a time.
    func next(timeoutMicroseconds: Int64) -> AudioRead {
        let deadline = DispatchTime.now() + .microseconds(Int(max(0, timeoutMicroseconds)))
        let stoppedSentence = self.stoppedSentence
        while true {
            let read: AudioRead? = state.withLock { s in
                if !s.queue.isEmpty { return s.queue.removeFirst() }
                return s.running ? nil : .ended(stoppedSentence)
            }
            if let read { return read }
            if changed.wait(timeout: deadline) == .timedOut { return .timeout }
        }
    }
}

/// A synthetic microphone carrying SYNCCLICK v1 (CONTRACT §9): mono, near silence except a 1 ms burst of a 4 kHz
/// sine at −6 dBFS beginning at every whole second of the host's CLOCK_MONOTONIC (true time, never read by the
/// node). Its sample clock runs on the host's real time with its own rate error; the node sees each buffer only
/// through its (simulated) local clock and a noisy timestamp, as from ALSA.
// Sendable: only `let`s (the queue guards itself); the generator's state is local to the microphone's thread.
public final class SyntheticMicrophone: AudioSource, Sendable {
    public var deviceName: String { "synthetic" }
    public struct Spec: Sendable {
        public var sampleRate = 48_000
        /// Sample frames per buffer (10 ms at 48 kHz, as a typical ALSA period).
        public var framesPerBuffer = 480
        /// The sample clock's own rate error: it makes rate × (1 + ppm·1e-6) samples a true second.
        public var rateErrorPPM: Double
        /// Standard deviation of each buffer timestamp's noise, µs.
        public var timestampJitterMicroseconds: Double
        public var seed: UInt64
        /// Ends the microphone (as if unplugged) this long after it started; nil: never. For tests of a lost mic.
        public var endsAfterMicroseconds: Int64?

        public init(rateErrorPPM: Double, timestampJitterMicroseconds: Double = 30, seed: UInt64) {
            self.rateErrorPPM = rateErrorPPM
            self.timestampJitterMicroseconds = timestampJitterMicroseconds
            self.seed = seed
        }
    }

    /// The burst: 1 ms of 4 kHz at −6 dBFS (amplitude 0.501 of full scale).
    public static let burstMicroseconds: Double = 1000
    public static let burstHertz: Double = 4000
    public static let burstAmplitude: Double = 0.501 * 32767

    public let spec: Spec
    public var sampleRate: Int { spec.sampleRate }
    public var channels: Int { 1 }
    private let localClock: @Sendable (Int64) -> Int64
    private let queue: AudioQueue

    public init(spec: Spec, localClock: @escaping @Sendable (Int64) -> Int64) {
        self.spec = spec
        self.localClock = localClock
        // At most 2 s of sound queued.
        queue = AudioQueue(capacity: 2 * spec.sampleRate / spec.framesPerBuffer, stoppedSentence: "the synthetic microphone was stopped")
    }

    public func start() throws {
        guard queue.begin() else { return }
        let t = Thread { [self] in generate() }
        t.name = "synthetic-mic"
        t.start()
    }

    public func stop() { queue.stop() }

    public func next(timeoutMicroseconds: Int64) -> AudioRead { queue.next(timeoutMicroseconds: timeoutMicroseconds) }

    /// The true time (host µs, fractional) of sample frame `n`, for a clock started at `start`.
    private func trueTime(_ n: Int64, start: Double) -> Double {
        start + Double(n) * 1e6 / (Double(spec.sampleRate) * (1 + spec.rateErrorPPM * 1e-6))
    }

    /// Fills `samples` with the sound from true time `t0` (µs, fractional), one sample every `step` µs: the burst
    /// within 1 ms after every whole second, else faint noise (about −60 dBFS, from a xorshift). This runs 48 000
    /// times a second per microphone, on every demo node at once, so it is one loop over the buffer with no call
    /// per sample: the time since the second is carried forward by `step`, and only burst samples reach `sin`.
    static func fill(_ samples: inout [Int16], fromTrue t0: Double, step: Double, noise: inout UInt64) {
        var sinceSecond = t0 - (t0 / 1_000_000).rounded(.down) * 1_000_000
        var x = noise
        let burst = burstMicroseconds, amplitude = burstAmplitude, radiansPerMicrosecond = 2 * Double.pi * burstHertz / 1e6
        samples.withUnsafeMutableBufferPointer { buffer in
            guard let out = buffer.baseAddress else { return }
            // A while loop and wrapping shifts: at -Onone a range's iterator and a smart shift are calls per sample.
            var i = 0
            while i < buffer.count {
                x ^= x &<< 13; x ^= x &>> 7; x ^= x &<< 17
                let faint = Int16(truncatingIfNeeded: x % 61) &- 30
                if sinceSecond < burst {
                    let v = (Double(faint) + amplitude * sin(radiansPerMicrosecond * sinceSecond)).rounded()
                    out[i] = Int16(max(-32768, min(32767, v)))
                } else {
                    out[i] = faint
                }
                sinceSecond += step
                if sinceSecond >= 1_000_000 { sinceSecond -= 1_000_000 }
                i += 1
            }
        }
        noise = x
    }

    private func generate() {
        var noise = spec.seed | 1
        var jitter = SeededRandom(seed: spec.seed ^ 0x6D69_6300)
        let start = Double(MonotonicClock.now())
        let frames = spec.framesPerBuffer
        var n: Int64 = 0
        while true {
            // A buffer is delivered once its last sample has been captured, as a driver's period.
            let due = trueTime(n + Int64(frames), start: start)
            let wait = due - Double(MonotonicClock.now())
            if wait > 0 { usleep(UInt32(min(wait, 100_000))) }
            if Double(MonotonicClock.now()) < due { continue }
            var samples = [Int16](repeating: 0, count: frames)
            let t0 = trueTime(n, start: start), step = trueTime(n + 1, start: start) - t0
            Self.fill(&samples, fromTrue: t0, step: step, noise: &noise)
            let stamp = trueTime(n, start: start) + jitter.gaussian(standardDeviation: spec.timestampJitterMicroseconds)
            let buffer = AudioBuffer(samples: samples, localTimestamp: localClock(Int64(stamp.rounded())), firstFrame: n)
            n += Int64(frames)
            if !queue.isRunning { return }
            if let ends = spec.endsAfterMicroseconds, Double(MonotonicClock.now()) - start > Double(ends) {
                queue.end("the microphone stopped delivering sound (simulated unplug)")
                return
            }
            if !queue.push(buffer) { return }
        }
    }
}
