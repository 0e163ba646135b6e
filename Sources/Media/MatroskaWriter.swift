import CFFmpeg

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension MediaError {
    /// A failed libav call as one sentence, with FFmpeg's own words for `code`.
    init(ffmpeg code: Int32, operation: String, path: String, call: String) {
        var buffer = [CChar](repeating: 0, count: Int(cff_AV_ERROR_MAX_STRING_SIZE))
        _ = cff_err2str(code, &buffer, buffer.count)
        self.init(operation: operation, path: path, call: call, code: code, reason: String(cString: buffer))
    }
}

/// The encodings a recording can use.
public enum VideoCodec: String, CaseIterable, Sendable {
    /// Motion JPEG, yuvj420p, fixed quantiser `quality` (like `ffmpeg -q:v`).
    case mjpeg
    /// FFV1 (lossless), yuv420p, every frame a keyframe so any packet can be repeated or cut at.
    case ffv1
    /// H.264 via libx264 (preset ultrafast, CRF 17 + 2·quality, a keyframe every second), yuv420p.
    case h264
}

/// Encodes planar frames into a Matroska file with libavformat. The only Swift file that calls av_* functions.
///
/// Not thread-safe: one writer is driven by one task. Packets reach the disk as each Matroska cluster closes
/// (at each keyframe once the cluster exceeds 4 KiB, and at least every `clusterMilliseconds`), so a crashed node
/// leaves a file that plays up to about a second before the crash.
public final class MatroskaWriter {
    public let path: String
    public let width: Int, height: Int, fps: Int
    public let codec: VideoCodec
    public let quality: Int
    /// Pictures accepted so far, counting repeats.
    public private(set) var framesWritten: Int = 0

    private var formatContext: UnsafeMutablePointer<AVFormatContext>?
    private var codecContext: UnsafeMutablePointer<AVCodecContext>?
    private var stream: UnsafeMutablePointer<AVStream>?
    /// Two input frames used in turn: an encoder may keep a reference to the last one (ffv1 does) and the next
    /// picture then goes into the other instead of a fresh allocation.
    private var frames: [UnsafeMutablePointer<AVFrame>] = []
    /// Index in `frames` of the last picture sent (re-sent by an h264 repeat).
    private var current = 0
    private var packet: UnsafeMutablePointer<AVPacket>?
    /// The last packet written (intra codecs only), re-muxed by `writeRepeat`.
    private var lastPacket: UnsafeMutablePointer<AVPacket>?
    private var hasPicture = false
    private var lastPts: Int64 = .min
    private var headerWritten = false
    private var finished = false
    private var createdFile = false

    /// µs: the codec sees exact capture times; the muxer rescales to Matroska's 1 ms.
    private static let codecTimeBase = AVRational(num: 1, den: 1_000_000)
    /// Longest span of frames held in the muxer's cluster buffer before it reaches the file.
    public static let clusterMilliseconds = 1000
    private let frameDuration: Int64
    private let frameQuality: Int32
    private var isIntraOnly: Bool { codec != .h264 }

    /// Opens `path` for writing (truncating it) and writes the Matroska header with `metadata` as global tags; a
    /// `timecode` entry (`HH:MM:SS:FF` of the first frame) is also the video track's tag.
    ///
    /// - Parameters:
    ///   - quality: 1…31. mjpeg: the fixed quantiser (3 ≈ `ffmpeg -q:v 3`); h264: CRF 17 + 2·quality; ffv1: unused.
    public init(path: String, width: Int, height: Int, fps: Int, codec: VideoCodec, quality: Int = 3,
                metadata: [String: String] = [:]) throws {
        self.path = path
        self.width = width
        self.height = height
        self.fps = fps
        self.codec = codec
        self.quality = quality
        frameDuration = fps > 0 ? 1_000_000 / Int64(fps) : 0
        frameQuality = Int32(clamping: quality) &* cff_FF_QP2LAMBDA
        do {
            try validate()
            try open(metadata: metadata)
        } catch {
            finished = true
            release()
            if createdFile { unlink(path) }
            throw error
        }
    }

