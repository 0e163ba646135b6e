import CoordCore
import CV4L2
import Foundation
import Pixels
import Platform
import V4L2

#if canImport(Glibc)
import Glibc
#endif

/// A V4L2 capture device (a UVC webcam, a CSI camera) as a camera source: opened, set to the take's format and
/// frame interval, its exposure, white balance and focus locked, streamed with mmap buffers.
///
/// Each buffer becomes a `Capture`: MJPEG bytes as they are (passthrough) or the raw picture converted to yuv420p.
/// A sequence gap means the driver dropped frames (the recorder fills their groups as dups); a buffer the driver
/// flags as damaged is dropped here; a device that vanishes (ENODEV: unplugged) ends the camera with a sentence.
///
/// Timing. The buffer timestamp is CLOCK_MONOTONIC; what it marks is the driver's `TSTAMP_SRC`: start of exposure
/// (uvcvideo) gives the centre as `t + exposure/2`; end of frame gives `t − readout − exposure/2` with the
/// readout ASSUMED to be half a frame interval. No driver reports its sensor's readout; it lies between 0 and one
/// frame interval, and the midpoint halves the worst case: an EOF camera's centres may be off by up to half an
/// interval, the same for every frame, so its grid lock is offset but not noisy (SOE drivers have no such
/// error). A camera cannot
/// be steered once streaming, so `start` waits for the instant that puts its first frame's centre on the grid
/// (assuming exposure starts at STREAMON), `settlePhase` restarts it once or twice to take out the start-up
/// latency its first frame shows, and the phase it really runs at is measured from then on. A driver that takes
/// VIDIOC_S_PARM while streaming (vivid; uvcvideo answers EBUSY) can be re-phased: `rePhase` runs one frame at
/// another offered interval, which moves every later frame by the difference (`RePhasingCamera`).
// @unchecked: the device is driven by the recorder's thread only; the buffer pool and stop state are under `lock`.
public final class V4L2Camera: CameraSource, ControllableCamera, RePhasingCamera, @unchecked Sendable {
    /// White balance every camera of a rig is locked to (K), so their colours match.
    public static let whiteBalanceKelvin: Int32 = 5000
    /// Buffers queued to the driver: enough for a recorder thread that is late by a few frames.
    public static let bufferCount: UInt32 = 6

    /// The device node, e.g. "/dev/video0".
    public let path: String
    /// The format, size and frame interval the device runs (the interval as the driver settled it).
    public let choice: V4L2FormatChoice
    /// The exposure in force (µs): the locked value, or half the frame interval when the camera would not lock it;
    /// the operator's controls change it (frame centres are computed with the value in force).
    public var exposureMicroseconds: Double { lock.holding { exposureInForce } }
    private var exposureInForce: Double
    /// What the device's exposure, gain, white balance and focus controls accept (queried once at open).
    public let controlRanges: ControlRanges
    private let focusRange: ClosedRange<Int32>?
    /// Sentences about controls the camera lacks or refused (exposure, white balance, focus not locked).
    public let controlNotes: [String]
    /// Buffers the driver flagged as damaged and this source dropped.
    public private(set) var damagedBuffers = 0

    private let device: V4L2Device
    let localClock: @Sendable (Int64) -> Int64
    /// Which stamp the frame centres come from and how far it is trusted (`BufferStampChoice`, V4L2Stamps.swift).
    public let bufferStamp: BufferStampChoice
    private let bytesPerLine: Int
    private let lock = NSLock()
    private var pool: [PlanarFrame] = []
    private var stopped = false
    /// Set when the device failed while a frame was being handed back; the next call reports the end.
    private var endReason: String?
    /// The intervals the device offers at the chosen format and size (discrete lists only).
    private var offeredIntervals: [V4L2FrameInterval] = []
    /// Set by `rePhase`: the next frame dequeued puts the nominal interval back.
    private var restoreIntervalAfterNextFrame = false
    public private(set) var rePhaseVerdict: RePhaseVerdict?

