import CAravis
import CoordCore
import Foundation
import Media
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
                localClock: @escaping @Sendable (Int64) -> Int64) throws {
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
            try features.prepareFreeRun()
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

// MARK: Features (GenICam's names, with the fallbacks real cameras still have)

extension GenICamCamera {
    /// The camera's GenICam features, each call one sentence on failure. Called under `deviceLock` once streaming.
    struct Features {
        let camera: UnsafeMutablePointer<ArvCamera>
        let deviceID: String

        /// Opens `deviceID`: a GigE Vision camera on one of `interfaces` (where it was last found, else found again
        /// there), by address; else a USB3 Vision camera. Throws one sentence naming it and what was found instead.
        static func open(_ deviceID: String, interfaces: [String]) throws -> UnsafeMutablePointer<ArvCamera> {
            var err = [CChar](repeating: 0, count: 512)
            if !interfaces.isEmpty {
                let key = "\(interfaces.joined(separator: ","))/\(deviceID)"
                if let known = GenICamCamera.located.holding({ $0[key] }),
                   let camera = carv_gv_camera_open(known.interfaceAddress, known.announcement.address, &err, 512) {
                    return camera
                }
                if let found = try GigEVisionDiscovery.discover(on: interfaces, looking: deviceID).first {
                    GenICamCamera.located.holding { $0[key] = found }
                    if let camera = carv_gv_camera_open(found.interfaceAddress, found.announcement.address, &err, 512) { return camera }
                    throw CameraSourceError("GigE Vision camera \(Echo.short(deviceID)) answered discovery on \(found.interface) from \(found.announcement.address) but could not be opened: \(text(err))")
                }
            }
            if let camera = carv_camera_open(deviceID, &err, 512) { return camera }
            let found = (try? GenICamCamera.devices(interfaces: interfaces))?.map { Echo.short($0.deviceID) } ?? []
            let looked = interfaces.isEmpty
                ? "GigE Vision discovery is off: name the network interface its cameras are on with --genicam-interface IFACE"
                : "GigE Vision looked on \(interfaces.joined(separator: ", ")) only"
            throw CameraSourceError("no GenICam camera answers as \"\(Echo.short(deviceID))\" (\(found.isEmpty ? "none was found" : "found: " + found.joined(separator: ", ")); \(looked); see coord-node --list-cameras)")
        }

        func call(_ what: String, _ body: (UnsafeMutablePointer<CChar>, Int) -> Int32) throws {
            var err = [CChar](repeating: 0, count: 512)
            let rc = err.withUnsafeMutableBufferPointer { body($0.baseAddress!, $0.count) }
            if rc != 0 { throw CameraSourceError("\(deviceID) refused \(what): \(text(err))") }
        }

        func available(_ name: String) -> Bool { carv_feature_available(camera, name) != 0 }
        /// The first of `names` the camera has.
        func first(_ names: [String]) -> String? { names.first(where: available) }

        func integer(_ name: String) throws -> Int64 {
            var value: Int64 = 0
            try call("reading \(name)") { carv_get_integer(camera, name, &value, $0, $1) }
            return value
        }
        func setInteger(_ name: String, _ value: Int64) throws {
            try call("\(name) = \(value)") { carv_set_integer(camera, name, value, $0, $1) }
        }
        func integerBounds(_ name: String) throws -> ClosedRange<Int64> {
            var lo: Int64 = 0, hi: Int64 = 0
            try call("reading \(name)'s range") { carv_integer_bounds(camera, name, &lo, &hi, $0, $1) }
            return lo...max(lo, hi)
        }
        func float(_ name: String) throws -> Double {
            var value = 0.0
            try call("reading \(name)") { carv_get_float(camera, name, &value, $0, $1) }
            return value
        }
        func setFloat(_ name: String, _ value: Double) throws {
            try call("\(name) = \(value)") { carv_set_float(camera, name, value, $0, $1) }
        }
        func floatBounds(_ name: String) throws -> ClosedRange<Double> {
            var lo = 0.0, hi = 0.0
            try call("reading \(name)'s range") { carv_float_bounds(camera, name, &lo, &hi, $0, $1) }
            return lo...max(lo, hi)
        }
        func setString(_ name: String, _ value: String) throws {
            try call("\(name) = \(value)") { carv_set_string(camera, name, value, $0, $1) }
        }
        func string(_ name: String) -> String? {
            var out = [CChar](repeating: 0, count: 256), err = [CChar](repeating: 0, count: 256)
            guard carv_get_string(camera, name, &out, 256, &err, 256) == 0 else { return nil }
            return text(out)
        }

        func pixelFormats() throws -> [String] {
            var out = [CChar](repeating: 0, count: 4096)
            var count: Int32 = 0
            try call("listing its pixel formats") { err, len in
                count = carv_pixel_formats(camera, &out, 4096, err, len)
                return count < 0 ? -1 : 0
            }
            return text(out).split(separator: "\n").map(String.init)
        }

        func payload() throws -> UInt32 {
            var bytes: UInt32 = 0
            try call("reading its payload size") { carv_payload(camera, &bytes, $0, $1) }
            return bytes
        }

        /// Free-run: no trigger, continuous acquisition, the frame rate under our control.
        func prepareFreeRun() throws {
            if available("TriggerSelector") { try? setString("TriggerSelector", "FrameStart") }
            if available("TriggerMode") { try setString("TriggerMode", "Off") }
            if available("AcquisitionMode") { try setString("AcquisitionMode", "Continuous") }
            if available("AcquisitionFrameRateEnable") {
                try call("AcquisitionFrameRateEnable = true") { carv_set_boolean(camera, "AcquisitionFrameRateEnable", 1, $0, $1) }
            }
        }

        /// Width and Height, with the offsets at 0; one sentence naming the camera, the size and its ranges when it
        /// cannot be that size.
        func setSize(width: Int, height: Int) throws {
            for name in ["OffsetX", "OffsetY"] where available(name) { try? setInteger(name, 0) }
            // The ranges with the offsets at 0 (a camera's Width max shrinks while OffsetX is set).
            let widths = try integerBounds("Width"), heights = try integerBounds("Height")
            let sizes = GenICamDescription(identity: DeviceIdentity(driver: "aravis"), pixelFormats: [],
                                           widthRange: Int(widths.lowerBound)...Int(widths.upperBound),
                                           heightRange: Int(heights.lowerBound)...Int(heights.upperBound),
                                           widthStep: Int(carv_integer_increment(camera, "Width")),
                                           heightStep: Int(carv_integer_increment(camera, "Height")),
                                           frameRateRange: nil, controlRanges: ControlRanges())
            if let problem = sizes.sizeProblem(deviceID: deviceID, width: width, height: height) { throw CameraSourceError(problem) }
            for (name, value) in [("Width", width), ("Height", height)] {
                try setInteger(name, Int64(value))
                let kept = try integer(name)
                guard kept == Int64(value) else {
                    throw CameraSourceError("\(deviceID) was asked for \(name) \(value) but kept \(kept) (its \(name) steps do not allow it)")
                }
            }
        }

        static let frameRateNames = ["AcquisitionFrameRate", "AcquisitionFrameRateAbs"]

        /// Sets the frame rate; returns the period the camera kept, µs. Throws when it has no rate control or keeps
        /// a rate more than 0.1 % off.
        func setFramePeriod(_ period: Double) throws -> Double {
            guard let name = first(Self.frameRateNames) else {
                throw CameraSourceError("\(deviceID) has no AcquisitionFrameRate feature, so coord cannot set its rate")
            }
            let fps = 1e6 / period
            let range = try floatBounds(name)
            guard range.contains(fps) else {
                throw CameraSourceError("\(deviceID) cannot run at \(String(format: "%.3g", fps)) fps (its \(name) is \(String(format: "%.3g", range.lowerBound))…\(String(format: "%.4g", range.upperBound)))")
            }
            try setFloat(name, fps)
            let kept = try float(name)
            guard abs(kept - fps) <= fps * 1e-3 else {
                throw CameraSourceError("\(deviceID) was asked for \(String(format: "%.3f", fps)) fps but runs at \(String(format: "%.3f", kept)) fps")
            }
            return 1e6 / kept
        }

        /// The timestamp clock's rate: GigE Vision's tick frequency register (Aravis turns ticks into ns with it), else
        /// the GevTimestampTickFrequency feature; nil when the camera has neither.
        func tickFrequency() -> Int64? {
            let hz = carv_camera_gv_tick_frequency(camera)
            if hz > 0 { return Int64(clamping: hz) }
            guard available("GevTimestampTickFrequency"), let hz = try? integer("GevTimestampTickFrequency"), hz > 0 else { return nil }
            return hz
        }

        func hostAddress() -> String? {
            var out = [CChar](repeating: 0, count: 64)
            guard carv_camera_gv_interface_address(camera, &out, 64) == 0 else { return nil }
            return text(out)
        }

        func exposureMicroseconds() -> Double? {
            if let name = first(["ExposureTime", "ExposureTimeAbs"]) { return try? float(name) }
            if available("ExposureTimeRaw") { return (try? integer("ExposureTimeRaw")).map(Double.init) }
            return nil
        }
        func setExposure(_ us: Double) throws {
            if available("ExposureAuto") { try? setString("ExposureAuto", "Off") }
            if let name = first(["ExposureTime", "ExposureTimeAbs"]) { return try setFloat(name, us) }
            try setInteger("ExposureTimeRaw", Int64(us.rounded()))
        }
        /// Gain in dB (`Gain`), or in the camera's own units where it has only `GainRaw` (as V4L2's gain).
        func gain() -> Double? {
            if let name = first(["Gain", "GainAbs"]) { return try? float(name) }
            if available("GainRaw") { return (try? integer("GainRaw")).map(Double.init) }
            return nil
        }
        func setGain(_ value: Double) throws {
            if available("GainAuto") { try? setString("GainAuto", "Off") }
            if let name = first(["Gain", "GainAbs"]) { return try setFloat(name, value) }
            try setInteger("GainRaw", Int64(value.rounded()))
        }

        func controlRanges() -> ControlRanges {
            var ranges = ControlRanges()
            if let name = first(["ExposureTime", "ExposureTimeAbs"]), let r = try? floatBounds(name) {
                ranges.exposureMicroseconds = Int(r.lowerBound.rounded(.up))...Int(min(r.upperBound, 1e9).rounded(.down))
            } else if available("ExposureTimeRaw"), let r = try? integerBounds("ExposureTimeRaw") {
                ranges.exposureMicroseconds = Int(r.lowerBound)...Int(min(r.upperBound, 1_000_000_000))
            }
            if let name = first(["Gain", "GainAbs"]), let r = try? floatBounds(name) {
                ranges.gainDecibels = r
            } else if available("GainRaw"), let r = try? integerBounds("GainRaw") {
                ranges.gainDecibels = Double(r.lowerBound)...Double(r.upperBound)
            }
            return ranges
        }

        /// What the camera is: vendor, model, serial, and its protocol by the device it opened as.
        func identity() -> DeviceIdentity {
            let transport = carv_camera_is_gv(camera) != 0 ? "GigEVision" : carv_camera_is_uv(camera) != 0 ? "USB3Vision" : nil
            return DeviceIdentity(driver: "aravis", transport: transport, vendor: string("DeviceVendorName"),
                                  model: string("DeviceModelName"),
                                  serial: string("DeviceSerialNumber") ?? string("DeviceID"))
        }

        /// Sizes, formats and rates for the handshake and `--list-cameras`.
        func description() throws -> GenICamDescription {
            let widths = try integerBounds("Width"), heights = try integerBounds("Height")
            let rates = try first(Self.frameRateNames).map { try floatBounds($0) }
            return GenICamDescription(identity: identity(), pixelFormats: try pixelFormats(),
                                      widthRange: Int(widths.lowerBound)...Int(widths.upperBound),
                                      heightRange: Int(heights.lowerBound)...Int(heights.upperBound),
                                      widthStep: Int(carv_integer_increment(camera, "Width")),
                                      heightStep: Int(carv_integer_increment(camera, "Height")),
                                      frameRateRange: rates, controlRanges: controlRanges(), hostAddress: hostAddress())
        }
    }

    // MARK: Devices

    /// Where each GigE Vision camera was last found (interfaces and device id → its answer), so opening it again
    /// for a take talks to it directly instead of discovering again.
    static let located = Locked<[String: GigEVisionCameraFound]>([:])

    /// Every GenICam device found now without opening them: GigE Vision cameras answering on `interfaces` (none:
    /// GigE Vision is not looked for, nothing is broadcast) and USB3 Vision cameras. Throws one sentence when an
    /// interface cannot be used.
    public static func devices(interfaces: [String]) throws -> [GenICamDevice] {
        let answers = try GigEVisionDiscovery.discover(on: interfaces)
        located.holding { cache in
            for found in answers { cache["\(interfaces.joined(separator: ","))/\(found.announcement.deviceID)"] = found }
        }
        let gige = answers.map { found in
            let a = found.announcement
            return GenICamDevice(deviceID: a.deviceID, protocolName: "GigEVision", vendor: a.vendor, model: a.model,
                                 serial: a.serialOrMAC, address: a.address)
        }
        let count = carv_update_device_list()
        func text(_ p: UnsafePointer<CChar>?) -> String { p.map { String(cString: $0) } ?? "" }
        let usb = (0..<count).map { i in
            GenICamDevice(deviceID: text(carv_device_id(i)), protocolName: text(carv_device_protocol(i)),
                          vendor: text(carv_device_vendor(i)), model: text(carv_device_model(i)),
                          serial: text(carv_device_serial(i)), address: text(carv_device_address(i)))
        }
        return gige + usb
    }

    /// Opens `deviceID` (GigE Vision looked for on `interfaces` only), reads what it offers, closes it; one sentence
    /// naming it when it cannot be opened.
    public static func describe(deviceID: String, interfaces: [String]) throws -> GenICamDescription {
        let camera = try Features.open(deviceID, interfaces: interfaces)
        defer { carv_camera_close(camera) }
        return try Features(camera: camera, deviceID: deviceID).description()
    }
}

/// The NUL-terminated text a C call wrote into `chars`.
private func text(_ chars: [CChar]) -> String {
    chars.withUnsafeBufferPointer { buffer in
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// A value guarded by a lock (the discovery cache is read from the node's startup and from arming).
final class Locked<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()
    init(_ value: Value) { self.value = value }
    func holding<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