    deinit {
        if !finished { try? finish() }
        release()
    }

    // MARK: - Writing

    /// Encode `picture` with presentation time `ptsMicroseconds` (relative to the file start; strictly increasing).
    public func write(_ picture: PlanarFrame, ptsMicroseconds: Int64) throws {
        try checkWritable(pts: ptsMicroseconds)
        guard picture.width == width, picture.height == height else {
            throw inputError("encode a frame into",
                             "the frame is \(picture.width)×\(picture.height) but the recording is \(width)×\(height)")
        }
        guard frames.count == 2, let codecContext else { throw closedError() }
        let next = hasPicture ? 1 - current : current
        let frame = frames[next]
        if av_frame_is_writable(frame) == 0 {
            // Still referenced by the encoder (not seen with these codecs): take a fresh buffer, not a copy.
            av_frame_unref(frame)
            try setUpFrameBuffer(frame, codecContext)
        }
        let f = frame.pointee
        av_image_copy_plane(f.data.0, f.linesize.0, picture.luma.baseAddress, Int32(width), Int32(width), Int32(height))
        av_image_copy_plane(f.data.1, f.linesize.1, picture.cb.baseAddress, Int32(width / 2), Int32(width / 2),
                            Int32(height / 2))
        av_image_copy_plane(f.data.2, f.linesize.2, picture.cr.baseAddress, Int32(width / 2), Int32(width / 2),
                            Int32(height / 2))
        try encode(frame, pts: ptsMicroseconds)
        current = next
        hasPicture = true
    }

