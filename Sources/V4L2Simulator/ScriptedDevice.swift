// The scripted driver's model of one device: its handles, buffers and sensor in real time.
import CV4L2
import CoordCore
import Foundation
import Platform
import V4L2

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// ---- the driver's model of one device ----

/// One open fd.
final class Handle {
    let device: DeviceState
    let nonBlocking: Bool

    init(device: DeviceState, nonBlocking: Bool) {
        self.device = device
        self.nonBlocking = nonBlocking
    }
}

/// A driver buffer's memory; freed when neither the queue nor a mapping holds it.
final class Storage {
    let pointer: UnsafeMutableRawPointer
    let length: Int

    init(length: Int) {
        self.length = length
        pointer = UnsafeMutableRawPointer.allocate(byteCount: max(length, 1), alignment: 4096)
        pointer.initializeMemory(as: UInt8.self, repeating: 0, count: max(length, 1))
    }

    deinit { pointer.deallocate() }
}

struct Mapping {
    let storage: Storage
    let device: DeviceState
    var count: Int
}

struct Buffer {
    enum State { case dequeued, queued, done }
    let storage: Storage
    let offset: UInt32
    var state = State.dequeued
    var mapCount = 0
    var queuedAtUs = 0.0
    var bytesUsed: UInt32 = 0
    var sequence: UInt32 = 0
    var timestampUs: Int64 = 0
}

/// A frame the sensor will produce: its true times on CLOCK_MONOTONIC, in microseconds.
struct PendingFrame {
    var sequence: UInt32
    var startOfExposure: Double
    var exposure: Double
    /// When the driver needs a queued buffer: readout begins at the end of exposure.
    var fillStart: Double { startOfExposure + exposure }
    /// End of readout: the buffer is done and the EOF timestamp taken.
    var readyAt: Double
}

final class DeviceState {
    let path: String
    let script: ScriptedV4L2Driver.Device
    let profile: Profile
    /// Start phase and timestamp jitter: the core's seeded source, so a script replays the same draws.
    var rng: SeededRandom
    var formatIndex = 0
    var sizeIndex = 0
    var fps: UInt32
    var controls: [UInt32: Int32] = [:]
    var owner: Int32?
    var buffers: [Buffer] = []
    var queued: [Int] = []
    var done: [Int] = []
    var streaming = false
    var pending: PendingFrame?
    var filled = 0
    var dequeued = 0
    var unplugged = false
    let drops: Set<UInt32>

    init(path: String, script: ScriptedV4L2Driver.Device, profile: Profile, seed: UInt64) {
        self.path = path
        self.script = script
        self.profile = profile
        rng = SeededRandom(seed: seed)
        fps = profile.formats.first?.sizes.first?.fps.first ?? 30
        drops = Set(script.dropSequences ?? [])
        for control in profile.controls { controls[control.id] = control.defaultValue }
    }

    var format: FormatSpec { profile.formats[formatIndex] }
    var size: SizeSpec { format.sizes[sizeIndex] }

    // ---- format and interval, snapped as uvcvideo snaps them ----

    /// An unknown fourcc falls back to the first format; the size is the offered one closest in area overlap
    /// (uvc_v4l2_try_format's metric), and the interval resets to that size's default (its fastest).
    func setFormat(pixelFormat: UInt32, width: UInt32, height: UInt32) {
        formatIndex = profile.formats.firstIndex { $0.pixelFormat == pixelFormat } ?? 0
        var best = (index: 0, distance: Int64.max)
        for (i, s) in format.sizes.enumerated() {
            let (w, h, rw, rh) = (Int64(s.width), Int64(s.height), Int64(width), Int64(height))
            let overlap = min(w, rw) * min(h, rh)
            let distance = w * h + rw * rh - 2 * overlap
            if distance < best.distance { best = (i, distance) }
        }
        sizeIndex = best.index
        fps = size.fps[0]
    }

    /// The offered interval nearest the one asked, by period; 0 in either term means the default.
    func setInterval(numerator: UInt32, denominator: UInt32) {
        guard numerator != 0, denominator != 0 else {
            fps = size.fps[0]
            return
        }
        let asked = Double(numerator) / Double(denominator)
        fps = size.fps.min { abs(1 / Double($0) - asked) < abs(1 / Double($1) - asked) }!
    }

    func pixFormat() -> v4l2_pix_format {
        var pix = v4l2_pix_format()
        pix.width = size.width
        pix.height = size.height
        pix.pixelformat = format.pixelFormat
        pix.field = CV4L2_FIELD_NONE
        pix.bytesperline = format.compressed ? 0 : size.width * 2
        pix.sizeimage = sizeImage
        pix.colorspace = CV4L2_COLORSPACE_SRGB
        return pix
    }

    /// YUYV is two bytes a pixel; uvcvideo reports the same bound (dwMaxVideoFrameSize) for MJPG.
    var sizeImage: UInt32 { size.width * size.height * 2 }

    // ---- buffers ----

    func allocateBuffers(count: UInt32) {
        let length = Int(sizeImage)
        let stride = (length + 4095) / 4096 * 4096  // offsets are page-aligned cookies, as vb2 hands them out
        buffers = (0..<Int(count)).map { Buffer(storage: Storage(length: length), offset: UInt32($0 * stride)) }
    }

    /// Frees the queue; a buffer still mapped lives on with its mapping (vb2 orphans it).
    func releaseBuffers() {
        buffers = []
        queued = []
        done = []
    }

