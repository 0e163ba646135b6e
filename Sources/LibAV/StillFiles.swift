import CFFmpeg
import CoordCore
import Foundation
import Pixels

#if canImport(Glibc)
import Glibc
#endif

/// Keeps chosen frames of a camera's lossless recording as still images (CONTRACT §18): PNG and TIFF through
/// libavcodec's encoders in 8-bit RGB (every pixel of the recorded picture, converted once), JPEG through its mjpeg
/// encoder.
public enum StillFiles {
    public struct Failure: Error, Equatable, Sendable, CustomStringConvertible {
        public let sentence: String
        init(_ sentence: String) { self.sentence = sentence }
        public var description: String { sentence }
    }

    /// Writes frame `i` of `input` to `outputs[i]` for every key; returns each written frame's size. A frame the file
    /// does not hold is a failure naming it.
    public static func write(from input: String, outputs: [Int: String], format: SnapPlan.Format) throws(Failure) -> [Int: (width: Int, height: Int)] {
        cff_log_quiet()
        var ic: UnsafeMutablePointer<AVFormatContext>?
        guard avformat_open_input(&ic, input, nil, nil) >= 0, let context = ic else { throw Failure("cannot open \(input) to take its stills from.") }
        defer { avformat_close_input(&ic) }
        guard avformat_find_stream_info(context, nil) >= 0 else { throw Failure("\(input) holds no readable stream.") }
        let index = av_find_best_stream(context, AVMEDIA_TYPE_VIDEO, -1, -1, nil, 0)
        guard index >= 0, let stream = context.pointee.streams[Int(index)],
              let decoder = avcodec_find_decoder(stream.pointee.codecpar.pointee.codec_id),
              let dc = avcodec_alloc_context3(decoder) else { throw Failure("\(input) holds no video this libavcodec decodes.") }
        var decoderContext: UnsafeMutablePointer<AVCodecContext>? = dc
        defer { avcodec_free_context(&decoderContext) }
        guard avcodec_parameters_to_context(dc, stream.pointee.codecpar) >= 0, avcodec_open2(dc, decoder, nil) >= 0 else {
            throw Failure("cannot open the decoder of \(input).")
        }
        var packet: UnsafeMutablePointer<AVPacket>? = av_packet_alloc()
        var frame: UnsafeMutablePointer<AVFrame>? = av_frame_alloc()
        defer { av_packet_free(&packet); av_frame_free(&frame) }
        guard let packet, let frame else { throw Failure("out of memory decoding \(input).") }
        let last = outputs.keys.max() ?? -1
        var decoded = 0
        var sizes: [Int: (width: Int, height: Int)] = [:]

        func drain() throws(Failure) {
            while decoded <= last {
                let r = avcodec_receive_frame(dc, frame)
                if r == cff_EAGAIN_error || r == cff_AVERROR_EOF { return }
                guard r >= 0 else { throw Failure("\(input): frame \(decoded) does not decode (\(LibavCall.text(r))).") }
                defer { av_frame_unref(frame); decoded += 1 }
                guard let path = outputs[decoded] else { continue }
                let bytes = try encode(frame, format: format, what: "\(input) frame \(decoded)")
                do { try bytes.write(to: URL(fileURLWithPath: path)) } catch {
                    throw Failure("cannot write \(path): \(error.localizedDescription).")
                }
                sizes[decoded] = (Int(frame.pointee.width), Int(frame.pointee.height))
            }
        }
        while decoded <= last, av_read_frame(context, packet) >= 0 {
            defer { av_packet_unref(packet) }
            guard packet.pointee.stream_index == index else { continue }
            guard avcodec_send_packet(dc, packet) >= 0 else { throw Failure("\(input): frame \(decoded) does not decode.") }
            try drain()
        }
        if decoded <= last {
            _ = avcodec_send_packet(dc, nil)
            try drain()
        }
        if let missing = outputs.keys.sorted().first(where: { sizes[$0] == nil }) {
            throw Failure("\(input) holds \(decoded) frames, so frame \(missing) of the shot is not in it.")
        }
        return sizes
    }

    /// A camera's own 4:2:0 picture (the console's warm Snap: no recording in between) as a PNG, TIFF or JPEG
    /// file's bytes, converted exactly as a frame decoded from the take's FFV1 is.
    public static func encode(_ picture: PlanarFrame, format: SnapPlan.Format, what: String) throws(Failure) -> Data {
        guard let frame = av_frame_alloc() else { throw Failure("out of memory encoding \(what).") }
        var owned: UnsafeMutablePointer<AVFrame>? = frame
        // The planes stay the picture's: the frame holds no buffer of its own, so freeing it frees only the frame.
        defer { av_frame_free(&owned) }
        frame.pointee.format = AV_PIX_FMT_YUV420P.rawValue
        frame.pointee.width = Int32(picture.width)
        frame.pointee.height = Int32(picture.height)
        frame.pointee.data.0 = picture.luma.baseAddress
        frame.pointee.data.1 = picture.cb.baseAddress
        frame.pointee.data.2 = picture.cr.baseAddress
        frame.pointee.linesize.0 = Int32(picture.width)
        frame.pointee.linesize.1 = Int32(picture.chromaWidth)
        frame.pointee.linesize.2 = Int32(picture.chromaWidth)
        return try encode(frame, format: format, what: what)
    }