    /// Write a repeat of the previously written picture at `ptsMicroseconds`: intra codecs (mjpeg, ffv1) re-mux the
    /// last packet; h264 re-encodes the last picture. Throws if nothing was written yet.
    public func writeRepeat(ptsMicroseconds: Int64) throws {
        try checkWritable(pts: ptsMicroseconds)
        guard hasPicture else {
            throw inputError("repeat a frame in", "no frame has been written yet")
        }
        guard frames.count == 2, let formatContext, let stream else { throw closedError() }
        if isIntraOnly, let lastPacket, lastPacket.pointee.size > 0 {
            let ts = av_rescale_q(ptsMicroseconds, Self.codecTimeBase, stream.pointee.time_base)
            lastPacket.pointee.pts = ts
            lastPacket.pointee.dts = ts
            lastPacket.pointee.duration = av_rescale_q(frameDuration, Self.codecTimeBase, stream.pointee.time_base)
            lastPacket.pointee.pos = -1
            // av_write_frame leaves the caller's packet untouched, so lastPacket stays reusable.
            try check(av_write_frame(formatContext, lastPacket), "write a frame to", "av_write_frame")
            lastPts = ptsMicroseconds
            framesWritten += 1
        } else {
            try encode(frames[current], pts: ptsMicroseconds)
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
        guard let base = bytes.baseAddress, bytes.count > 0, bytes.count < Int(Int32.max) else {
            throw inputError("mux a JPEG packet into", "the packet is empty")
        }
        guard let formatContext, let stream, let packet, let lastPacket else { throw closedError() }
        try check(av_new_packet(packet, Int32(bytes.count)), "mux a JPEG packet into", "av_new_packet")
        memcpy(packet.pointee.data, base, bytes.count)
        let ts = av_rescale_q(ptsMicroseconds, Self.codecTimeBase, stream.pointee.time_base)
        packet.pointee.pts = ts
        packet.pointee.dts = ts
        packet.pointee.duration = av_rescale_q(frameDuration, Self.codecTimeBase, stream.pointee.time_base)
        packet.pointee.flags |= cff_AV_PKT_FLAG_KEY
        packet.pointee.stream_index = stream.pointee.index
        let w = av_write_frame(formatContext, packet)
        if w >= 0 {
            // Kept for `writeRepeat`, as an encoded intra packet is.
            av_packet_unref(lastPacket)
            av_packet_move_ref(lastPacket, packet)
        } else {
            av_packet_unref(packet)
        }
        try check(w, "write a frame to", "av_write_frame")
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
        var firstError: Error?
        if headerWritten, let formatContext, let codecContext {
            do {
                try check(avcodec_send_frame(codecContext, nil), "finish", "avcodec_send_frame")
                try drainPackets()
            } catch { firstError = error }
            let r = av_write_trailer(formatContext)
            if r < 0, firstError == nil { firstError = avError("finish", "av_write_trailer", r) }
        }
        if let formatContext, formatContext.pointee.pb != nil {
            let r = avio_closep(&formatContext.pointee.pb)
            if r < 0, firstError == nil { firstError = avError("close", "avio_closep", r) }
        }
        release()
        if let firstError { throw firstError }
    }

    // MARK: - Set-up

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

    /// The mjpeg encoder's settings, shared by the writer and `JPEGEncoder`: full-range yuvj420p at a fixed
    /// quantiser (`quality`, 1…31).
    static func configureJPEG(_ cc: UnsafeMutablePointer<AVCodecContext>, quality: Int) {
        cc.pointee.pix_fmt = AV_PIX_FMT_YUVJ420P
        cc.pointee.color_range = AVCOL_RANGE_JPEG
        cc.pointee.flags |= cff_AV_CODEC_FLAG_QSCALE
        cc.pointee.global_quality = Int32(clamping: quality) &* cff_FF_QP2LAMBDA
        cc.pointee.qmin = Int32(quality)
        cc.pointee.qmax = Int32(quality)
    }

    private func open(metadata: [String: String]) throws {
        cff_log_quiet()
        var fc: UnsafeMutablePointer<AVFormatContext>?
        try check(avformat_alloc_output_context2(&fc, nil, "matroska", path), "create", "avformat_alloc_output_context2")
        guard let fc else { throw avError("create", "avformat_alloc_output_context2", cff_AVERROR_ENOMEM) }
        formatContext = fc

        let encoder: UnsafePointer<AVCodec>?
        switch codec {
        case .mjpeg: encoder = avcodec_find_encoder(AV_CODEC_ID_MJPEG)
        case .ffv1: encoder = avcodec_find_encoder(AV_CODEC_ID_FFV1)
        case .h264: encoder = avcodec_find_encoder_by_name("libx264")
        }
        guard let encoder else {
            throw avError("set up the \(codec.rawValue) encoder for", "avcodec_find_encoder",
                          cff_AVERROR_ENCODER_NOT_FOUND)
        }
        guard let cc = avcodec_alloc_context3(encoder) else {
            throw avError("set up the \(codec.rawValue) encoder for", "avcodec_alloc_context3", cff_AVERROR_ENOMEM)
        }
        codecContext = cc
        cc.pointee.width = Int32(width)
        cc.pointee.height = Int32(height)
        cc.pointee.time_base = Self.codecTimeBase
        cc.pointee.framerate = AVRational(num: Int32(fps), den: 1)
        // The node runs one writer per camera on a small machine: no encoder threads.
        cc.pointee.thread_count = 1
        switch codec {
        case .mjpeg:
            Self.configureJPEG(cc, quality: quality)
        case .ffv1:
            cc.pointee.pix_fmt = AV_PIX_FMT_YUV420P
            // FFV1 carries coder state across non-key frames; gop 1 makes every packet self-contained.
            cc.pointee.gop_size = 1
        case .h264:
            cc.pointee.pix_fmt = AV_PIX_FMT_YUV420P
            cc.pointee.gop_size = Int32(fps)
            cc.pointee.max_b_frames = 0
            try check(cff_opt_set_child(cc, "preset", "ultrafast"), "set up the h264 encoder for", "av_opt_set(preset)")
            try check(cff_opt_set_child(cc, "crf", String(17 + 2 * quality)), "set up the h264 encoder for",
                      "av_opt_set(crf)")
        }
        if fc.pointee.oformat.pointee.flags & cff_AVFMT_GLOBALHEADER != 0 {
            cc.pointee.flags |= cff_AV_CODEC_FLAG_GLOBAL_HEADER
        }
        try check(avcodec_open2(cc, encoder, nil), "set up the \(codec.rawValue) encoder for", "avcodec_open2")

        guard let st = avformat_new_stream(fc, nil) else {
            throw avError("create", "avformat_new_stream", cff_AVERROR_ENOMEM)
        }
        stream = st
        st.pointee.time_base = AVRational(num: 1, den: 1000)
        st.pointee.avg_frame_rate = AVRational(num: Int32(fps), den: 1)
        st.pointee.r_frame_rate = AVRational(num: Int32(fps), den: 1)
        try check(avcodec_parameters_from_context(st.pointee.codecpar, cc), "create", "avcodec_parameters_from_context")

        for key in metadata.keys.sorted() {
            try check(av_dict_set(&fc.pointee.metadata, key, metadata[key], 0), "create", "av_dict_set(\(key))")
        }
        // `ffmpeg -timecode` puts a Matroska file's timecode in the global tags, and remuxing to MOV takes it from there
        // or from the video track's tags (into a tmcd track); tools that read only stream tags find it here too.
        if let timecode = metadata["timecode"] {
            try check(av_dict_set(&st.pointee.metadata, "timecode", timecode, 0), "create", "av_dict_set(timecode)")
        }

        try check(avio_open(&fc.pointee.pb, path, cff_AVIO_FLAG_WRITE), "create", "avio_open")
        createdFile = true
        // Bytes leave the muxer only when a cluster closes: bound that to a second so a crash loses at most ~1 s.
        var options: OpaquePointer?
        defer { av_dict_free(&options) }
        try check(av_dict_set(&options, "cluster_time_limit", String(Self.clusterMilliseconds), 0), "create", "av_dict_set")
        // avio_flush after every packet (what `ffmpeg -flush_packets 1` does): one write(2) per closed cluster, and
        // av_write_frame then reports I/O errors. Measured the same CPU as calling avio_flush here by hand.
        fc.pointee.flush_packets = 1
        try check(avformat_write_header(fc, &options), "create", "avformat_write_header")
        headerWritten = true

        for _ in 0..<2 {
            guard let f = av_frame_alloc() else { throw avError("create", "av_frame_alloc", cff_AVERROR_ENOMEM) }
            frames.append(f)
            try setUpFrameBuffer(f, cc)
        }
        guard let p = av_packet_alloc(), let lp = av_packet_alloc() else {
            throw avError("create", "av_packet_alloc", cff_AVERROR_ENOMEM)
        }
        packet = p
        lastPacket = lp
    }

    private func setUpFrameBuffer(_ f: UnsafeMutablePointer<AVFrame>, _ cc: UnsafeMutablePointer<AVCodecContext>) throws {
        f.pointee.format = cc.pointee.pix_fmt.rawValue
        f.pointee.width = cc.pointee.width
        f.pointee.height = cc.pointee.height
        f.pointee.color_range = cc.pointee.color_range
        try check(av_frame_get_buffer(f, 0), "encode a frame into", "av_frame_get_buffer")
    }

    // MARK: - Hot path

    private func encode(_ f: UnsafeMutablePointer<AVFrame>, pts: Int64) throws {
        guard let codecContext else { throw closedError() }
        f.pointee.pts = pts
        f.pointee.pkt_duration = frameDuration
        f.pointee.quality = frameQuality
        try check(avcodec_send_frame(codecContext, f), "encode a frame into", "avcodec_send_frame")
        lastPts = pts
        framesWritten += 1
        try drainPackets()
    }

    /// Moves every packet the encoder has ready into the file.
    private func drainPackets() throws {
        guard let codecContext, let formatContext, let stream, let packet, let lastPacket else { throw closedError() }
        while true {
            let r = avcodec_receive_packet(codecContext, packet)
            if r == cff_EAGAIN_error || r == cff_AVERROR_EOF { return }
            try check(r, "encode a frame into", "avcodec_receive_packet")
            if packet.pointee.duration == 0 { packet.pointee.duration = frameDuration }
            av_packet_rescale_ts(packet, Self.codecTimeBase, stream.pointee.time_base)
            packet.pointee.stream_index = stream.pointee.index
            let w = av_write_frame(formatContext, packet)
            if isIntraOnly && w >= 0 {
                av_packet_unref(lastPacket)
                av_packet_move_ref(lastPacket, packet)
            } else {
                av_packet_unref(packet)
            }
            try check(w, "write a frame to", "av_write_frame")
        }
    }

    // MARK: - Errors and clean-up

    private func checkWritable(pts: Int64) throws {
        guard !finished, headerWritten else { throw closedError() }
        guard pts > lastPts else {
            throw inputError("encode a frame into", "the time \(pts) µs does not follow the previous frame's \(lastPts) µs")
        }
    }

    @discardableResult
    private func check(_ result: Int32, _ operation: String, _ call: String) throws -> Int32 {
        if result < 0 { throw avError(operation, call, result) }
        return result
    }

    private func avError(_ operation: String, _ call: String, _ code: Int32) -> MediaError {
        MediaError(ffmpeg: code, operation: operation, path: path, call: call)
    }

    private func inputError(_ operation: String, _ reason: String) -> MediaError {
        MediaError(operation: operation, path: path, call: nil, code: cff_AVERROR_EINVAL, reason: reason)
    }

    private func closedError() -> MediaError {
        inputError("write to", "the recording is already finished")
    }

    /// Frees every libav object; safe to call repeatedly.
    private func release() {
        for f in frames {
            var f: UnsafeMutablePointer<AVFrame>? = f
            av_frame_free(&f)
        }
        frames.removeAll()
        if packet != nil { av_packet_free(&packet) }
        if lastPacket != nil { av_packet_free(&lastPacket) }
        if codecContext != nil { avcodec_free_context(&codecContext) }
        if let fc = formatContext {
            if fc.pointee.pb != nil { avio_closep(&fc.pointee.pb) }
            avformat_free_context(fc)
            formatContext = nil
        }
        stream = nil
    }
}

/// Encodes single pictures as JPEG with libavcodec's mjpeg encoder (yuvj420p, fixed quantiser): what a scripted
/// MJPEG camera delivers, so the recorder's passthrough path gets real JPEG packets. Lives beside the writer
/// because this file is the only one that calls av_* functions. Not thread-safe.
public final class JPEGEncoder {
    public let width: Int, height: Int
    private var codecContext: UnsafeMutablePointer<AVCodecContext>?
    private var frame: UnsafeMutablePointer<AVFrame>?
    private var packet: UnsafeMutablePointer<AVPacket>?
    private var pts: Int64 = 0
    private let frameQuality: Int32

