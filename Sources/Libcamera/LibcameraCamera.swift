import CLibcamera
import Capture
import CoordCore
import Foundation
import Pixels
import Platform
import Synchronization

/// A camera driven through libcamera (a Raspberry Pi sensor, or a UVC webcam through libcamera's UVC pipeline):
/// one video stream, each frame's exposure centre from its `SensorTimestamp` and `ExposureTime` metadata, and the
/// phase law's durations sent as per-request `FrameDurationLimits` where the camera honours them (measured when
/// the camera is opened at arm; otherwise it free-runs and the arm warning says so).
///
/// libcamera's thread copies each completed frame's bytes out of the mapped buffer and hands the request straight back
/// (`deliver`): a UVC camera has only the 4 buffers libcamera 0.0.3's UVC pipeline allots, and one the node holds is
/// one uvcvideo cannot fill. The recorder's thread converts the copy into a picture (`next`), so libcamera's thread,
/// which also dequeues the device's next buffer, never waits on a conversion or on the recorder.
// @unchecked: the clc_camera pointer; libcamera's thread calls `deliver`, which touches only `state` and the queue.
public final class LibcameraCamera: CameraSource, ControllableCamera, @unchecked Sendable {
    public let cameraID: String
    public let info: LibcameraCameraInfo
    public let width: Int, height: Int
    public let periodMicroseconds: Double
    /// What the probe at open found; `.ignored` means the camera free-runs.
    public private(set) var honour: FrameDurationProbe.Verdict = .ignored("it was not measured")
    /// Which stamp the centres come from (a UVC camera: uvcvideo's buffer stamp, chosen as for `--v4l2`).
    public let stampChoice: BufferStampChoice?
    public var identity: DeviceIdentity {
        var identity = info.identity
        identity.timestamp = stampChoice
        return identity
    }

    private let handle: OpaquePointer
    private let localClock: @Sendable (Int64) -> Int64
    private let state: Mutex<State>
    private let queue = CaptureQueue<Completed>()

    /// A frame's bytes, copied out of libcamera's buffer plane after plane (reused through `State.raws`).
    final class RawFrame: @unchecked Sendable {  // written by libcamera's thread, then read by the recorder's
        let bytes: UnsafeMutableRawBufferPointer
        init(count: Int) { bytes = .allocate(byteCount: count, alignment: 64) }
        deinit { bytes.deallocate() }
    }

    /// A frame libcamera completed, its bytes copied out and its request already handed back.
    struct Completed: Sendable {
        var raw: RawFrame
        var offsets: [Int]  // each plane's start in `raw`
        var strides: [Int]
        var fourcc: UInt32
        var sequence: UInt32
        var stampMicroseconds: Double
        var exposureMicroseconds: Int32
        var durationMicroseconds: Int64
        var arrival: Int64  // when libcamera's thread noted it (CLOCK_MONOTONIC, µs)
    }

    private struct State {
        var pool: [PlanarFrame]
        var running = false
        /// While probing: the durations to ask after each frame, those asked, and the frames' timestamps (µs).
        var probe: (plan: [Double], asked: [Double], stamps: [Double])?
        var controls = CameraControls()
        var skippedFormat = 0
        var figures = StreamFigures()
        var raws: [RawFrame] = []
    }

    /// What one run of the stream did at each stage (logged when it stops): frames libcamera completed, the longest
    /// wait between two of them (by their arrival on the node), frames the recorder took, and the longest a copied
    /// frame waited for the recorder.
    public struct StreamFigures: Sendable, CustomStringConvertible {
        public var completed = 0, taken = 0, behind = 0
        public var longestGapMicroseconds: Int64 = 0, longestHeldMicroseconds: Int64 = 0
        var lastArrival: Int64?
        public var description: String {
            "\(completed) frames completed by libcamera, \(taken) taken by the recorder, longest wait between two "
                + "\(longestGapMicroseconds / 1000) ms, longest wait for the recorder \(longestHeldMicroseconds / 1000) ms, "
                + "\(behind) let go with the recorder a second behind"
        }
    }

    /// Frames libcamera completed since the camera opened (the probe's included).
    public var completedFrames: UInt64 { clc_camera_completed(handle) }

