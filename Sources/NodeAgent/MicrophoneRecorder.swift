import CoordCore
import Foundation
import Logging
import Capture
import LibAV
import Platform
import Synchronization

/// Records one microphone of a take into `<node>/<mic>.mka`: maps every buffer's capture time onto the rig
/// timebase through the node's clock mapping, measures the device's rate against the rig clock, and writes the
/// sound retimed onto the rig's sample grid from the start group's instant to the stop group's, so the file starts
/// and ends on the same instants as the pictures (CONTRACT §9). Runs on its own thread. A microphone that goes
/// away ends its file where it is, with an event; the cameras go on.
final class MicrophoneRecorder: Sendable {
    struct Progress: Sendable {
        var frames: Int64 = 0
        var finished = false
        var error: String?
        var rateErrorPPM: Double = 0
        var offsetP50: Double = 0
        var offsetP99: Double = 0
        var startMicroseconds: Int64 = 0
        /// Peak level since about a second ago, dBFS (−100 for silence): the console's meter.
        var levelDBFS: Double = -100
        var bytesWritten: UInt64 = 0
    }

    let mic: String
    let node: String
    let url: URL
    private let source: AudioSource
    /// The manifest's `audio[].device`: the ALSA card's name, or "synthetic".
    var deviceName: String { source.deviceName }
    /// The file's writer, made at init (so a file that cannot be made refuses the take) and taken once by the
    /// recorder's thread, or by a failed arm to close it.
    private let writerHandOff: Mutex<MatroskaAudioWriter?>
    private let grid: FrameGrid
    private let clock: ClockMappingBox
    private let logger: Logger
    private let onFinish: @Sendable () -> Void
    private let onEvent: @Sendable (TakeEvent.Kind, String) -> Void

    /// What the node asks and what the recorder's thread reports, between the two.
    private struct Shared {
        var progress = Progress()
        var requestedStart: (start: Int64, stop: Int64?)?
        var requestedStop: Int64?
        var abandon = false
    }
    private let shared = Mutex(Shared())
    private let running = DispatchGroup()

    init(mic: String, node: String, directory: URL, source: AudioSource, grid: FrameGrid, clock: ClockMappingBox,
         metadata: [String: String], logger: Logger, onFinish: @escaping @Sendable () -> Void,
         onEvent: @escaping @Sendable (TakeEvent.Kind, String) -> Void) throws(NodeFailure) {
        self.mic = mic
        self.node = node
        self.source = source
        self.grid = grid
        self.clock = clock
        self.logger = logger
        self.onFinish = onFinish
        self.onEvent = onEvent
        url = directory.appendingPathComponent("\(mic).mka")
        guard source.channels == 1 else {
            throw NodeFailure(.badConfig, "microphone \(node)/\(mic) has \(source.channels) channels; coord records mono microphones.")
        }
        do {
            writerHandOff = Mutex(try MatroskaAudioWriter(path: url.path, sampleRate: source.sampleRate, channels: 1, metadata: metadata))
        } catch {
            throw NodeFailure(.io, "microphone \(node)/\(mic): \(error)")
        }
    }

    var snapshot: Progress { shared.withLock { $0.progress } }
    var sampleRate: Int { source.sampleRate }

    /// Starts capturing (sound before the start group is used only to measure the device's clock).
    func arm() throws(NodeFailure) {
        do {
            try source.start()
        } catch {
            try? writerHandOff.withLock({ $0.take() })?.finish()
            try? FileManager.default.removeItem(at: url)
            throw NodeFailure(.io, "microphone \(node)/\(mic) cannot start: \(error)")
        }
        running.enter()
        let thread = Thread { [self] in
            if let writer = writerHandOff.withLock({ $0.take() }) { run(writer) }
            running.leave()
        }
        thread.name = "mic-\(mic)"
        thread.start()
    }

    func start(group: Int64, stop: Int64?) { shared.withLock { $0.requestedStart = (group, stop) } }
    func stop(at group: Int64) { shared.withLock { $0.requestedStop = group } }

    /// Ends without keeping anything (an abort before the start).
    func abandonRecording() {
        shared.withLock { $0.abandon = true }
        source.stop()
    }

    func waitUntilFinished(deadline: DispatchTime) -> Bool { running.wait(timeout: deadline) == .success }

