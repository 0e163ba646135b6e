import CALSA
import Foundation
import Platform

/// A microphone read through ALSA (`hw:1,0`, `default`, `pulse`, …): 16-bit mono at 48 kHz, blocking reads of
/// 10 ms periods on its own thread. Each buffer's first sample is stamped on CLOCK_MONOTONIC as the read returns,
/// less the frames still waiting in the device and the buffer's own length, then seen through the node's local
/// clock like every other timestamp. The only Swift file that calls ALSA.
// @unchecked: the queue is under `available`; the PCM handle belongs to the reader thread once started.
public final class ALSAMicrophone: AudioSource, @unchecked Sendable {
    public let device: String
    public let sampleRate: Int
    public var channels: Int { 1 }
    private let framesPerRead: Int
    private let localClock: @Sendable (Int64) -> Int64
    private let available = NSCondition()
    private var queue: [AudioRead] = []
    private var running = false
    private var pcm: OpaquePointer?
    /// Overruns (sound lost because nobody read in time), for the log.
    public private(set) var overruns = 0

    public init(device: String, sampleRate: Int = 48_000, framesPerRead: Int = 480,
                localClock: @escaping @Sendable (Int64) -> Int64) {
        self.device = device
        self.sampleRate = sampleRate
        self.framesPerRead = framesPerRead
        self.localClock = localClock
    }

    public func start() throws {
        available.lock()
        defer { available.unlock() }
        guard !running else { return }
        var handle: OpaquePointer?
        var why = [CChar](repeating: 0, count: 512)
        let r = calsa_open_capture(device, UInt32(sampleRate), 1, UInt(framesPerRead), &handle, &why, why.count)
        guard r >= 0, let handle else { throw CameraSourceError(String(cString: why)) }
        pcm = handle
        running = true
        // The handle passes to the reader thread, which alone uses it from here on.
        let t = Thread { [self] in if let pcm = takeHandle() { read(pcm) } }
        t.name = "alsa-mic"
        t.start()
    }

    public func stop() {
        available.lock()
        running = false
        available.broadcast()
        available.unlock()
    }

    public func next(timeoutMicroseconds: Int64) -> AudioRead {
        available.lock()
        defer { available.unlock() }
        let deadline = Date(timeIntervalSinceNow: Double(timeoutMicroseconds) / 1e6)
        while queue.isEmpty {
            if !running { return .ended("ALSA device \(device) was stopped") }
            if !available.wait(until: deadline) { return .timeout }
        }
        return queue.removeFirst()
    }

    private func read(_ pcm: OpaquePointer) {
        defer { snd_pcm_close(pcm) }
        var samples = [Int16](repeating: 0, count: framesPerRead)
        var frame: Int64 = 0
        var firstStamp: Double?
        while true {
            available.lock()
            let go = running
            available.unlock()
            if !go { return }
            var delay = 0
            var now: Int64 = 0
            let n = samples.withUnsafeMutableBufferPointer { calsa_read(pcm, $0.baseAddress, UInt(framesPerRead), &delay, &now) }
            if n < 0 {
                let code = Int32(n)
                if code == -calsa_EPIPE || code == -calsa_ESTRPIPE {
                    // Overrun: sound was lost. Recover and let the next buffer's stamp say how much.
                    overruns += 1
                    if snd_pcm_recover(pcm, code, 1) >= 0 {
                        _ = snd_pcm_start(pcm)
                        firstStamp = nil
                        continue
                    }
                }
                if code == -calsa_EAGAIN { continue }
                finish(.ended("ALSA device \(device) stopped delivering sound: \(String(cString: calsa_strerror(code)))"))
                return
            }
            if n == 0 { continue }
            // The first sample of this buffer was captured (delay + n) frames before now.
            let stamp = Double(now) - Double(delay + n) * 1e6 / Double(sampleRate)
            if firstStamp == nil {
                // After a start or an overrun: number frames by time, so a gap keeps later sound on its frames.
                if let origin = originStamp {
                    frame = Int64(((stamp - origin) * Double(sampleRate) / 1e6).rounded())
                } else {
                    originStamp = stamp
                }
                firstStamp = stamp
            }
            let buffer = AudioBuffer(samples: Array(samples[0..<n]), localTimestamp: localClock(Int64(stamp.rounded())),
                                     firstFrame: frame)
            frame += Int64(n)
            available.lock()
            if queue.count > 2 * sampleRate / framesPerRead { queue.removeFirst() }
            queue.append(.buffer(buffer))
            available.broadcast()
            available.unlock()
        }
    }

    private func takeHandle() -> OpaquePointer? {
        available.lock()
        defer { available.unlock() }
        defer { pcm = nil }
        return pcm
    }

    /// The stamp of the very first buffer: frame 0.
    private var originStamp: Double?

    private func finish(_ read: AudioRead) {
        available.lock()
        queue.append(read)
        running = false
        available.broadcast()
        available.unlock()
    }
}