    func describe(buffer index: Int, into buf: UnsafeMutablePointer<v4l2_buffer>) {
        let b = buffers[index]
        var out = v4l2_buffer()
        out.index = UInt32(index)
        out.type = CV4L2_BUF_TYPE_VIDEO_CAPTURE
        out.memory = CV4L2_MEMORY_MMAP
        out.m.offset = b.offset
        out.length = UInt32(b.storage.length)
        out.field = CV4L2_FIELD_NONE
        out.bytesused = b.bytesUsed
        out.sequence = b.sequence
        out.timestamp.tv_sec = Int(b.timestampUs / 1_000_000)
        out.timestamp.tv_usec = Int(b.timestampUs % 1_000_000)
        out.flags = CV4L2_BUF_FLAG_TIMESTAMP_MONOTONIC | timestampSourceFlag
        if b.mapCount > 0 { out.flags |= CV4L2_BUF_FLAG_MAPPED }
        switch b.state {
        case .queued: out.flags |= CV4L2_BUF_FLAG_QUEUED
        case .done: out.flags |= CV4L2_BUF_FLAG_DONE
        case .dequeued: break
        }
        buf.pointee = out
    }

    var timestampIsEOF: Bool { script.timestampSource == "eof" }
    var timestampSourceFlag: UInt32 { timestampIsEOF ? CV4L2_BUF_FLAG_TSTAMP_SRC_EOF : CV4L2_BUF_FLAG_TSTAMP_SRC_SOE }

    // ---- controls ----

    /// A manual value is accepted only while its auto control is off (the control framework's INACTIVE flag).
    func isActive(_ control: ControlSpec) -> Bool {
        guard let auto = control.autoID else { return true }
        return control.activeWhen.contains(controls[auto] ?? 0)
    }

    // ---- streaming, in real time ----

    /// The frame period the sensor actually runs at, by CLOCK_MONOTONIC.
    var truePeriodUs: Double { 1_000_000 / Double(fps) / (1 + (script.rateErrorPPM ?? 0) * 1e-6) }

    /// Half the frame interval unless exposure_absolute rules (manual or shutter priority), in 100 µs units.
    var exposureUs: Double {
        let mode = controls[CV4L2_CID_EXPOSURE_AUTO]
        if mode == CV4L2_EXPOSURE_MANUAL || mode == CV4L2_EXPOSURE_SHUTTER_PRIORITY,
           let value = controls[CV4L2_CID_EXPOSURE_ABSOLUTE]
        {
            return Double(value) * 100
        }
        return 500_000 / Double(fps)
    }

    /// Exposure, then a readout of half the frame period: at the default exposure the frame ends one interval
    /// after it began.
    func frame(sequence: UInt32, startOfExposure: Double) -> PendingFrame {
        let exposure = exposureUs
        return PendingFrame(sequence: sequence, startOfExposure: startOfExposure, exposure: exposure,
                            readyAt: startOfExposure + exposure + truePeriodUs / 2)
    }

    func start(now: Double) {
        streaming = true
        let phase = script.startPhaseUs ?? rng.unit() * truePeriodUs
        pending = frame(sequence: 0, startOfExposure: now + phase)
    }

    /// STREAMOFF: the sensor stops and every buffer comes back to the application, done or not.
    func stop() {
        streaming = false
        pending = nil
        for i in buffers.indices { buffers[i].state = .dequeued }
        queued = []
        done = []
    }

    /// Captures every frame whose readout has ended by `now`: into the oldest buffer queued before the readout
    /// began, else dropped (the sequence still counts it, so the consumer sees the gap).
    func advance(now: Double, painter: (ScriptedV4L2Driver.Frame) -> Int) {
        guard streaming, !unplugged else { return }
        while let f = pending, f.readyAt <= now {
            if let limit = script.unplugAfterFrames, filled >= limit {
                // Yanked between frames, once the consumer holds every frame it was promised.
                if dequeued >= limit { unplugged = true }
                return
            }
            // A long exposure stretches the frame, as UVC cameras lower their rate in manual exposure.
            pending = frame(sequence: f.sequence &+ 1, startOfExposure: f.startOfExposure + max(truePeriodUs, f.exposure))
            if drops.contains(f.sequence) { continue }
            guard let index = queued.first, buffers[index].queuedAtUs <= f.fillStart else { continue }
            queued.removeFirst()
            let storage = buffers[index].storage
            let used = painter(ScriptedV4L2Driver.Frame(
                fourcc: V4L2Device.fourcc(format.pixelFormat), width: Int(size.width), height: Int(size.height),
                sequence: f.sequence, startOfExposureUs: Int64(f.startOfExposure.rounded()),
                exposureUs: Int64(f.exposure.rounded()),
                buffer: UnsafeMutableRawBufferPointer(start: storage.pointer, count: storage.length)))
            let jitter = (script.timestampJitterUs ?? 0) > 0 ? rng.standardNormal() * script.timestampJitterUs! : 0
            let stamp = (timestampIsEOF ? f.readyAt : f.startOfExposure) + jitter
            buffers[index].bytesUsed = UInt32(min(max(used, 0), storage.length))
            buffers[index].sequence = f.sequence
            buffers[index].timestampUs = Int64(stamp.rounded())
            buffers[index].state = .done
            done.append(index)
            filled += 1
        }
    }
}

extension SeededRandom {
    /// Uniform in [0, 1), from the top 53 bits of the next draw.
    mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }

    /// Standard normal, by Box–Muller over two `unit()` draws.
    mutating func standardNormal() -> Double {
        let u1 = max(unit(), .leastNonzeroMagnitude)
        return (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * unit())
    }
}