    /// Opens the camera, configures its stream and measures whether it honours frame durations.
    public init(cameraID: String, width: Int, height: Int, periodMicroseconds: Double,
                localClock: @escaping @Sendable (Int64) -> Int64) throws(CameraSourceError) {
        let manager: LibcameraManager
        switch LibcameraManager.shared {
        case .failure(let error): throw CameraSourceError("\(error)")
        case .success(let m): manager = m
        }
        var why = [CChar](repeating: 0, count: 1024)
        guard let handle = clc_camera_open(manager.handle, cameraID, UInt32(width), UInt32(height), &why, why.count) else {
            throw CameraSourceError(LibcameraManager.sentence(why))
        }
        var w: UInt32 = 0, h: UInt32 = 0, fourcc: UInt32 = 0
        clc_camera_stream(handle, &w, &h, &fourcc)
        guard Int(w) == width, Int(h) == height, fourcc == Self.yuv420 || fourcc == Self.yuyv else {
            clc_camera_close(handle)
            throw CameraSourceError("libcamera camera \(cameraID) gives \(w)x\(h) \(Self.fourccText(fourcc)), not \(width)x\(height) YUV420 or YUYV")
        }
        self.handle = handle
        self.cameraID = cameraID
        info = manager.cameras().first { $0.id == cameraID }
            ?? LibcameraCameraInfo(id: cameraID, model: "", frameDurationLimits: nil, formats: "", controls: [])
        self.width = width; self.height = height
        self.periodMicroseconds = periodMicroseconds
        self.localClock = localClock
        stampChoice = info.pipeline.stampChoice(hwTimestamps: UVCParameters.hwTimestamps(), periodMicroseconds: periodMicroseconds)
        state = Mutex(State(pool: (0..<6).map { _ in PlanarFrame(width: width, height: height) }))
        honour = try measureHonour()
    }

    deinit { clc_camera_close(handle) }

    static let yuv420: UInt32 = 0x3231_5559  // 'YU12'
    static let yuyv: UInt32 = 0x5659_5559  // 'YUYV': packed 4:2:2, converted to 4:2:0 as a V4L2 webcam's is
    static func fourccText(_ f: UInt32) -> String {
        String(decoding: (0..<4).map { UInt8((f >> (8 * $0)) & 0xff) }, as: UTF8.self)
    }

    public var minPeriodMicroseconds: Double { max(Double(info.frameDurationLimits?.lowerBound ?? 0), periodMicroseconds / 2) }
    public var maxPeriodMicroseconds: Double {
        min(Double(info.frameDurationLimits?.upperBound ?? Int64(periodMicroseconds)), periodMicroseconds * 2)
    }
    public var canSteerPhase: Bool { honour.timing != nil }
    public var frameDurationTiming: FrameDurationTiming { honour.timing ?? .immediate }
    public var freeRunReason: String? {
        guard case .ignored(let why) = honour else { return nil }
        return "libcamera camera \(cameraID) (pipeline \(info.pipeline.rawValue)) did not honour FrameDurationLimits when measured at arm: \(why)"
    }

    public var controlRanges: ControlRanges {
        ControlRanges(exposureMicroseconds: info.controls.contains("ExposureTime") ? 10...max(10, Int(periodMicroseconds)) : nil,
                      gainDecibels: info.controls.contains("AnalogueGain") ? 0...24 : nil,
                      whiteBalanceKelvin: info.controls.contains("ColourTemperature") ? 2500...9000 : nil,
                      focus: info.controls.contains("LensPosition") ? 0...1 : nil)
    }

    public var isStreaming: Bool { state.withLock { $0.running } }

    /// Exposure, analogue gain (dB → libcamera's factor), colour temperature and lens position (0…1 → 0…10 dioptres);
    /// auto exposure and white balance stay off.
    public func apply(_ new: CameraControls) throws -> CameraControls {
        if let problem = controlRanges.problem(with: new, camera: cameraID) { throw CameraSourceError(problem) }
        let all = state.withLock { s in
            s.controls = s.controls.updated(with: new)
            return s.controls
        }
        clc_camera_set_controls(handle, Int32(new.exposureMicroseconds ?? -1), Float(new.gainDecibels.map { pow(10, $0 / 20) } ?? -1),
                                -1, -1, Int32(new.whiteBalanceKelvin ?? -1), Float(new.focus.map { $0 * 10 } ?? -1), 0, 0)
        return all
    }

    /// Starts streaming with auto exposure and white balance locked and the frame duration pinned to the period.
    public func start(alignedTo anchor: GridAnchor?) throws {
        let exposure = state.withLock { $0.controls.exposureMicroseconds } ?? Int(periodMicroseconds / 2)
        clc_camera_set_controls(handle, Int32(exposure), -1, -1, -1, -1, -1, 0, 0)
        // Pinned to the take's period either way: a camera that did not follow single frames may still take a rate.
        clc_camera_request_duration(handle, Int64(periodMicroseconds.rounded()))
        state.withLock { $0.running = true; $0.figures = StreamFigures() }
        _ = queue.drain()  // requests held from an earlier run are queued afresh by the start
        var why = [CChar](repeating: 0, count: 512)
        guard clc_camera_start(handle, Self.callback, Unmanaged.passUnretained(self).toOpaque(), &why, why.count) == 0 else {
            state.withLock { $0.running = false }
            throw CameraSourceError(LibcameraManager.sentence(why))
        }
    }

