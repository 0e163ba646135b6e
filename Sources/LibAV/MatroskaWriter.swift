import CoordCore
import Pixels

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Encodes planar frames into a Matroska file, through the `Muxer` (the one file that calls libav).
///
/// Not thread-safe: one writer is driven by one task. Packets reach the disk as each Matroska cluster closes
/// (at each keyframe once the cluster exceeds 4 KiB, and at least every `clusterMilliseconds`), so a crashed node
/// leaves a file that plays up to about a second before the crash.
public final class MatroskaWriter {
    public let path: String
    public let width: Int, height: Int, fps: Int
    /// The exact rate (30000/1001), written as the track's frame rate; `fps` is its whole rate.
    public let rate: FrameRate
    public let codec: VideoCodec
    public let quality: Int
    /// Pictures accepted so far, counting repeats.
    public private(set) var framesWritten: Int = 0

    private var muxer: Muxer?
    private var encoder: VideoEncoder?
    private var hasPicture = false
    private var lastPts: Int64 = .min
    private var finished = false

    /// Longest span of frames held in the muxer's cluster buffer before it reaches the file.
    public static let clusterMilliseconds = 1000
    private let frameDuration: Int64
    private var isIntraOnly: Bool { codec != .h264 }

    /// Opens `path` for writing (truncating it) and writes the Matroska header with `metadata` as global tags; a
    /// `timecode` entry (`HH:MM:SS:FF` of the first frame) is also the video track's tag.
    ///
    /// - Parameters:
    ///   - quality: 1…31. mjpeg: the fixed quantiser (3 ≈ `ffmpeg -q:v 3`); h264: CRF 17 + 2·quality; ffv1: unused.
    public convenience init(path: String, width: Int, height: Int, fps: Int, codec: VideoCodec, quality: Int = 3,
                            metadata: [String: String] = [:]) throws {
        try self.init(path: path, width: width, height: height, rate: FrameRate(numerator: fps, denominator: 1), asked: fps,
                      codec: codec, quality: quality, metadata: metadata, calls: .system)
    }

    /// The same at a rational `rate` (30000/1001): the track's frame rate is the rational (CONTRACT §13).
    public convenience init(path: String, width: Int, height: Int, rate: FrameRate, codec: VideoCodec, quality: Int = 3,
                            metadata: [String: String] = [:]) throws {
        try self.init(path: path, width: width, height: height, rate: rate, asked: rate.nominal, codec: codec, quality: quality,
                      metadata: metadata, calls: .system)
    }

    /// `calls`: the disk calls the file is written with (a test's full disk).
    convenience init(path: String, width: Int, height: Int, fps: Int, codec: VideoCodec, quality: Int = 3,
         metadata: [String: String] = [:], calls: DiskCalls) throws {
        try self.init(path: path, width: width, height: height, rate: FrameRate(numerator: fps, denominator: 1), asked: fps,
                      codec: codec, quality: quality, metadata: metadata, calls: calls)
    }

    /// A nil `rate` (the `asked` fps was not positive) is refused by `validate` as before.
    private init(path: String, width: Int, height: Int, rate: FrameRate?, asked: Int, codec: VideoCodec, quality: Int,
                 metadata: [String: String], calls: DiskCalls) throws {
        self.path = path
        self.width = width
        self.height = height
        self.fps = rate?.nominal ?? asked
        self.rate = rate ?? FrameRate(1)
        self.codec = codec
        self.quality = quality
        frameDuration = rate.map { Int64($0.exactPeriodMicroseconds) } ?? 0
        let rate = self.rate
        do {
            try validate()
            let muxer = try Muxer(path: path, calls: calls)
            self.muxer = muxer
            let encoder = try VideoEncoder(codec: codec, width: width, height: height, rate: rate, quality: quality, for: muxer)
            self.encoder = encoder
            try muxer.addVideoStream(encoder, rate: rate, timecode: metadata["timecode"])
            try muxer.setMetadata(metadata)
            try muxer.open(clusterMilliseconds: Self.clusterMilliseconds)
        } catch {
            finished = true
            let created = muxer?.createdFile == true
            release()
            if created { unlink(path) }
            throw error
        }
    }

    deinit {
        if !finished { try? finish() }
        release()
    }

    // MARK: - Writing

    /// The disk is full: the file could not hold the space it keeps to be finished in. The frames written so far are
    /// all kept: take no more, and `finish` now (it writes into the space still held).
    public var isShortOfSpace: Bool { muxer?.isShortOfSpace ?? false }
    /// Why, in the system's words ("No space left on device"), once `isShortOfSpace`.
    public var spaceReason: String? {
        guard let code = muxer?.spaceErrno, code != 0 else { return nil }
        return String(cString: strerror(code))
    }

    /// Encode `picture` with presentation time `ptsMicroseconds` (relative to the file start; strictly increasing).
    public func write(_ picture: PlanarFrame, ptsMicroseconds: Int64) throws {
        try checkWritable(pts: ptsMicroseconds)
        guard picture.width == width, picture.height == height else {
            throw inputError("encode a frame into",
                             "the frame is \(picture.width)×\(picture.height) but the recording is \(width)×\(height)")
        }
        guard let encoder, let muxer else { throw closedError() }
        let next = try encoder.send(picture, pts: ptsMicroseconds, duration: frameDuration, alternate: hasPicture)
        lastPts = ptsMicroseconds
        framesWritten += 1
        try muxer.writeEncoded(from: encoder, frameDuration: frameDuration, keep: isIntraOnly)
        encoder.settle(on: next)
        hasPicture = true
    }