    /// - Parameter quality: 1…31, the fixed quantiser (as `ffmpeg -q:v`).
    public init(width: Int, height: Int, quality: Int = 3) throws {
        self.width = width
        self.height = height
        frameQuality = Int32(clamping: quality) &* cff_FF_QP2LAMBDA
        guard width > 0, height > 0, width % 2 == 0, height % 2 == 0, (1...31).contains(quality) else {
            throw MediaError(operation: "set up the JPEG encoder for", path: nil, code: cff_AVERROR_EINVAL,
                             reason: "the size \(width)×\(height) must be even and positive and the quality 1…31")
        }
        cff_log_quiet()
        guard let encoder = avcodec_find_encoder(AV_CODEC_ID_MJPEG) else {
            throw MediaError(operation: "set up the JPEG encoder for", path: nil, call: "avcodec_find_encoder",
                             code: cff_AVERROR_ENCODER_NOT_FOUND, reason: "no mjpeg encoder in this libavcodec")
        }
        do {
            guard let cc = avcodec_alloc_context3(encoder) else { throw failure("avcodec_alloc_context3", cff_AVERROR_ENOMEM) }
            codecContext = cc
            cc.pointee.width = Int32(width)
            cc.pointee.height = Int32(height)
            cc.pointee.time_base = AVRational(num: 1, den: 1_000_000)
            MatroskaWriter.configureJPEG(cc, quality: quality)
            cc.pointee.thread_count = 1
            var r = avcodec_open2(cc, encoder, nil)
            if r < 0 { throw failure("avcodec_open2", r) }
            guard let f = av_frame_alloc(), let p = av_packet_alloc() else { throw failure("av_frame_alloc", cff_AVERROR_ENOMEM) }
            frame = f
            packet = p
            f.pointee.format = cc.pointee.pix_fmt.rawValue
            f.pointee.width = cc.pointee.width
            f.pointee.height = cc.pointee.height
            f.pointee.color_range = cc.pointee.color_range
            r = av_frame_get_buffer(f, 0)
            if r < 0 { throw failure("av_frame_get_buffer", r) }
        } catch {
            release()
            throw error
        }
    }