    /// Opens `path` through `driver` and configures it for `width`×`height`, one frame every
    /// `periodMicroseconds`, recorded with `codec`. `localClock` maps CLOCK_MONOTONIC (µs) to the node's clock.
    /// Throws one sentence (naming the device) when the camera cannot do it.
    /// The device as VIDIOC_QUERYCAP names it.
    public private(set) var identity = DeviceIdentity(driver: "v4l2")
    public init(path: String, driver: V4L2Driver, width: Int, height: Int, periodMicroseconds: Double, codec: VideoCodec,
                localClock: @escaping @Sendable (Int64) -> Int64) throws {
        self.path = path
        self.localClock = localClock
        let device: V4L2Device
        do {
            device = try V4L2Device(path: path, driver: driver)
        } catch {
            throw CameraSourceError(Self.openProblem(path: path, error: error))
        }
        self.device = device
        do {
            let caps = try device.capabilities()
            if let problem = Self.captureProblem(path: path, caps) { throw CameraSourceError(problem) }
            identity = DeviceIdentity(driver: caps.driver, card: caps.card, busInfo: caps.busInfo)
            bufferStamp = Self.chooseStamp(driver: caps.driver, periodMicroseconds: periodMicroseconds)
            identity.timestamp = bufferStamp
            let formats = try device.formats()
            let choice = try V4L2FormatChoice.choose(from: formats, width: width, height: height, periodMicroseconds: periodMicroseconds,
                                                     codec: codec, device: path).get()
            let set = try device.setFormat(width: UInt32(width), height: UInt32(height), pixelFormat: choice.pixelFormat)
            guard Int(set.width) == width, Int(set.height) == height, set.pixelFormat == choice.pixelFormat else {
                throw CameraSourceError("\(Echo.short(path)) was asked for \(choice.fourcc) \(width)x\(height) but set \(V4L2Device.fourcc(set.pixelFormat)) \(set.width)x\(set.height)")
            }
            bytesPerLine = Int(set.bytesPerLine)
            let size = formats.first { $0.pixelFormat == choice.pixelFormat }?.sizes
                .first { Int($0.width) == width && Int($0.height) == height }
            offeredIntervals = size?.intervalKind == .discrete ? size?.intervals ?? [] : []
            let kept = try device.setFrameInterval(choice.interval)
            let keptPeriod = kept.periodUs ?? 0
            guard abs(keptPeriod - periodMicroseconds) <= periodMicroseconds * V4L2FormatChoice.intervalTolerance else {
                throw CameraSourceError("\(Echo.short(path)) was asked for \(V4L2FormatChoice.fpsText(periodMicroseconds)) fps but runs at \(keptPeriod > 0 ? V4L2FormatChoice.fpsText(keptPeriod) : "an unknown rate") fps")
            }
            var settled = choice
            settled.interval = kept
            self.choice = settled
            // Exposure half the frame interval, as the synthetic cameras run; focus held where autofocus left it.
            let focus = try device.control(.focusAbsolute)?.value
            let notes = try device.lockControls(exposure100us: Int32(max(1, (periodMicroseconds / 2 / 100).rounded(.down))),
                                                whiteBalanceKelvin: Self.whiteBalanceKelvin, focus: focus)
            controlNotes = notes
            let exposureLocked = !notes.contains { $0.contains(V4L2Control.exposureAuto.name) }
            if exposureLocked, let exposure = try device.control(.exposureAbsolute) {
                exposureInForce = Double(exposure.value) * 100
            } else {
                exposureInForce = keptPeriod / 2
            }
            (controlRanges, focusRange) = try Self.controlRanges(of: device)
        } catch let error as CameraSourceError {
            device.close()
            throw error
        } catch {
            device.close()
            throw CameraSourceError(Self.sentence(error))
        }
    }

    deinit { stop() }

    // MARK: Controls