    /// Write a repeat of the previously written picture at `ptsMicroseconds`: intra codecs (mjpeg, ffv1) re-mux the
    /// last packet; h264 re-encodes the last picture. Throws if nothing was written yet.
    public func writeRepeat(ptsMicroseconds: Int64) throws {
        try checkWritable(pts: ptsMicroseconds)
        guard hasPicture else {
            throw inputError("repeat a frame in", "no frame has been written yet")
        }
        guard let encoder, let muxer else { throw closedError() }
        if isIntraOnly, muxer.hasKeptPacket {
            try muxer.writeRepeat(pts: ptsMicroseconds, duration: frameDuration, timeBase: .microseconds)
            lastPts = ptsMicroseconds
            framesWritten += 1
        } else {
            try encoder.resend(pts: ptsMicroseconds, duration: frameDuration)
            lastPts = ptsMicroseconds
            framesWritten += 1
            try muxer.writeEncoded(from: encoder, frameDuration: frameDuration, keep: isIntraOnly)
        }
    }

    /// Mux one complete JPEG as the next frame at `ptsMicroseconds`, exactly as the camera sent it: no decode, no
    /// re-encode (MJPEG passthrough). Only an mjpeg recording takes packets; `writeRepeat` re-muxes it as for an
    /// encoded frame, and `write` may still encode a picture between packets (every MJPEG packet stands alone).
    public func writePacket(_ bytes: UnsafeRawBufferPointer, ptsMicroseconds: Int64) throws {
        try checkWritable(pts: ptsMicroseconds)
        guard codec == .mjpeg else {
            throw inputError("mux a JPEG packet into", "the recording is \(codec.rawValue), and only an mjpeg recording takes camera packets as they are")
        }
        guard bytes.baseAddress != nil, bytes.count > 0, bytes.count < Int(Int32.max) else {
            throw inputError("mux a JPEG packet into", "the packet is empty")
        }
        guard let muxer else { throw closedError() }
        // Kept for `writeRepeat`, as an encoded intra packet is.
        try muxer.write(bytes, pts: ptsMicroseconds, duration: frameDuration, timeBase: .microseconds, keep: true,
                        allocating: "mux a JPEG packet into", writing: "write a frame to")
        lastPts = ptsMicroseconds
        framesWritten += 1
        hasPicture = true
    }

    /// `writePacket` for bytes in an array.
    public func writePacket(_ bytes: [UInt8], ptsMicroseconds: Int64) throws {
        try bytes.withUnsafeBytes { try writePacket($0, ptsMicroseconds: ptsMicroseconds) }
    }

    /// Flush the encoder, write the trailer, close the file. Idempotent.
    public func finish() throws {
        if finished { return }
        finished = true
        defer { release() }
        wholeClustersEnd = muxer?.wholeClustersEnd ?? 0
        try muxer?.finish(flushing: encoder, frameDuration: frameDuration, keep: isIntraOnly)
    }

    /// Where the file's last whole cluster ends, as last known (kept once finished).
    private var wholeClustersEnd: Int64 = 0

    /// After a `finish` that failed (the disk took no more, so no index and no trailer): cuts the file after its last
    /// whole cluster, so it ends on a whole frame and plays to its end without complaint, and returns the whole
    /// frames it holds then. Throws when the file cannot be cut or read back (a read-only disk).
    public func cutToWholeFrames() throws(MediaError) -> Int {
        let end = muxer?.wholeClustersEnd ?? wholeClustersEnd
        if end > 0, truncate(path, off_t(end)) != 0 {
            let code = errno
            throw MediaError(operation: "cut", path: path, call: "truncate", code: -code, reason: String(cString: strerror(code)))
        }
        return try MatroskaRepair.wholeFrames(path: path)
    }

    // MARK: - Checks and clean-up

    private func validate() throws {
        guard width > 0, height > 0, width % 2 == 0, height % 2 == 0, width <= 16384, height <= 16384 else {
            throw inputError("create", "the size \(width)×\(height) is invalid; width and height must be even and 2…16384")
        }
        guard (1...1000).contains(fps) else {
            throw inputError("create", "the frame rate \(fps) is invalid; it must be 1…1000")
        }
        guard (1...31).contains(quality) else {
            throw inputError("create", "the quality \(quality) is invalid; it must be 1…31")
        }
    }

    private func checkWritable(pts: Int64) throws {
        guard !finished, muxer?.headerWritten == true else { throw closedError() }
        guard pts > lastPts else {
            throw inputError("encode a frame into", "the time \(pts) µs does not follow the previous frame's \(lastPts) µs")
        }
    }

    private func inputError(_ operation: String, _ reason: String) -> MediaError {
        MediaError.invalid(operation, path: path, reason)
    }

    private func closedError() -> MediaError {
        inputError("write to", "the recording is already finished")
    }

    /// Frees the encoder and the muxer; safe to call repeatedly.
    private func release() {
        encoder?.release()
        encoder = nil
        muxer?.release()
        muxer = nil
    }
}