    public func stop() {
        clc_camera_stop(handle)
        let figures = state.withLock { s in
            defer { s.running = false }
            return s.running ? s.figures : nil
        }
        queue.wake()
        // The per-stage counts of issue 37's stall hunt, one line in the node's log (journald) per run.
        if let figures {
            FileHandle.standardError.write(Data("coord-node: libcamera camera \(cameraID) stopped: \(figures)\n".utf8))
        }
    }

    @discardableResult
    public func requestNextFramePeriod(_ microseconds: Double) -> Bool {
        guard canSteerPhase, microseconds >= minPeriodMicroseconds, microseconds <= maxPeriodMicroseconds else { return false }
        clc_camera_request_duration(handle, Int64(microseconds.rounded()))
        return true
    }

    /// On the recorder's thread: the oldest completed frame copied into a picture (converted from YUYV where it is
    /// packed), its bytes' buffer kept for the next, and its centre from the chosen stamp.
    public func next(timeoutMicroseconds: Int64) -> CaptureResult {
        guard let done = queue.next(timeoutMicroseconds: timeoutMicroseconds, streaming: { isStreaming }) else { return .none }
        let picture = state.withLock { $0.pool.popLast() } ?? PlanarFrame(width: width, height: height)
        convert(done, into: picture)
        let held = MonotonicClock.now() - done.arrival
        state.withLock { s in
            s.raws.append(done.raw)
            s.figures.taken += 1
            s.figures.longestHeldMicroseconds = max(s.figures.longestHeldMicroseconds, held)
        }
        let exposure = Double(done.exposureMicroseconds >= 0 ? done.exposureMicroseconds : Int32(periodMicroseconds / 2))
        let centre = info.pipeline.center(sensorTimestampMicroseconds: done.stampMicroseconds, exposureMicroseconds: exposure,
                                          stamp: stampChoice)
        let duration = done.durationMicroseconds > 0 ? Double(done.durationMicroseconds) : periodMicroseconds
        // Passed on as its start of exposure: the centre less half the exposure (the readout not being known).
        return .frame(Capture(payload: .picture(picture), sequence: done.sequence,
                              timestampLocal: localClock(Int64((centre - exposure / 2).rounded())),
                              timestampMeaning: .startOfExposure, exposureMicroseconds: Int64(exposure), durationMicroseconds: duration))
    }

    public func release(_ capture: Capture) {
        if case .picture(let picture) = capture.payload { state.withLock { $0.pool.append(picture) } }
    }

    private static let callback: clc_frame_callback = { context, frame in
        guard let context, let frame else { return }
        Unmanaged<LibcameraCamera>.fromOpaque(context).takeUnretainedValue().deliver(frame.pointee)
    }