    /// One decoded 4:2:0 picture as a PNG, TIFF or JPEG file's bytes.
    static func encode(_ picture: UnsafeMutablePointer<AVFrame>, format: SnapPlan.Format, what: String) throws(Failure) -> Data {
        let source = AVPixelFormat(rawValue: picture.pointee.format)
        guard source == AV_PIX_FMT_YUV420P || source == AV_PIX_FMT_YUVJ420P else {
            throw Failure("\(what) is not 4:2:0 YUV, the only pictures stills are taken from.")
        }
        let id: AVCodecID = format == .png ? AV_CODEC_ID_PNG : format == .tiff ? AV_CODEC_ID_TIFF : AV_CODEC_ID_MJPEG
        guard let encoder = avcodec_find_encoder(id), let cc = avcodec_alloc_context3(encoder) else {
            throw Failure("this libavcodec has no \(format.rawValue) encoder.")
        }
        var codecContext: UnsafeMutablePointer<AVCodecContext>? = cc
        defer { avcodec_free_context(&codecContext) }
        let width = picture.pointee.width, height = picture.pointee.height
        cc.pointee.width = width
        cc.pointee.height = height
        cc.pointee.time_base = AVRational(num: 1, den: 25)
        cc.pointee.thread_count = 1
        if format == .jpeg {
            VideoEncoder.configureJPEG(cc, quality: 2)
        } else {
            cc.pointee.pix_fmt = AV_PIX_FMT_RGB24
        }
        guard avcodec_open2(cc, encoder, nil) >= 0 else { throw Failure("cannot open the \(format.rawValue) encoder for \(what).") }
        var converted: UnsafeMutablePointer<AVFrame>? = nil
        defer { if converted != nil { av_frame_free(&converted) } }
        var input = picture
        if format != .jpeg {
            guard let rgb = av_frame_alloc() else { throw Failure("out of memory encoding \(what).") }
            converted = rgb
            rgb.pointee.format = AV_PIX_FMT_RGB24.rawValue
            rgb.pointee.width = width
            rgb.pointee.height = height
            guard av_frame_get_buffer(rgb, 0) >= 0 else { throw Failure("out of memory encoding \(what).") }
            toRGB(picture, into: rgb, fullRange: source == AV_PIX_FMT_YUVJ420P)
            input = rgb
        }
        input.pointee.pts = 0
        guard avcodec_send_frame(cc, input) >= 0, avcodec_send_frame(cc, nil) >= 0 else {
            throw Failure("the \(format.rawValue) encoder refused \(what).")
        }
        var packet: UnsafeMutablePointer<AVPacket>? = av_packet_alloc()
        defer { av_packet_free(&packet) }
        guard let packet, avcodec_receive_packet(cc, packet) >= 0 else { throw Failure("the \(format.rawValue) encoder gave nothing for \(what).") }
        defer { av_packet_unref(packet) }
        return Data(bytes: packet.pointee.data, count: Int(packet.pointee.size))
    }

    /// BT.601 YUV to 8-bit RGB, video range unless `fullRange` (integer arithmetic, 16.16 fixed point).
    static func toRGB(_ yuv: UnsafeMutablePointer<AVFrame>, into rgb: UnsafeMutablePointer<AVFrame>, fullRange: Bool) {
        let w = Int(yuv.pointee.width), h = Int(yuv.pointee.height)
        let (ys, us, vs, out) = (yuv.pointee.data.0!, yuv.pointee.data.1!, yuv.pointee.data.2!, rgb.pointee.data.0!)
        let (yl, ul, vl, ol) = (Int(yuv.pointee.linesize.0), Int(yuv.pointee.linesize.1), Int(yuv.pointee.linesize.2),
                                Int(rgb.pointee.linesize.0))
        let (yScale, yOffset, cScale) = fullRange ? (65_536, 0, 65_536) : (76_309, 16, 74_606)
        @inline(__always) func clamp(_ v: Int) -> UInt8 { UInt8(truncatingIfNeeded: min(255, max(0, (v + 32_768) >> 16))) }
        for row in 0..<h {
            for col in 0..<w {
                let y = (Int(ys[row * yl + col]) - yOffset) * yScale
                let u = Int(us[(row / 2) * ul + col / 2]) - 128
                let v = Int(vs[(row / 2) * vl + col / 2]) - 128
                // 1.402, 0.344, 0.714, 1.772 of the chroma, scaled to its range.
                let r = y + v * 91_881 * cScale / 65_536
                let g = y - (u * 22_554 + v * 46_802) * cScale / 65_536
                let b = y + u * 116_130 * cScale / 65_536
                let o = row * ol + col * 3
                out[o] = clamp(r); out[o + 1] = clamp(g); out[o + 2] = clamp(b)
            }
        }
    }
}
