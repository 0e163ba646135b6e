import CoordCore
import CFFmpeg
import Pixels

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A video encoder (mjpeg, ffv1 or libx264) feeding a `Muxer`, with two input frames used in turn: an encoder may
/// keep a reference to the last one (ffv1 does) and the next picture then goes into the other instead of a fresh
/// allocation.
final class VideoEncoder {
    private(set) var context: UnsafeMutablePointer<AVCodecContext>?
    private var frames: [UnsafeMutablePointer<AVFrame>] = []
    /// Index in `frames` of the last picture sent (re-sent by an h264 repeat).
    private(set) var current = 0
    private let path: String
    private let frameQuality: Int32

    /// `quality` 1…31: mjpeg's fixed quantiser, h264's CRF 17 + 2·quality; ffv1 ignores it. `muxer` says whether the
    /// codec's headers go out of band.
    init(codec: VideoCodec, width: Int, height: Int, rate: FrameRate, quality: Int, for muxer: Muxer) throws(MediaError) {
        path = muxer.path
        frameQuality = Int32(clamping: quality) &* cff_FF_QP2LAMBDA
        do throws(MediaError) {
            try open(codec: codec, width: width, height: height, rate: rate, quality: quality, globalHeader: muxer.wantsGlobalHeader)
        } catch {
            release()
            throw error
        }
    }

    deinit { release() }

    private func open(codec: VideoCodec, width: Int, height: Int, rate: FrameRate, quality: Int, globalHeader: Bool) throws(MediaError) {
        let encoder: UnsafePointer<AVCodec>?
        switch codec {
        case .mjpeg: encoder = avcodec_find_encoder(AV_CODEC_ID_MJPEG)
        case .ffv1: encoder = avcodec_find_encoder(AV_CODEC_ID_FFV1)
        case .h264: encoder = avcodec_find_encoder_by_name("libx264")
        }
        let setUp = "set up the \(codec.rawValue) encoder for"
        guard let encoder else { throw failure(setUp, "avcodec_find_encoder", cff_AVERROR_ENCODER_NOT_FOUND) }
        guard let cc = avcodec_alloc_context3(encoder) else { throw failure(setUp, "avcodec_alloc_context3", cff_AVERROR_ENOMEM) }
        context = cc
        cc.pointee.width = Int32(width)
        cc.pointee.height = Int32(height)
        cc.pointee.time_base = TimeBase.microseconds.rational
        cc.pointee.framerate = AVRational(num: Int32(rate.numerator), den: Int32(rate.denominator))
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
            cc.pointee.gop_size = Int32(rate.nominal)
            cc.pointee.max_b_frames = 0
            try check(cff_opt_set_child(cc, "preset", "ultrafast"), "set up the h264 encoder for", "av_opt_set(preset)")
            try check(cff_opt_set_child(cc, "crf", String(17 + 2 * quality)), "set up the h264 encoder for", "av_opt_set(crf)")
        }
        if globalHeader { cc.pointee.flags |= cff_AV_CODEC_FLAG_GLOBAL_HEADER }
        try check(avcodec_open2(cc, encoder, nil), setUp, "avcodec_open2")
        for _ in 0..<2 {
            guard let f = av_frame_alloc() else { throw failure("create", "av_frame_alloc", cff_AVERROR_ENOMEM) }
            frames.append(f)
            try setUpFrameBuffer(f, cc)
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

    /// Copies `picture` into the next input frame (the other one once a picture was sent: `alternate`) and sends
    /// it at `pts` (µs); returns the frame's index, to `settle(on:)` once its packets are in the file.
    func send(_ picture: PlanarFrame, pts: Int64, duration: Int64, alternate: Bool) throws(MediaError) -> Int {
        guard frames.count == 2, let cc = context else {
            throw MediaError.invalid("write to", path: path, "the recording is already finished")
        }
        let next = alternate ? 1 - current : current
        let frame = frames[next]
        if av_frame_is_writable(frame) == 0 {
            // Still referenced by the encoder (not seen with these codecs): take a fresh buffer, not a copy.
            av_frame_unref(frame)
            try setUpFrameBuffer(frame, cc)
        }
        let f = frame.pointee
        let (width, height) = (picture.width, picture.height)
        av_image_copy_plane(f.data.0, f.linesize.0, picture.luma.baseAddress, Int32(width), Int32(width), Int32(height))
        av_image_copy_plane(f.data.1, f.linesize.1, picture.cb.baseAddress, Int32(width / 2), Int32(width / 2), Int32(height / 2))
        av_image_copy_plane(f.data.2, f.linesize.2, picture.cr.baseAddress, Int32(width / 2), Int32(width / 2), Int32(height / 2))
        try send(frame: next, pts: pts, duration: duration)
        return next
    }

    /// The picture in frame `index` is the last one sent.
    func settle(on index: Int) { current = index }

    /// Sends the last picture again at `pts` (µs).
    func resend(pts: Int64, duration: Int64) throws(MediaError) {
        guard frames.count == 2 else { throw MediaError.invalid("write to", path: path, "the recording is already finished") }
        try send(frame: current, pts: pts, duration: duration)
    }

    private func send(frame index: Int, pts: Int64, duration: Int64) throws(MediaError) {
        guard let cc = context else { throw MediaError.invalid("write to", path: path, "the recording is already finished") }
        let f = frames[index]
        f.pointee.pts = pts
        f.pointee.pkt_duration = duration
        f.pointee.quality = frameQuality
        try check(avcodec_send_frame(cc, f), "encode a frame into", "avcodec_send_frame")
    }

    /// Tells the encoder no picture follows, so it hands over what it still holds.
    func flush() throws(MediaError) {
        guard let cc = context else { return }
        try check(avcodec_send_frame(cc, nil), "finish", "avcodec_send_frame")
    }

    private func setUpFrameBuffer(_ f: UnsafeMutablePointer<AVFrame>, _ cc: UnsafeMutablePointer<AVCodecContext>) throws(MediaError) {
        f.pointee.format = cc.pointee.pix_fmt.rawValue
        f.pointee.width = cc.pointee.width
        f.pointee.height = cc.pointee.height
        f.pointee.color_range = cc.pointee.color_range
        try check(av_frame_get_buffer(f, 0), "encode a frame into", "av_frame_get_buffer")
    }

    /// Frees every libav object; safe to call repeatedly.
    func release() {
        for f in frames {
            var f: UnsafeMutablePointer<AVFrame>? = f
            av_frame_free(&f)
        }
        frames.removeAll()
        if context != nil { avcodec_free_context(&context) }
    }

    private func check(_ result: Int32, _ operation: String, _ call: String) throws(MediaError) {
        if result < 0 { throw failure(operation, call, result) }
    }

    private func failure(_ operation: String, _ call: String, _ code: Int32) -> MediaError {
        MediaError(ffmpeg: code, operation: operation, path: path, call: call)
    }
}