    /// What a device's controls accept, in the rig's units (VIDIOC_QUERYCTRL), and its raw focus range.
    static func controlRanges(of device: V4L2Device) throws -> (ControlRanges, ClosedRange<Int32>?) {
        let exposure = try device.control(.exposureAbsolute), gain = try device.control(.gain)
        let balance = try device.control(.whiteBalanceTemperature), focusControl = try device.control(.focusAbsolute)
        let ranges = ControlRanges(
            exposureMicroseconds: exposure.map { Int($0.min) * 100...Int(max($0.min, $0.max)) * 100 },
            gainDecibels: gain.map { Double($0.min)...Double(max($0.min, $0.max)) },
            whiteBalanceKelvin: balance.map { Int($0.min)...Int(max($0.min, $0.max)) },
            focus: focusControl == nil ? nil : 0...1)
        return (ranges, focusControl.map { $0.min...max($0.min, $0.max) })
    }

    public var isStreaming: Bool { lock.holding { !stopped } }

    /// Sets the operator's controls through VIDIOC_S_CTRL (auto modes off first, as `lockControls` does): exposure
    /// in the device's 100 µs units, gain in its own raw units (V4L2 gives gain no unit), white balance in K, focus
    /// 0…1 over the device's focus range. Returns the values the device kept.
    public func apply(_ controls: CameraControls) throws -> CameraControls {
        if let problem = controlRanges.problem(with: controls, camera: path) { throw CameraSourceError(problem) }
        do {
            if let us = controls.exposureMicroseconds {
                _ = try device.setControl(.exposureAuto, CV4L2_EXPOSURE_MANUAL)
                let kept = try device.setControl(.exposureAbsolute, Int32(clamping: us / 100))
                lock.holding { exposureInForce = Double(kept) * 100 }
            }
            if let gain = controls.gainDecibels { _ = try device.setControl(.gain, Int32(gain.rounded())) }
            if let k = controls.whiteBalanceKelvin {
                _ = try device.setControl(.whiteBalanceAuto, 0)
                _ = try device.setControl(.whiteBalanceTemperature, Int32(clamping: k))
            }
            if let focus = controls.focus, let range = focusRange {
                _ = try device.setControl(.focusAuto, 0)
                _ = try device.setControl(.focusAbsolute, range.lowerBound + Int32((Double(range.upperBound - range.lowerBound) * focus).rounded()))
            }
            return CameraControls(
                exposureMicroseconds: try device.control(.exposureAbsolute).map { Int($0.value) * 100 },
                gainDecibels: try device.control(.gain).map { Double($0.value) },
                whiteBalanceKelvin: try device.control(.whiteBalanceTemperature).map { Int($0.value) },
                focus: try device.control(.focusAbsolute).flatMap { value in
                    focusRange.map { $0.upperBound > $0.lowerBound ? Double(value.value - $0.lowerBound) / Double($0.upperBound - $0.lowerBound) : 0 }
                })
        } catch let error as CameraSourceError {
            throw error
        } catch {
            throw CameraSourceError("\(Echo.short(path)) refused a control: \(Self.sentence(error))")
        }
    }

    // MARK: CameraSource

    public var minPeriodMicroseconds: Double { choice.periodMicroseconds }
    public var maxPeriodMicroseconds: Double { choice.periodMicroseconds }
    public var canSteerPhase: Bool { false }

    /// The readout assumed for end-of-frame timestamps: half the frame interval (see the type's note).
    public var assumedReadoutMicroseconds: Double { choice.periodMicroseconds / 2 }

    /// What the buffer timestamps mean, as the driver flags them (end of frame when it says nothing else).
    func meaning(of source: V4L2TimestampSource) -> TimestampMeaning {
        // uvcvideo flags SOE either way; without hwtimestamps its stamp is the first packet's, after the exposure.
        if bufferStamp.marks == .endOfExposure { return .endOfFrame(readoutMicroseconds: 0) }
        switch source {
        case .startOfExposure: return .startOfExposure
        case .endOfFrame, .other: return .endOfFrame(readoutMicroseconds: assumedReadoutMicroseconds)
        }
    }

    /// Starts streaming at the instant that puts the first frame's exposure centre on a grid instant (assuming
    /// exposure starts at STREAMON: best effort, the phase really reached is measured afterwards).
    public func start(alignedTo anchor: GridAnchor?) throws {
        do {
            try streamOn(near: anchor, latency: 0)
        } catch {
            throw CameraSourceError(Self.startProblem(error, busInfo: identity.busInfo ?? ""))
        }
        probeRePhase()
    }