    /// On libcamera's thread: one completed frame noted for the recorder (a frame it cannot use, and every frame
    /// while probing, goes straight back to libcamera).
    private func deliver(_ frame: clc_frame) {
        let stamp = frame.sensor_timestamp_ns >= 0 ? Double(frame.sensor_timestamp_ns) / 1_000 : nil
        let arrival = MonotonicClock.now()
        let probing = state.withLock { s -> (Bool, Double?) in
            s.figures.completed += 1
            if let last = s.figures.lastArrival { s.figures.longestGapMicroseconds = max(s.figures.longestGapMicroseconds, arrival - last) }
            s.figures.lastArrival = arrival
            guard s.probe != nil else { return (false, nil) }
            if let stamp { s.probe!.stamps.append(stamp) }
            let i = s.probe!.asked.count
            guard i < s.probe!.plan.count else { return (true, nil) }
            s.probe!.asked.append(s.probe!.plan[i])
            return (true, s.probe!.plan[i])
        }
        if probing.0 {
            if let ask = probing.1 { clc_camera_request_duration(handle, Int64(ask)) }
            clc_camera_requeue(handle, frame.request)
            queue.wake()
            return
        }
        guard let stamp, (frame.fourcc == Self.yuv420 && frame.plane_count == 3) || (frame.fourcc == Self.yuyv && frame.plane_count >= 1) else {
            state.withLock { $0.skippedFormat += 1 }
            clc_camera_requeue(handle, frame.request)
            return
        }
        // A recorder a second behind gets no more copies (their memory would grow without bound).
        guard queue.count < 30 else {
            state.withLock { $0.figures.behind += 1 }
            clc_camera_requeue(handle, frame.request)
            return
        }
        let planes = withUnsafeBytes(of: frame.planes) { raw in Array(raw.bindMemory(to: UnsafePointer<UInt8>?.self).prefix(Int(frame.plane_count))) }
        let strides = withUnsafeBytes(of: frame.strides) { raw in raw.bindMemory(to: UInt32.self).prefix(Int(frame.plane_count)).map(Int.init) }
        // Plane 0 is `height` rows; YUV420's chroma planes half as many.
        let rows = planes.indices.map { $0 == 0 ? height : (height + 1) / 2 }
        let sizes = zip(strides, rows).map { $0 * $1 }
        let total = sizes.reduce(0, +)
        let raw = state.withLock { s in s.raws.popLast() }.flatMap { $0.bytes.count >= total ? $0 : nil } ?? RawFrame(count: total)
        var offsets: [Int] = [], at = 0
        for (i, size) in sizes.enumerated() {
            offsets.append(at)
            if let source = planes[i] { raw.bytes.baseAddress!.advanced(by: at).copyMemory(from: source, byteCount: size) }
            at += size
        }
        clc_camera_requeue(handle, frame.request)
        queue.push(Completed(raw: raw, offsets: offsets, strides: strides, fourcc: frame.fourcc, sequence: frame.sequence,
                             stampMicroseconds: stamp, exposureMicroseconds: frame.exposure_us,
                             durationMicroseconds: frame.frame_duration_us, arrival: arrival))
    }

    private func convert(_ frame: Completed, into picture: PlanarFrame) {
        let base = UnsafeRawPointer(frame.raw.bytes.baseAddress!)
        if frame.fourcc == Self.yuyv {
            PixelConversion.convert(UnsafeRawBufferPointer(start: base, count: frame.strides[0] * height), layout: .yuyv,
                                    bytesPerLine: frame.strides[0], into: picture)
            return
        }
        let planes = [(picture.luma, width, height), (picture.cb, picture.chromaWidth, picture.chromaHeight),
                      (picture.cr, picture.chromaWidth, picture.chromaHeight)]
        for (i, (dest, w, h)) in planes.enumerated() {
            guard i < frame.offsets.count else { continue }
            let source = base + frame.offsets[i]
            for row in 0..<h {
                UnsafeMutableRawPointer(dest.baseAddress! + row * w).copyMemory(from: source + row * frame.strides[i], byteCount: w)
            }
        }
    }

    /// Runs the camera a moment, asking a few frames for a longer duration, and reads from the frames' timestamps
    /// whether and how many frames later the camera followed (54 frames: under 2 s at 30 fps).
    private func measureHonour() throws(CameraSourceError) -> FrameDurationProbe.Verdict {
        let step = (periodMicroseconds * 0.05).rounded()
        guard let limits = info.frameDurationLimits, Double(limits.upperBound) >= periodMicroseconds + step,
              Double(limits.lowerBound) <= periodMicroseconds else {
            return .ignored("libcamera lists no FrameDurationLimits around its \(Int(periodMicroseconds)) µs period")
        }
        let plan = FrameDurationProbe.plan(nominal: periodMicroseconds, step: step)
        state.withLock { $0.probe = (plan, [], []) }
        clc_camera_request_duration(handle, Int64(periodMicroseconds.rounded()))
        var why = [CChar](repeating: 0, count: 512)
        guard clc_camera_start(handle, Self.callback, Unmanaged.passUnretained(self).toOpaque(), &why, why.count) == 0 else {
            state.withLock { $0.probe = nil }
            throw CameraSourceError(LibcameraManager.sentence(why))
        }
        let wanted = plan.count + 18
        let deadline = Date().addingTimeInterval(2 + Double(wanted) * periodMicroseconds / 1_000_000)
        queue.waitFor(until: deadline) { state.withLock { $0.probe!.stamps.count } >= wanted }
        clc_camera_stop(handle)
        let probe = state.withLock { s in defer { s.probe = nil }; return s.probe! }
        guard probe.stamps.count >= plan.count else {
            throw CameraSourceError("libcamera camera \(cameraID) gave \(probe.stamps.count) frames with a SensorTimestamp in \(Int(2 + Double(wanted) * periodMicroseconds / 1_000_000)) s")
        }
        let intervals = zip(probe.stamps, probe.stamps.dropFirst()).map { $1 - $0 }
        return FrameDurationProbe.verdict(asked: probe.asked, intervals: intervals, nominal: periodMicroseconds, step: step)
    }
}