    private func run(_ writer: MatroskaAudioWriter) {
        var retimer: AudioRetimer?
        var earlyBuffers: [(AudioBuffer, Double)] = []
        var stopInstant: Int64?
        var lastSound = MonotonicClock.now()
        var meter = MeterPeak()
        var figuresAt: Int64 = 0
        var endReason: String?
        loop: while true {
            let (start, stopGroup, abandoned) = shared.withLock { ($0.requestedStart, $0.requestedStop, $0.abandon) }
            if abandoned { break }
            if let stopGroup { stopInstant = grid.instant(ofGroup: stopGroup) }
            if retimer == nil, let start {
                var r = AudioRetimer(rate: source.sampleRate, startMicroseconds: grid.instant(ofGroup: start.start))
                // The buffers heard since arm: they fix the device's clock before the first output sample.
                for (b, t) in earlyBuffers { r.add(samples: b.samples, firstFrame: b.firstFrame, rigTime: t) }
                earlyBuffers = []
                retimer = r
                if let s = start.stop { stopInstant = grid.instant(ofGroup: s) }
                shared.withLock { $0.progress.startMicroseconds = r.startMicroseconds }
            }
            switch source.next(timeoutMicroseconds: 100_000) {
            case .buffer(let b):
                lastSound = MonotonicClock.now()
                let rig = clock.current.rig(fromLocal: Double(b.localTimestamp))
                let level = b.peakDBFS
                if var r = retimer {
                    let before = r.restarts
                    r.add(samples: b.samples, firstFrame: b.firstFrame, rigTime: rig)
                    if r.restarts != before {
                        logger.notice("microphone timing moved; its clock fit started over", metadata: [
                            "mic": "\(mic)", "frame": "\(b.firstFrame)", "restarts": "\(r.restarts)"])
                    }
                    retimer = r
                } else {
                    // Before the start: keep the last few seconds only.
                    earlyBuffers.append((b, rig))
                    if earlyBuffers.count > 1000 { earlyBuffers.removeFirst(earlyBuffers.count - 1000) }
                }
                meter.add(level, now: lastSound)
                shared.withLock { $0.progress.levelDBFS = meter.level }
            case .timeout:
                if MonotonicClock.now() - lastSound > 3_000_000 { endReason = "no sound arrived for 3 s" }
            case .ended(let why):
                endReason = why
            }
            guard var r = retimer else {
                if endReason != nil { break loop }
                continue
            }
            // Sound up to the device's newest sample (the retimer waits for it), never past the stop instant.
            let until = Double(stopInstant ?? .max)
            let limit: Int64 = stopInstant.map { Int64((Double($0 - r.startMicroseconds) * Double(r.rate) / 1e6).rounded()) } ?? .max
            let out = r.produce(until: until, limit: limit)
            retimer = r
            if !out.isEmpty {
                do {
                    try writer.write(out)
                    if writer.isShortOfSpace {
                        endReason = "the staging disk of node \(node) is full (No space left on device)"
                    }
                } catch {
                    endReason = "writing \(url.lastPathComponent) failed: \(error)"
                }
            }
            let finishing = r.produced >= limit || endReason != nil
            // The percentiles sort every offset so far: once a second, and at the end.
            let figures = finishing || MonotonicClock.now() - figuresAt > 1_000_000 ? r.offsetPercentiles : nil
            if figures != nil { figuresAt = MonotonicClock.now() }
            shared.withLock {
                $0.progress.frames = r.produced
                $0.progress.rateErrorPPM = r.fit.rateErrorPPM
                if let figures {
                    $0.progress.offsetP50 = figures.p50
                    $0.progress.offsetP99 = figures.p99
                }
            }
            if finishing { break }
        }
        source.stop()
        let abandoned = shared.withLock { $0.abandon }
        do {
            try writer.finish()
        } catch {
            endReason = endReason ?? "closing \(url.lastPathComponent) failed: \(error)"
        }
        // Ended before its first sample (lost before group 0): a Matroska file without a block is one ffprobe cannot
        // read, so the take keeps no file for it and the manifest lists the microphone as lost.
        let recordedNothing = !abandoned && endReason != nil && (retimer?.produced ?? 0) == 0
        if (abandoned && retimer == nil) || recordedNothing {
            try? FileManager.default.removeItem(at: url)
        }
        // Sound the device never delivered was written as silence: said, never hidden.
        if let r = retimer, r.filled > 0, !abandoned {
            let ms = Double(r.filled) * 1000 / Double(r.rate)
            onEvent(.microphoneGap, "microphone \(node)/\(mic): \(String(format: "%.1f", ms)) ms of its file are silence put where the device delivered no sound (an overrun or a late start).")
        }
        let bytes = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? UInt64) ?? 0
        if let endReason, !abandoned {
            let frames = shared.withLock { $0.progress.frames }
            let detail = recordedNothing
                ? "microphone \(node)/\(mic) ended before group 0 (before its first sample of the take): \(endReason); it recorded no sound, so the take holds no file for it, and the cameras go on."
                : "microphone \(node)/\(mic) ended after \(frames) samples: \(endReason); its file ends there and the cameras go on."
            logger.warning("microphone ended", metadata: ["mic": "\(mic)", "why": "\(endReason)"])
            onEvent(.microphoneEnded, detail)
            shared.withLock { $0.progress.error = endReason }
        }
        shared.withLock {
            $0.progress.finished = true
            $0.progress.bytesWritten = bytes
        }
        onFinish()
    }
}