    // MARK: Re-phasing (RePhasingCamera)

    public var offeredPeriodsMicroseconds: [Double] { offeredIntervals.compactMap(\.periodUs) }

    /// Asks the streaming device for the interval it already runs: uvcvideo answers EBUSY (nothing changes),
    /// vivid takes it (and restarts its frame timing at its next frame, on the same phase).
    private func probeRePhase() {
        do {
            let kept = try device.setFrameInterval(choice.interval)
            rePhaseVerdict = kept == choice.interval ? .accepted
                : .refused("\(Echo.short(path)) answered VIDIOC_S_PARM while streaming with another interval (\(kept.numerator)/\(kept.denominator))")
        } catch {
            rePhaseVerdict = .refused(Self.sentence(error))
        }
    }

    public func rePhase(throughPeriod periodMicroseconds: Double) -> Bool {
        guard rePhaseVerdict == .accepted, !restoreIntervalAfterNextFrame,
              let interval = offeredIntervals.first(where: { abs(($0.periodUs ?? 0) - periodMicroseconds) < 1 }) else { return false }
        do {
            _ = try device.setFrameInterval(interval)
        } catch {
            return false
        }
        restoreIntervalAfterNextFrame = true
        return true
    }

    /// After the first frame dequeued since `rePhase`, the nominal interval again (the driver applies it at its
    /// next frame, so exactly one frame ran at the other period).
    private func restoreIntervalIfDue() {
        guard restoreIntervalAfterNextFrame else { return }
        restoreIntervalAfterNextFrame = false
        do {
            _ = try device.setFrameInterval(choice.interval)
        } catch {
            endReason = "\(Echo.short(path)) did not take its frame interval back after a re-phase: \(Self.sentence(error))"
        }
    }

    /// The phase the stream settled at (µs from the nearest grid instant, by the first frame's timestamp), once
    /// `settlePhase` has measured it.
    public private(set) var settledPhaseMicroseconds: Double?

    /// A camera's frames begin some unknown time after STREAMON (buffer set-up, the sensor's start-up). The first
    /// frame shows how late: when it is off the grid by more than a twentieth of a period, the stream is
    /// restarted that much earlier, at most twice and within about a second, so a camera whose start-up
    /// latency repeats locks its start phase onto the grid; one whose latency is random at least gets new draws.
    public func settlePhase(on anchor: GridAnchor) {
        let period = anchor.periodMicroseconds
        guard period > 0 else { return }
        let budgetEnd = MonotonicClock.now() + 1_000_000
        var latency = 0.0
        for attempt in 0..<3 {
            guard let centre = firstCentre(timeoutMicroseconds: Int64(3 * period) + 200_000) else { return }
            let nearest = anchor.instantLocal + ((centre - anchor.instantLocal) / period).rounded() * period
            let error = centre - nearest
            settledPhaseMicroseconds = error
            // Another try costs up to a period of waiting and two more until its first frame.
            guard attempt < 2, abs(error) > max(period / 40, 500),
                  MonotonicClock.now() + Int64(3 * period) < budgetEnd else { return }
            latency += error
            do {
                try device.stopStreaming()
                try streamOn(near: anchor, latency: latency)
            } catch {
                endReason = Self.sentence(error)
                return
            }
        }
    }

    /// Waits for the instant `latency` before the one that puts a frame's centre on the grid, then sets up the
    /// buffers and STREAMON.
    private func streamOn(near anchor: GridAnchor?, latency: Double) throws {
        guard let anchor else { return try device.startStreaming(bufferCount: Self.bufferCount) }
        // The camera free-runs from STREAMON on: a late wake-up here shifts its phase for the whole take, so the
        // wait and the STREAMON run at real-time priority (a loaded node would otherwise wake this thread late).
        try ThreadPriority.withRealtime {
            let host = MonotonicClock.now()
            let local = Double(localClock(host))
            let lead = exposureMicroseconds / 2 + latency
            // 2 ms to wake up and reach STREAMON.
            let instant = anchor.nextInstant(atOrAfter: local + lead + 2_000)
            MonotonicClock.sleep(until: host + Int64((instant - lead - local).rounded()))
            try device.startStreaming(bufferCount: Self.bufferCount)
        }
    }

