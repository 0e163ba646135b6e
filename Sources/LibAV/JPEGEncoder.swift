import CFFmpeg
import Pixels

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Encodes single pictures as JPEG with libavcodec's mjpeg encoder (yuvj420p, fixed quantiser): what a scripted
/// MJPEG camera delivers, so the recorder's passthrough path gets real JPEG packets. Not thread-safe.
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
            VideoEncoder.configureJPEG(cc, quality: quality)
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
        MediaError(operation: "encode a JPEG", path: nil, call: call, code: code, reason: LibavCall.text(code))
    }

    private func release() {
        if frame != nil { av_frame_free(&frame) }
        if packet != nil { av_packet_free(&packet) }
        if codecContext != nil { avcodec_free_context(&codecContext) }
    }
}
