import CoordCore
import Foundation
import Synchronization
import LibAV
import Pixels
import Platform
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `coord-node calibrate`: measures what this node can sustain (disk write rate to the staging filesystem, each
/// codec's encode rate with every CPU busy, how fast it heats) so the coordinator can budget takes before they run.
public enum Calibrator {
    /// The picture size the encoders are timed on (a common camera mode; rates scale per pixel).
    public static let width = 1280, height = 720
    /// The frame rate the timed files declare; h264 puts a keyframe every `fps` frames, as in a recording.
    static let fps = 30
    static let blockBytes = 1 << 20

    /// `coord-node calibrate`: makes the staging directory if need be, measures, and saves the figures to `file`.
    public static func calibrate(staging: URL, file: URL, probe: HostProbe, seconds: Double,
                                 progress: (String) -> Void) throws -> Calibration {
        do {
            try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
        } catch {
            throw CalibrationError(operation: "create staging directory", path: staging.path, reason: reason(error))
        }
        let calibration = try measure(staging: staging, probe: probe, seconds: seconds, progress: progress)
        try calibration.save(to: file)
        return calibration
    }

    /// Measures the disk for about `seconds`, then each codec for about `seconds`; `progress` gets one line per figure.
    public static func measure(staging: URL, probe: HostProbe, seconds: Double, progress: (String) -> Void) throws -> Calibration {
        guard seconds.isFinite, seconds > 0 else {
            throw CalibrationError(operation: "calibrate on", path: staging.path, reason: "the measuring time \(seconds) s is not positive")
        }
        let measuredAt = WallClock.rfc3339()
        let disk = try measureDisk(staging: staging, probe: probe, seconds: seconds)
        progress("disk write \(Int((disk / 1e6).rounded())) MB/s")

        let cpus = probe.cpuCount()
        let scratch = scratchDirectory(staging: staging, probe: probe)
        let hottestBefore = probe.thermalZones().map(\.celsius).max()
        let start = MonotonicClock.now()
        var encode: [String: Calibration.CodecRate] = [:]
        for codec in VideoCodec.allCases {
            let rate = try measureEncode(codec, threads: cpus, seconds: seconds, directory: scratch, probe: probe)
            encode[codec.rawValue] = rate
            progress(encodeLine(codec.rawValue, rate))
        }
        let encodeSeconds = Double(MonotonicClock.now() - start) / 1e6
        var heating: Double?
        if let before = hottestBefore, let after = probe.thermalZones().map(\.celsius).max(), encodeSeconds > 0 {
            let rate = (after - before) / encodeSeconds
            // A zone that cooled or held tells nothing about how soon a long take throttles.
            heating = rate > 0 ? rate : nil
        }
        return Calibration(diskWriteBytesPerSecond: disk, encode: encode, heatingCelsiusPerSecond: heating,
                           cpuCount: cpus, measuredAt: measuredAt)
    }

    /// "h264 encode 31 Mpx/s, 2.6 KB a 1280x720 frame (0.0028 bytes/px)": what one codec measured. A frame's
    /// size says it where bytes/px rounded to two places said 0.00 for h264.
    static func encodeLine(_ codec: String, _ rate: Calibration.CodecRate) -> String {
        let megapixels = Int((rate.pixelsPerSecond / 1e6).rounded())
        let frame = rate.bytesPerPixel * Double(width * height)
        let frameText = frame >= 1e6 ? String(format: "%.1f MB", frame / 1e6) : frame >= 1e3 ? String(format: "%.1f KB", frame / 1e3)
            : "\(Int(frame.rounded())) bytes"
        // Two significant figures, however small.
        let digits = rate.bytesPerPixel > 0 ? max(2, 1 - Int(log10(rate.bytesPerPixel).rounded(.down))) : 2
        return "\(codec) encode \(megapixels) Mpx/s, \(frameText) a \(width)x\(height) frame (\(String(format: "%.\(digits)f", rate.bytesPerPixel)) bytes/px)"
    }

    // MARK: - Disk

    /// Bytes/s written to a file in `staging` and synced to the device, the sync's wait included.
    static func measureDisk(staging: URL, probe: HostProbe, seconds: Double) throws -> Double {
        let free = probe.disk(staging: staging).free
        // A take must not find the disk filled by its own calibration.
        let limit = min(UInt64(1) << 30, free / 4)
        guard limit >= UInt64(blockBytes) else {
            throw CalibrationError(operation: "measure the disk under", path: staging.path,
                                   reason: "only \(free) bytes are free, too few to write a 1 MiB block in a quarter of them")
        }
        let path = staging.appendingPathComponent(".calibrate-\(uniqueSuffix()).tmp").path
        let fd: Int32
        do { fd = try POSIX.retryingEINTR("open") { open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600) } } catch {
            throw CalibrationError(operation: "create", path: path, errno: error.errno)
        }
        defer {
            close(fd)
            unlink(path)
        }
        // Random bytes, each 4 KiB page stamped with its block number below: a compressing or deduplicating
        // filesystem would write less than it is given and report a rate the disk cannot sustain.
        var block = [UInt8](repeating: 0, count: blockBytes)
        var random = SeededRandom(seed: UInt64(UInt32(truncatingIfNeeded: getpid())))
        block.withUnsafeMutableBytes { raw in
            for i in 0..<(raw.count / 8) { raw.storeBytes(of: random.next(), toByteOffset: i * 8, as: UInt64.self) }
        }
        let start = MonotonicClock.now()
        let deadline = start + Int64(seconds * 1e6)
        var written: UInt64 = 0
        repeat {
            let number = written / UInt64(blockBytes)
            try block.withUnsafeMutableBytes { raw in
                for page in stride(from: 0, to: raw.count, by: 4096) { raw.storeBytes(of: number, toByteOffset: page, as: UInt64.self) }
                try writeAll(fd, UnsafeRawBufferPointer(raw), path: path)
            }
            written += UInt64(blockBytes)
        } while MonotonicClock.now() < deadline && written + UInt64(blockBytes) <= limit
        do { try POSIX.retryingEINTR("fdatasync") { syncData(fd) } } catch {
            throw CalibrationError(operation: "sync", path: path, errno: error.errno)
        }
        let elapsed = Double(MonotonicClock.now() - start) / 1e6
        return Double(written) / max(elapsed, 1e-6)
    }

    /// write(2) until every byte is out, retrying interrupted and short writes.
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String) throws {
        var offset = 0
        while offset < bytes.count {
            do { offset += try POSIX.retryingEINTR("write") { write(fd, bytes.baseAddress! + offset, bytes.count - offset) } } catch {
                throw CalibrationError(operation: "write", path: path, errno: error.errno)
            }
        }
    }

    private static func syncData(_ fd: Int32) -> Int32 {
#if os(Linux)
        return fdatasync(fd)
#else
        return fsync(fd)
#endif
    }

    // MARK: - Encoders

    /// Where the timed files go: RAM (/dev/shm) when it has room, so the disk's speed does not slow the encoders.
    static func scratchDirectory(staging: URL, probe: HostProbe) -> URL {
        let shm = URL(fileURLWithPath: "/dev/shm")
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: shm.path, isDirectory: &isDirectory), isDirectory.boolValue,
           access(shm.path, W_OK) == 0, probe.disk(staging: shm).free >= 256 << 20 {
            return shm
        }
        return staging
    }

    /// Runs `threads` writers of `codec` in parallel for about `seconds`; the elapsed time counts until the last file
    /// is finished, so an encoder's buffered frames are paid for.
    static func measureEncode(_ codec: VideoCodec, threads: Int, seconds: Double, directory: URL,
                              probe: HostProbe) throws -> Calibration.CodecRate {
        let threads = max(1, threads)
        // Each file stays under its share of a quarter of the free space, a small /dev/shm included.
        let capBytes = max(UInt64(16) << 20, probe.disk(staging: directory).free / 4 / UInt64(threads))
        let tally = Tally()
        let done = DispatchGroup()
        let start = MonotonicClock.now()
        let deadline = start + Int64(seconds * 1e6)
        let suffix = uniqueSuffix()
        for index in 0..<threads {
            let path = directory.appendingPathComponent("coord-calibrate-\(suffix)-\(codec.rawValue)-\(index).mkv").path
            done.enter()
            let thread = Thread {
                defer { done.leave() }
                do {
                    let result = try encode(codec, ordinal: UInt8(index % 8), path: path, deadline: deadline, capBytes: capBytes)
                    tally.add(pixels: result.pixels, bytes: result.bytes)
                } catch {
                    tally.fail(error)
                }
            }
            thread.name = "calibrate-\(codec.rawValue)-\(index)"
            thread.start()
        }
        done.wait()
        let elapsed = Double(MonotonicClock.now() - start) / 1e6
        let (pixels, bytes, error) = tally.result
        if let error { throw error }
        guard pixels > 0, elapsed > 0 else {
            throw CalibrationError(operation: "measure the \(codec.rawValue) encoder in", path: directory.path, reason: "no frame was encoded")
        }
        return Calibration.CodecRate(pixelsPerSecond: Double(pixels) / elapsed, bytesPerPixel: Double(bytes) / Double(pixels))
    }

    /// One writer's share: the moving test pattern (with its stripe, as a synthetic camera paints it) encoded into
    /// `path` until `deadline`; the file is removed afterwards.
    private static func encode(_ codec: VideoCodec, ordinal: UInt8, path: String, deadline: Int64,
                               capBytes: UInt64) throws -> (pixels: UInt64, bytes: UInt64) {
        defer { unlink(path) }
        // The defaults CameraRecorder records with: quality 3, no encoder threads.
        let writer = try MatroskaWriter(path: path, width: width, height: height, fps: fps, codec: codec)
        let frame = PlanarFrame(width: width, height: height)
        let period = Int64(1_000_000 / fps)
        var counter: UInt32 = 0
        repeat {
            let pts = Int64(counter) * period
            TestPattern.paint(into: frame, frameCounter: counter, ordinal: ordinal)
            SyncStripe(ordinal: ordinal, frameCounter: counter, trueCenterMicroseconds: pts).paint(into: frame)
            try writer.write(frame, ptsMicroseconds: pts)
            counter &+= 1
        } while MonotonicClock.now() < deadline && fileSize(path) < capBytes
        try writer.finish()
        return (UInt64(counter) * UInt64(width * height), fileSize(path))
    }

    /// Tells apart the files of two measurements running at once (in one process, or two).
    private static func uniqueSuffix() -> String {
        "\(getpid())-\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"
    }

    private static func fileSize(_ path: String) -> UInt64 {
        var info = stat()
        return stat(path, &info) == 0 ? UInt64(info.st_size) : 0
    }

    /// What the encoding threads report back.
    private final class Tally: Sendable {
        private struct Counts { var pixels: UInt64 = 0, bytes: UInt64 = 0; var error: (any Error)? }
        private let counts = Mutex(Counts())

        func add(pixels: UInt64, bytes: UInt64) {
            counts.withLock { $0.pixels += pixels; $0.bytes += bytes }
        }

        func fail(_ error: sending any Error) {
            counts.withLock { if $0.error == nil { $0.error = error } }
        }

        /// Pixels, bytes, and the first failure.
        var result: (UInt64, UInt64, (any Error)?) { counts.withLock { ($0.pixels, $0.bytes, $0.error) } }
    }
}