    deinit { release() }

    /// Encodes `picture` (this encoder's size) into `out`; returns the JPEG's length in bytes.
    public func encode(_ picture: PlanarFrame, into out: UnsafeMutableRawBufferPointer) throws -> Int {
        guard picture.width == width, picture.height == height else {
            throw MediaError(operation: "encode a JPEG", path: nil, code: cff_AVERROR_EINVAL,
                             reason: "the picture is \(picture.width)×\(picture.height) but the encoder is \(width)×\(height)")
        }
        guard let cc = codecContext, let f = frame, let p = packet else {
            throw MediaError(operation: "encode a JPEG", path: nil, code: cff_AVERROR_EINVAL, reason: "the encoder is closed")
        }
        if av_frame_is_writable(f) == 0 {
            let r = av_frame_make_writable(f)
            if r < 0 { throw failure("av_frame_make_writable", r) }
        }
        let fr = f.pointee
        av_image_copy_plane(fr.data.0, fr.linesize.0, picture.luma.baseAddress, Int32(width), Int32(width), Int32(height))
        av_image_copy_plane(fr.data.1, fr.linesize.1, picture.cb.baseAddress, Int32(width / 2), Int32(width / 2), Int32(height / 2))
        av_image_copy_plane(fr.data.2, fr.linesize.2, picture.cr.baseAddress, Int32(width / 2), Int32(width / 2), Int32(height / 2))
        f.pointee.pts = pts
        f.pointee.quality = frameQuality
        pts += 1
        var r = avcodec_send_frame(cc, f)
        if r < 0 { throw failure("avcodec_send_frame", r) }
        r = avcodec_receive_packet(cc, p)
        if r < 0 { throw failure("avcodec_receive_packet", r) }
        defer { av_packet_unref(p) }
        let size = Int(p.pointee.size)
        guard size <= out.count, let dst = out.baseAddress else {
            throw MediaError(operation: "encode a JPEG", path: nil, code: cff_AVERROR_EINVAL,
                             reason: "the JPEG takes \(size) bytes but the buffer holds \(out.count)")
        }
        memcpy(dst, p.pointee.data, size)
        return size
    }

    private func failure(_ call: String, _ code: Int32) -> MediaError {
        var buffer = [CChar](repeating: 0, count: Int(cff_AV_ERROR_MAX_STRING_SIZE))
        _ = cff_err2str(code, &buffer, buffer.count)
        return MediaError(operation: "encode a JPEG", path: nil, call: call, code: code, reason: String(cString: buffer))
    }

    private func release() {
        if frame != nil { av_frame_free(&frame) }
        if packet != nil { av_packet_free(&packet) }
        if codecContext != nil { avcodec_free_context(&codecContext) }
    }
}