    /// The stamped centre (local µs) of the first good frame, handed straight back to the driver; nil on timeout
    /// or when the device failed (then the next `next` says why).
    private func firstCentre(timeoutMicroseconds: Int64) -> Double? {
        let deadline = MonotonicClock.now() + timeoutMicroseconds
        while MonotonicClock.now() < deadline {
            let left = deadline - MonotonicClock.now()
            do {
                guard let frame = try device.dequeueFrame(timeoutMs: Int32(clamping: (left + 999) / 1000)) else { continue }
                try device.requeue(frame)
                if frame.hasError { continue }
                let stamp = stamped(frame)
                return stamp.meaning.center(timestamp: Double(stamp.local), exposureMicroseconds: exposureMicroseconds)
            } catch {
                endReason = Self.sentence(error)
                return nil
            }
        }
        return nil
    }

    public func stop() {
        lock.lock()
        guard !stopped else { lock.unlock(); return }
        stopped = true
        lock.unlock()
        device.close()
    }

    public func next(timeoutMicroseconds: Int64) -> CaptureResult {
        if let endReason { return .ended(endReason) }
        let deadline = MonotonicClock.now() + max(0, timeoutMicroseconds)
        while true {
            let left = deadline - MonotonicClock.now()
            guard left > 0 else { return .none }
            let frame: V4L2Frame
            do {
                guard let f = try device.dequeueFrame(timeoutMs: Int32(clamping: (left + 999) / 1000)) else { return .none }
                frame = f
            } catch {
                lock.lock(); let wasStopped = stopped; lock.unlock()
                if wasStopped { return .none }
                endReason = Self.sentence(error)
                return .ended(endReason!)
            }
            let capture = capture(from: frame)
            do {
                try device.requeue(frame)
            } catch {
                endReason = Self.sentence(error)
            }
            restoreIntervalIfDue()
            if let capture { return .frame(capture) }
            if let endReason { return .ended(endReason) }
        }
    }

    public func release(_ capture: Capture) {
        guard case .picture(let picture) = capture.payload else { return }
        lock.lock()
        pool.append(picture)
        lock.unlock()
    }

    /// A V4L2 camera runs its frame interval; it takes no per-frame duration.
    public func requestNextFramePeriod(_ microseconds: Double) -> Bool { false }

    // MARK: Buffers

    /// The buffer as a capture, or nil when it must be dropped (damaged, or too short for its format).
    private func capture(from frame: V4L2Frame) -> Capture? {
        if frame.hasError {
            damagedBuffers += 1
            return nil
        }
        let payload: CapturePayload
        if choice.passthrough {
            guard frame.bytes.count > 0 else { damagedBuffers += 1; return nil }
            payload = .jpeg(Array(frame.bytes))
        } else {
            lock.lock()
            let picture = pool.popLast() ?? PlanarFrame(width: choice.width, height: choice.height)
            lock.unlock()
            guard let layout = choice.layout,
                  PixelConversion.convert(frame.bytes, layout: layout, bytesPerLine: bytesPerLine, into: picture) else {
                lock.lock(); pool.append(picture); lock.unlock()
                damagedBuffers += 1
                return nil
            }
            payload = .picture(picture)
        }
        // A timestamp on another clock is useless: the time the buffer reached us stands in for its end of frame.
        let stamp = stamped(frame)
        return Capture(payload: payload, sequence: frame.sequence, timestampLocal: stamp.local, timestampMeaning: stamp.meaning,
                       exposureMicroseconds: Int64(exposureMicroseconds.rounded()), durationMicroseconds: choice.periodMicroseconds)
    }

    // MARK: Sentences

    /// One sentence for a failed V4L2 call (without a trailing period).
    /// The device path, as given on the command line or in the node file, cut short and its control characters
    /// escaped (`Echo.short`).
    static func sentence(_ error: Error) -> String {
        var text = "\(error)"
        if let error = error as? V4L2Error, !error.device.isEmpty, Echo.short(error.device) != error.device {
            text = text.replacingOccurrences(of: error.device, with: Echo.short(error.device))
        }
        while text.hasSuffix(".") { text.removeLast() }
        return text
    }

