import CALSA
import CoordCore
import Foundation
import Platform
import Synchronization

/// A microphone read through ALSA (`hw:1,0`, `default`, `pulse`, …): 16-bit mono at 48 kHz, blocking reads of
/// 10 ms periods on its own thread. Each buffer's first sample is stamped on CLOCK_MONOTONIC as the read returns,
/// less the frames still waiting in the device and the buffer's own length, then seen through the node's local
/// clock like every other timestamp. The only Swift file that calls ALSA.
public final class ALSAMicrophone: AudioSource, Sendable {
    public let device: String
    public let sampleRate: Int
    public var channels: Int { 1 }
    /// The sound card's name once started (e.g. "Loopback" for "hw:Loopback,1"); the device as given before, or
    /// when it is no card's (a plugin such as "pulse").
    public var deviceName: String { opened.withLock { $0.cardName } ?? device }
    private let framesPerRead: Int
    private let localClock: @Sendable (Int64) -> Int64
    private let queue: AudioQueue
    /// The handle is here until the reader thread takes it, then that thread's alone.
    private let opened = Mutex<Opened>(Opened())

    private struct Opened {
        /// The PCM handle as its address: the pointer passes between threads by value, and only the thread that
        /// takes it uses it.
        var pcm: Int = 0
        var cardName: String?
    }

    public init(device: String, sampleRate: Int = 48_000, framesPerRead: Int = 480,
                localClock: @escaping @Sendable (Int64) -> Int64) {
        self.device = device
        self.sampleRate = sampleRate
        self.framesPerRead = framesPerRead
        self.localClock = localClock
        // At most 2 s of sound queued.
        queue = AudioQueue(capacity: 2 * sampleRate / framesPerRead, stoppedSentence: "ALSA device \(Echo.short(device)) was stopped")
    }

    public func start() throws {
        guard !queue.isRunning else { return }
        var handle: OpaquePointer?
        // Room for the whole device name, so the sentence keeps its reason; the name is then cut short in it.
        var why = [CChar](repeating: 0, count: device.utf8.count + 512)
        let r = calsa_open_capture(device, UInt32(sampleRate), 1, UInt(framesPerRead), &handle, &why, why.count)
        guard r >= 0, let handle else {
            throw CameraSourceError(String(cString: why).replacingOccurrences(of: device, with: Echo.short(device)))
        }
        guard queue.begin() else {
            snd_pcm_close(handle)
            return
        }
        var name = [CChar](repeating: 0, count: 256)
        let card = calsa_card_name(handle, &name, name.count) == 0 ? String(cString: name) : nil
        let address = Int(bitPattern: handle)
        opened.withLock { $0 = Opened(pcm: address, cardName: card) }
        // The handle passes to the reader thread, which alone uses it from here on.
        let t = Thread { [self] in if let pcm = takeHandle() { read(pcm) } }
        t.name = "alsa-mic"
        t.start()
    }

    public func stop() { queue.stop() }

    public func next(timeoutMicroseconds: Int64) -> AudioRead { queue.next(timeoutMicroseconds: timeoutMicroseconds) }

    private func takeHandle() -> OpaquePointer? {
        let address = opened.withLock { opened in
            defer { opened.pcm = 0 }
            return opened.pcm
        }
        return OpaquePointer(bitPattern: address)
    }

    private func read(_ pcm: OpaquePointer) {
        defer { snd_pcm_close(pcm) }
        var samples = [Int16](repeating: 0, count: framesPerRead)
        var frame: Int64 = 0
        /// The stamp of the very first buffer: frame 0.
        var originStamp: Double?
        var renumber = true
        /// Reads that ended in EIO since the last buffer: a stream reset under the read (snd-aloop does this when its
        /// other side restarts) is started again, a device that keeps failing ends.
        var failedRestarts = 0
        while queue.isRunning {
            var delay = 0
            var now: Int64 = 0
            let n = samples.withUnsafeMutableBufferPointer { calsa_read(pcm, $0.baseAddress, UInt(framesPerRead), &delay, &now) }
            if n < 0 {
                let code = Int32(n)
                // Overrun: sound was lost. Recover, and number the next buffer by its stamp: the gap stays a gap (the
                // recorder fills it with silence and says how much).
                if code == -calsa_EPIPE || code == -calsa_ESTRPIPE, snd_pcm_recover(pcm, code, 1) >= 0 {
                    _ = snd_pcm_start(pcm)
                    renumber = true
                    continue
                }
                if code == -calsa_EAGAIN { continue }
                if code == -calsa_EIO, failedRestarts < 3, snd_pcm_drop(pcm) >= 0, snd_pcm_prepare(pcm) >= 0 {
                    failedRestarts += 1
                    _ = snd_pcm_start(pcm)
                    renumber = true
                    continue
                }
                queue.end("ALSA device \(Echo.short(device)) stopped delivering sound: \(String(cString: calsa_strerror(code)))")
                return
            }
            if n == 0 { continue }
            failedRestarts = 0
            // The first sample of this buffer was captured (delay + n) frames before now.
            let stamp = Double(now) - Double(delay + n) * 1e6 / Double(sampleRate)
            if renumber {
                if let origin = originStamp {
                    frame = max(frame, Int64(((stamp - origin) * Double(sampleRate) / 1e6).rounded()))
                } else {
                    originStamp = stamp
                }
                renumber = false
            }
            let buffer = AudioBuffer(samples: Array(samples[0..<n]), localTimestamp: localClock(Int64(stamp.rounded())),
                                     firstFrame: frame)
            frame += Int64(n)
            if !queue.push(buffer) { return }
        }
    }
}