/// Why calibrating, or reading or writing a calibration file, failed: one sentence naming the file.
public struct CalibrationError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What was being attempted, phrased to read "cannot <operation> <path>".
    public let operation: String
    public let path: String
    public let reason: String

    public init(operation: String, path: String, reason: String) {
        self.operation = operation; self.path = path; self.reason = reason
    }

    init(operation: String, path: String, errno code: Int32) {
        self.init(operation: operation, path: path, reason: "\(POSIX.text(code)) (errno \(code))")
    }

    public var description: String {
        var reason = self.reason
        while reason.hasSuffix(".") { reason.removeLast() }
        return "cannot \(operation) \(path): \(reason)."
    }
}

extension Calibration {
    /// Reads a calibration file, refusing one of another format or one that does not decode.
    public static func load(from url: URL) throws -> Calibration {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw CalibrationError(operation: "read calibration file", path: url.path, reason: reason(error))
        }
        // The format first: a file of another version is refused as such, not as a list of missing keys.
        struct Header: Decodable { var format: String? }
        let decoder = JSONDecoder()
        let header: Header
        do {
            header = try decoder.decode(Header.self, from: data)
        } catch {
            throw CalibrationError(operation: "load calibration file", path: url.path, reason: "it is not a JSON object")
        }
        guard header.format == Calibration.formatV1 else {
            let found = header.format.map { "\"\($0)\"" } ?? "missing"
            throw CalibrationError(operation: "load calibration file", path: url.path,
                                   reason: "its format is \(found), not \"\(Calibration.formatV1)\"")
        }
        do {
            return try decoder.decode(Calibration.self, from: data)
        } catch let error as DecodingError {
            throw CalibrationError(operation: "load calibration file", path: url.path, reason: explain(error))
        } catch {
            throw CalibrationError(operation: "load calibration file", path: url.path, reason: "\(error)")
        }
    }

    /// Writes the calibration as pretty, sorted JSON; atomically, so a reader sees the old file or the new one.
    public func save(to url: URL) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data: Data
        do {
            data = try encoder.encode(self) + Data("\n".utf8)
        } catch {
            throw CalibrationError(operation: "write calibration file", path: url.path, reason: "a figure is not a finite number")
        }
        let temporary = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(getpid()).tmp").path
        let fd: Int32
        do { fd = try POSIX.retryingEINTR("open") { open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644) } } catch {
            throw CalibrationError(operation: "write calibration file", path: url.path, errno: error.errno)
        }
        var renamed = false
        defer { if !renamed { unlink(temporary) } }
        do {
            defer { close(fd) }
            try data.withUnsafeBytes { try Calibrator.writeAll(fd, $0, path: url.path) }
            // Synced before the rename: after a crash the file is the old one or the whole new one, never empty.
            do { try POSIX.retryingEINTR("fsync") { fsync(fd) } } catch {
                throw CalibrationError(operation: "write calibration file", path: url.path, errno: error.errno)
            }
        }
        do { try POSIX.retryingEINTR("rename") { rename(temporary, url.path) } } catch {
            throw CalibrationError(operation: "write calibration file", path: url.path, errno: error.errno)
        }
        renamed = true
    }

    private static func explain(_ error: DecodingError) -> String {
        func at(_ path: [CodingKey]) -> String { path.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".") }
        switch error {
        case .keyNotFound(let key, let context):
            let parent = at(context.codingPath)
            return "it has no \"\(parent.isEmpty ? key.stringValue : parent + "." + key.stringValue)\""
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return "\"\(at(context.codingPath))\" has the wrong type"
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty ? "it is not valid JSON" : "\"\(at(context.codingPath))\" is not valid"
        @unknown default:
            return "it does not decode"
        }
    }
}