    /// Why a device node cannot be opened, in the operator's words (no trailing period).
    public static func openProblem(path: String, error: Error) -> String {
        guard let error = error as? V4L2Error else { return sentence(error) }
        let path = Echo.short(path)
        switch error.errno {
        case ENOENT: return "\(path) does not exist (is the camera plugged in?)"
        case EACCES, EPERM: return "\(path) cannot be opened: permission denied (is this user in the video group?)"
        case EBUSY: return "\(path) is busy (another program is using the camera)"
        default: return sentence(error)
        }
    }

    /// Why a node that opened is not a camera coord can record from, or nil. The card name is the device's own.
    public static func captureProblem(path: String, _ caps: V4L2Capabilities) -> String? {
        let path = Echo.short(path)
        if !caps.isVideoCapture {
            let card = Echo.short(caps.card.isEmpty ? caps.driver : caps.card)
            return "\(path)\(card.isEmpty ? "" : " (\(card))") is not a video capture node (a UVC webcam's second node carries only metadata)"
        }
        if !caps.canStream { return "\(path) does not support streaming I/O" }
        return nil
    }
}

/// What a V4L2 device node is, as `coord-node --list-cameras` shows it and the node declares it in its handshake.
public struct V4L2CameraDescription: Sendable {
    /// The device node it was read from.
    public var path: String
    /// What VIDIOC_QUERYCAP said: driver, card, bus, capture and streaming.
    public var capabilities: V4L2Capabilities
    /// Every pixel format with its sizes and intervals, as enumerated.
    public var formats: [V4L2Format]
    /// What its exposure, gain, white balance and focus controls accept.
    public var controlRanges = ControlRanges.none

    /// Opens `path`, reads its capabilities and formats, closes it. Throws one sentence naming the device when it
    /// is missing, cannot be opened or is not a capture node.
    public static func probe(path: String, driver: V4L2Driver) throws -> V4L2CameraDescription {
        let device: V4L2Device
        do {
            device = try V4L2Device(path: path, driver: driver)
        } catch {
            throw CameraSourceError(V4L2Camera.openProblem(path: path, error: error))
        }
        defer { device.close() }
        do {
            let caps = try device.capabilities()
            if let problem = V4L2Camera.captureProblem(path: path, caps) { throw CameraSourceError(problem) }
            var description = V4L2CameraDescription(path: path, capabilities: caps, formats: try device.formats())
            description.controlRanges = try V4L2Camera.controlRanges(of: device).0
            return description
        } catch let error as CameraSourceError {
            throw error
        } catch {
            throw CameraSourceError(V4L2Camera.sentence(error))
        }
    }

    /// The block `--list-cameras` prints for this device; `bus` is what sysfs says of its USB bus, if anything.
    public func lines(bus: String?) -> [String] {
        var out = [path, "  driver: \(capabilities.driver)", "  card: \(capabilities.card)"]
        out.append("  bus: \(capabilities.busInfo.isEmpty ? "unknown" : capabilities.busInfo)\(bus.map { " (\($0))" } ?? "")")
        out.append("  formats:")
        if formats.isEmpty { out.append("    none") }
        for format in formats {
            let usable = V4L2FormatChoice.jpegFourccs.contains(format.fourcc) || RawPixelLayout(rawValue: format.fourcc) != nil
            var head = "    \(format.fourcc) (\(format.description)\(format.isEmulated ? ", converted by libv4l2" : ""))"
            if !usable { head += " — not recordable by coord" }
            out.append(head + ":")
            if format.sizeKind != .discrete, let low = format.sizes.first, let high = format.sizes.last {
                out.append("      \(low.width)x\(low.height) to \(high.width)x\(high.height) (\(format.sizeKind.rawValue)) @ \(V4L2FormatChoice.ratesText(high)) fps at the largest")
                continue
            }
            for size in format.sizes {
                out.append("      \(size.width)x\(size.height) @ \(V4L2FormatChoice.ratesText(size)) fps")
            }
        }
        return out
    }
}
