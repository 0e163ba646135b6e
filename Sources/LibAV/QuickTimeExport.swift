// The deliverables' side of the libav funnel (beside Muxer.swift): `coord deliver`'s QuickTime and Broadcast WAV
// files, written through `LibavWriter` as the recorder's are. Deliverables never call libav themselves; they
// describe each file with the plain values below.
import CFFmpeg
import CoordCore
import Foundation

/// `coord deliver`'s media: a camera's `.mkv` into a QuickTime `.mov` with a `tmcd` track, a microphone's `.mka` into a
/// Broadcast WAV. Each call works on its own contexts, so jobs run in parallel on separate threads.
public enum QuickTimeExport {
    /// A file that could not be made: one sentence.
    public struct Failure: Error, Equatable, Sendable, CustomStringConvertible {
        public let sentence: String
        init(_ sentence: String) { self.sentence = sentence }
        public var description: String { sentence }
    }

    /// How a camera's pictures reach its `.mov`: as recorded, or encoded as ProRes 422 (Proxy, LT, standard, HQ) or H.264.
    public enum VideoMode: String, Sendable, Equatable {
        case copy, proresProxy, proresLT, prores, proresHQ, h264

        /// prores_ks's `profile` option, nil for the other modes.
        var proresProfile: String? {
            switch self {
            case .proresProxy: "proxy"
            case .proresLT: "lt"
            case .prores: "standard"
            case .proresHQ: "hq"
            case .copy, .h264: nil
            }
        }
    }

    /// One camera's `.mov`: exactly `frames` frames, frame i from the source's frame i, at `fps` from `timecode`.
    public struct Movie: Sendable, Equatable {
        public var node: String
        public var camera: String
        /// The source as the sentences name it (relative to the take).
        public var source: String
        public var mode: VideoMode
        public var frames: Int64
        public var fps: Int
        public var timecode: String
        /// The reel (tape) name the timecode track carries.
        public var reel: String
        /// The exact rate when it is not `fps`/1 (30000/1001): the track's time base is then 1001/30000 and a
        /// `HH:MM:SS;FF` timecode makes a drop-frame tmcd track.
        public var rate: FrameRate?
        public init(node: String, camera: String, source: String, mode: VideoMode, frames: Int64, fps: Int, timecode: String,
                    reel: String) {
            self.node = node; self.camera = camera; self.source = source; self.mode = mode; self.frames = frames
            self.fps = fps; self.timecode = timecode; self.reel = reel
        }
    }

    /// One microphone's Broadcast WAV: `samples` long from group 0, `skipSamples` of the recording dropped (positive)
    /// or of silence put before it (negative), `bext` TimeReference `timeReference`.
    public struct Sound: Sendable, Equatable {
        public var node: String
        public var mic: String
        public var source: String
        public var streamIndex: Int
        public var sampleRate: Int
        public var channels: Int
        public var skipSamples: Int64
        public var samples: Int64
        public var timeReference: Int64
        /// `bext` OriginationDate (`yyyy-MM-dd`) and OriginationTime (`HH:mm:ss`).
        public var originationDate: String
        public var originationTime: String
        public init(node: String, mic: String, source: String, streamIndex: Int, sampleRate: Int, channels: Int,
                    skipSamples: Int64, samples: Int64, timeReference: Int64, originationDate: String, originationTime: String) {
            self.node = node; self.mic = mic; self.source = source; self.streamIndex = streamIndex; self.sampleRate = sampleRate
            self.channels = channels; self.skipSamples = skipSamples; self.samples = samples; self.timeReference = timeReference
            self.originationDate = originationDate; self.originationTime = originationTime
        }
    }

    /// Writes `job`'s `.mov` to `output` (a temporary name; the caller renames it). `progress` gets the bytes of the
    /// source consumed since its last call.
    public static func writeMov(_ job: Movie, from input: String, to output: String, progress: (Int64) -> Void) throws(Failure) {
        cff_log_quiet()
        let session = try Session(input: input, output: output, format: "mov", what: "\(job.node)/\(job.camera)")
        defer { session.close() }
        let ic = session.input
        let index = av_find_best_stream(ic, AVMEDIA_TYPE_VIDEO, -1, -1, nil, 0)
        guard index >= 0, let ist = ic.pointee.streams[Int(index)] else {
            throw Failure("\(job.source) holds no video stream.")
        }
        let rate = AVRational(num: Int32(job.rate?.numerator ?? job.fps), den: Int32(job.rate?.denominator ?? 1))
        let frameBase = AVRational(num: rate.den, den: rate.num)
        let ost = try session.newStream()
        ost.pointee.time_base = frameBase
        ost.pointee.avg_frame_rate = rate
        ost.pointee.r_frame_rate = rate
        // The mov muxer writes a tmcd track from the video stream's "timecode" (what `ffmpeg -timecode` sets).
        av_dict_set(&ost.pointee.metadata, "timecode", job.timecode, 0)
        // …and its reel name ('name' atom of the tmcd sample description) from the same stream's "reel_name".
        av_dict_set(&ost.pointee.metadata, "reel_name", job.reel, 0)
        var written: Int64 = 0

        if job.mode == .copy {
            try session.check(avcodec_parameters_copy(ost.pointee.codecpar, ist.pointee.codecpar), "avcodec_parameters_copy")
            ost.pointee.codecpar.pointee.codec_tag = 0
            try session.writeHeader()
            while written < job.frames, let packet = try session.read() {
                defer { av_packet_unref(packet) }
                progress(Int64(packet.pointee.size))
                guard packet.pointee.stream_index == index else { continue }
                // Frame i is group i (CONTRACT §4): its time on the QuickTime track is i frames.
                packet.pointee.pts = written
                packet.pointee.dts = written
                packet.pointee.duration = 1
                packet.pointee.pos = -1
                packet.pointee.stream_index = ost.pointee.index
                av_packet_rescale_ts(packet, frameBase, ost.pointee.time_base)
                try session.write(packet)
                written += 1
            }
        } else {
            let codec = ist.pointee.codecpar.pointee.codec_id
            guard let decoder = avcodec_find_decoder(codec), let dc = avcodec_alloc_context3(decoder) else {
                throw Failure("\(job.source): libavcodec has no decoder for its video.")
            }
            var decoderContext: UnsafeMutablePointer<AVCodecContext>? = dc
            defer { avcodec_free_context(&decoderContext) }
            try session.check(avcodec_parameters_to_context(dc, ist.pointee.codecpar), "avcodec_parameters_to_context")
            try session.check(avcodec_open2(dc, decoder, nil), "avcodec_open2(decoder)")
            var encoder: Encoder?
            defer { encoder?.free() }
            guard let frame = av_frame_alloc() else { throw session.failure("av_frame_alloc", cff_AVERROR_ENOMEM) }
            var decoded: UnsafeMutablePointer<AVFrame>? = frame
            defer { av_frame_free(&decoded) }

            func drainDecoder() throws(Failure) {
                while written < job.frames {
                    let r = avcodec_receive_frame(dc, frame)
                    if r == cff_EAGAIN_error || r == cff_AVERROR_EOF { return }
                    try session.check(r, "avcodec_receive_frame")
                    defer { av_frame_unref(frame) }
                    if encoder == nil { encoder = try Encoder(job, first: frame, stream: ost, session: session) }
                    try encoder!.encode(frame, pts: written, session: session)
                    written += 1
                }
            }
            while written < job.frames, let packet = try session.read() {
                defer { av_packet_unref(packet) }
                progress(Int64(packet.pointee.size))
                guard packet.pointee.stream_index == index else { continue }
                try session.check(avcodec_send_packet(dc, packet), "avcodec_send_packet")
                try drainDecoder()
            }
            if written < job.frames {
                _ = avcodec_send_packet(dc, nil)
                try drainDecoder()
            }
            try encoder?.finish(session: session)
        }
        guard written == job.frames else {
            throw Failure("\(job.source) holds \(written) frames but the take has \(job.frames) groups; coord deliver needs one frame per group.")
        }
        try session.finish()
    }

    /// Writes `job`'s Broadcast WAV: `bext` TimeReference, then exactly `job.samples` samples from group 0's instant
    /// (silence where the recording does not reach).
    public static func writeWav(_ job: Sound, from input: String, to output: String, progress: (Int64) -> Void) throws(Failure) {
        cff_log_quiet()
        let session = try Session(input: input, output: output, format: "wav", what: "\(job.node)/\(job.mic)")
        defer { session.close() }
        let ic = session.input
        var index = Int32(job.streamIndex)
        if index >= Int32(ic.pointee.nb_streams) || ic.pointee.streams[Int(index)]?.pointee.codecpar.pointee.codec_type != AVMEDIA_TYPE_AUDIO {
            index = av_find_best_stream(ic, AVMEDIA_TYPE_AUDIO, -1, -1, nil, 0)
        }
        guard index >= 0, let ist = ic.pointee.streams[Int(index)] else { throw Failure("\(job.source) holds no audio stream.") }
        let par = ist.pointee.codecpar!
        guard par.pointee.codec_id == AV_CODEC_ID_PCM_S16LE, par.pointee.ch_layout.nb_channels == Int32(job.channels) else {
            throw Failure("\(job.source) is not the \(job.channels)-channel 16-bit PCM the manifest lists.")
        }
        let ost = try session.newStream()
        let op = ost.pointee.codecpar!
        op.pointee.codec_type = AVMEDIA_TYPE_AUDIO
        op.pointee.codec_id = AV_CODEC_ID_PCM_S16LE
        op.pointee.sample_rate = Int32(job.sampleRate)
        av_channel_layout_default(&op.pointee.ch_layout, Int32(job.channels))
        op.pointee.bits_per_coded_sample = 16
        op.pointee.block_align = Int32(2 * job.channels)
        let sampleBase = AVRational(num: 1, den: Int32(job.sampleRate))
        ost.pointee.time_base = sampleBase
        for (key, value) in [("time_reference", String(job.timeReference)), ("originator", "coord"),
                             ("description", "\(job.node)/\(job.mic)"), ("coding_history", "A=PCM,F=\(job.sampleRate),W=16,T=coord"),
                             ("origination_date", job.originationDate), ("origination_time", job.originationTime)] where !value.isEmpty {
            try session.setTag(key, value)
        }
        try session.writeHeader(options: [("write_bext", "1")])

        let frameBytes = Int64(2 * job.channels)
        var written: Int64 = 0
        func write(_ bytes: UnsafeRawBufferPointer?, count samples: Int64) throws(Failure) {
            guard samples > 0, let packet = av_packet_alloc() else { return }
            var p: UnsafeMutablePointer<AVPacket>? = packet
            defer { av_packet_free(&p) }
            try session.check(av_new_packet(packet, Int32(samples * frameBytes)), "av_new_packet")
            if let source = bytes?.baseAddress { memcpy(packet.pointee.data, source, Int(samples * frameBytes)) } else {
                memset(packet.pointee.data, 0, Int(samples * frameBytes))
            }
            packet.pointee.pts = written
            packet.pointee.dts = written
            packet.pointee.duration = samples
            packet.pointee.stream_index = ost.pointee.index
            av_packet_rescale_ts(packet, sampleBase, ost.pointee.time_base)
            try session.write(packet)
            written += samples
        }
        // Silence before the recording's first sample, in chunks of a second.
        var lead = max(0, -job.skipSamples)
        while lead > 0 && written < job.samples {
            let n = min(lead, Int64(job.sampleRate), job.samples - written)
            try write(nil, count: n)
            lead -= n
        }
        var skip = max(0, job.skipSamples)
        while written < job.samples, let packet = try session.read() {
            defer { av_packet_unref(packet) }
            progress(Int64(packet.pointee.size))
            guard packet.pointee.stream_index == index else { continue }
            var available = Int64(packet.pointee.size) / frameBytes
            var offset: Int64 = 0
            let dropped = min(skip, available)
            skip -= dropped; offset += dropped; available -= dropped
            let n = min(available, job.samples - written)
            if n > 0 { try write(UnsafeRawBufferPointer(start: packet.pointee.data + Int(offset * frameBytes), count: Int(n * frameBytes)), count: n) }
        }
        while written < job.samples { try write(nil, count: min(Int64(job.sampleRate), job.samples - written)) }
        try session.finish()
    }

    /// One input demuxer and one output file (the funnel's `LibavWriter`), freed together.
    private final class Session {
        let input: UnsafeMutablePointer<AVFormatContext>
        let writer: LibavWriter
        let inputPath: String
        let outputPath: String
        let what: String
        let packet: UnsafeMutablePointer<AVPacket>

        init(input inputPath: String, output outputPath: String, format: String, what: String) throws(Failure) {
            self.inputPath = inputPath; self.outputPath = outputPath; self.what = what
            var ic: UnsafeMutablePointer<AVFormatContext>?
            var r = avformat_open_input(&ic, inputPath, nil, nil)
            guard r >= 0, let ic else { throw Failure("cannot open \(inputPath) for \(what): \(LibavCall.text(r)).") }
            r = avformat_find_stream_info(ic, nil)
            var made: LibavWriter?
            if r >= 0 {
                do throws(LibavCall) { made = try LibavWriter(format: format, path: outputPath) } catch { r = error.code }
            }
            guard r >= 0, let made, let packet = av_packet_alloc() else {
                var ic2: UnsafeMutablePointer<AVFormatContext>? = ic
                avformat_close_input(&ic2)
                throw Failure("cannot read \(inputPath) for \(what): \(LibavCall.text(r < 0 ? r : cff_AVERROR_ENOMEM)).")
            }
            input = ic; writer = made; self.packet = packet
            do throws(LibavCall) { try writer.create() } catch {
                close()
                throw Failure("cannot create \(outputPath) for \(what): \(LibavCall.text(error.code)).")
            }
        }

        func newStream() throws(Failure) -> UnsafeMutablePointer<AVStream> {
            do throws(LibavCall) { return try writer.newStream() } catch { throw failure(error) }
        }

        func setTag(_ key: String, _ value: String) throws(Failure) {
            do throws(LibavCall) { try writer.setTag(key, value) } catch { throw failure(error) }
        }

        func writeHeader(options: [(String, String)] = []) throws(Failure) {
            do throws(LibavCall) { try writer.writeHeader(options: options) } catch { throw failure(error) }
        }

        func write(_ packet: UnsafeMutablePointer<AVPacket>) throws(Failure) {
            do throws(LibavCall) { try writer.write(packet) } catch { throw failure(error) }
        }

        /// The trailer, and the file closed.
        func finish() throws(Failure) {
            do throws(LibavCall) { try writer.finish() } catch { throw failure(error) }
        }

        /// The next packet of the input (the caller unrefs it), nil at its end.
        func read() throws(Failure) -> UnsafeMutablePointer<AVPacket>? {
            let r = av_read_frame(input, packet)
            if r == cff_AVERROR_EOF { return nil }
            if r < 0 { throw Failure("cannot read \(inputPath) for \(what): \(LibavCall.text(r)).") }
            return packet
        }

        func check(_ r: Int32, _ call: String) throws(Failure) {
            if r < 0 { throw failure(call, r) }
        }

        func failure(_ call: String, _ r: Int32) -> Failure {
            Failure("cannot write \(outputPath) for \(what): \(call) failed: \(LibavCall.text(r)).")
        }

        func failure(_ call: LibavCall) -> Failure { failure(call.call, call.code) }

        func close() {
            var p: UnsafeMutablePointer<AVPacket>? = packet
            av_packet_free(&p)
            var ic: UnsafeMutablePointer<AVFormatContext>? = input
            avformat_close_input(&ic)
            writer.release()
        }
    }

    /// The ProRes 422 (prores_ks, 10-bit 4:2:2, the mode's profile) or H.264 (libx264) encoder of one `.mov`, opened on
    /// the first decoded picture.
    private struct Encoder {
        let context: UnsafeMutablePointer<AVCodecContext>
        let stream: UnsafeMutablePointer<AVStream>
        /// ProRes takes 10-bit 4:2:2: each picture is converted into this frame first.
        let converted: UnsafeMutablePointer<AVFrame>?

        init(_ job: Movie, first: UnsafeMutablePointer<AVFrame>, stream: UnsafeMutablePointer<AVStream>, session: Session) throws(Failure) {
            let prores = job.mode.proresProfile != nil
            let source = AVPixelFormat(rawValue: first.pointee.format)
            let supported = [AV_PIX_FMT_YUV420P, AV_PIX_FMT_YUVJ420P, AV_PIX_FMT_YUV422P, AV_PIX_FMT_YUVJ422P]
            guard supported.contains(source) else {
                throw Failure("\(job.source): its pictures are in a pixel format coord deliver does not convert (\(String(cString: av_get_pix_fmt_name(source)))).")
            }
            guard let codec = avcodec_find_encoder_by_name(prores ? "prores_ks" : "libx264"), let cc = avcodec_alloc_context3(codec) else {
                throw Failure("libavcodec lacks the \(prores ? "prores_ks" : "libx264") encoder.")
            }
            context = cc; self.stream = stream
            cc.pointee.width = first.pointee.width
            cc.pointee.height = first.pointee.height
            cc.pointee.time_base = AVRational(num: Int32(job.rate?.denominator ?? 1), den: Int32(job.rate?.numerator ?? job.fps))
            cc.pointee.framerate = AVRational(num: Int32(job.rate?.numerator ?? job.fps), den: Int32(job.rate?.denominator ?? 1))
            cc.pointee.sample_aspect_ratio = AVRational(num: 1, den: 1)
            cc.pointee.thread_count = 0
            if prores {
                cc.pointee.pix_fmt = AV_PIX_FMT_YUV422P10LE
                // Proxy 'apco', LT 'apcs', 422 'apcn', HQ 'apch': prores_ks's own option (on auto it picks HQ for 4:2:2).
                let profile = job.mode.proresProfile ?? "proxy"
                guard av_opt_set(cc.pointee.priv_data, "profile", profile, 0) >= 0 else {
                    throw Failure("libavcodec's prores_ks encoder has no \(profile) profile.")
                }
                cc.pointee.color_range = AVCOL_RANGE_MPEG
            } else {
                cc.pointee.pix_fmt = source
                cc.pointee.gop_size = Int32(job.fps)
                cc.pointee.max_b_frames = 0
                _ = cff_opt_set_child(cc, "preset", "veryfast")
                _ = cff_opt_set_child(cc, "crf", "20")
            }
            if session.writer.wantsGlobalHeader {
                cc.pointee.flags |= cff_AV_CODEC_FLAG_GLOBAL_HEADER
            }
            if prores {
                guard let f = av_frame_alloc() else { throw session.failure("av_frame_alloc", cff_AVERROR_ENOMEM) }
                f.pointee.format = AV_PIX_FMT_YUV422P10LE.rawValue
                f.pointee.width = first.pointee.width
                f.pointee.height = first.pointee.height
                converted = f
                try session.check(av_frame_get_buffer(f, 0), "av_frame_get_buffer")
            } else {
                converted = nil
            }
            try session.check(avcodec_open2(cc, codec, nil), "avcodec_open2(encoder)")
            try session.check(avcodec_parameters_from_context(stream.pointee.codecpar, cc), "avcodec_parameters_from_context")
            try session.writeHeader()
        }

        func encode(_ frame: UnsafeMutablePointer<AVFrame>, pts: Int64, session: Session) throws(Failure) {
            let input: UnsafeMutablePointer<AVFrame>
            if let converted {
                try session.check(av_frame_make_writable(converted), "av_frame_make_writable")
                Self.to422p10(frame, converted)
                input = converted
            } else {
                input = frame
            }
            input.pointee.pts = pts
            input.pointee.pict_type = AV_PICTURE_TYPE_NONE
            try session.check(avcodec_send_frame(context, input), "avcodec_send_frame")
            try drain(session)
        }

        func finish(session: Session) throws(Failure) {
            try session.check(avcodec_send_frame(context, nil), "avcodec_send_frame")
            try drain(session)
        }

        private func drain(_ session: Session) throws(Failure) {
            guard let packet = av_packet_alloc() else { throw session.failure("av_packet_alloc", cff_AVERROR_ENOMEM) }
            var p: UnsafeMutablePointer<AVPacket>? = packet
            defer { av_packet_free(&p) }
            while true {
                let r = avcodec_receive_packet(context, packet)
                if r == cff_EAGAIN_error || r == cff_AVERROR_EOF { return }
                try session.check(r, "avcodec_receive_packet")
                if packet.pointee.duration == 0 { packet.pointee.duration = 1 }
                av_packet_rescale_ts(packet, context.pointee.time_base, stream.pointee.time_base)
                packet.pointee.stream_index = stream.pointee.index
                try session.write(packet)
            }
        }

        func free() {
            var c: UnsafeMutablePointer<AVCodecContext>? = context
            avcodec_free_context(&c)
            var f = converted
            if f != nil { av_frame_free(&f) }
        }

        /// 8-bit 4:2:0 or 4:2:2 (full or video range) into 10-bit video-range 4:2:2, rows of 4:2:0 chroma doubled.
        static func to422p10(_ src: UnsafeMutablePointer<AVFrame>, _ dst: UnsafeMutablePointer<AVFrame>) {
            let format = AVPixelFormat(rawValue: src.pointee.format)
            let full = format == AV_PIX_FMT_YUVJ420P || format == AV_PIX_FMT_YUVJ422P || src.pointee.color_range == AVCOL_RANGE_JPEG
            let vertical420 = format == AV_PIX_FMT_YUV420P || format == AV_PIX_FMT_YUVJ420P
            var luma = [UInt16](repeating: 0, count: 256), chroma = [UInt16](repeating: 0, count: 256)
            for v in 0..<256 {
                if full {
                    luma[v] = UInt16(64 + (v * 876 + 127) / 255)
                    let c = (v - 128) * 896
                    chroma[v] = UInt16(512 + (c >= 0 ? c + 127 : c - 127) / 255)
                } else {
                    luma[v] = UInt16(v << 2)
                    chroma[v] = UInt16(v << 2)
                }
            }
            let width = Int(src.pointee.width), height = Int(src.pointee.height)
            let srcData = [src.pointee.data.0!, src.pointee.data.1!, src.pointee.data.2!]
            let srcLine = [Int(src.pointee.linesize.0), Int(src.pointee.linesize.1), Int(src.pointee.linesize.2)]
            let dstData = [dst.pointee.data.0!, dst.pointee.data.1!, dst.pointee.data.2!]
            let dstLine = [Int(dst.pointee.linesize.0), Int(dst.pointee.linesize.1), Int(dst.pointee.linesize.2)]
            luma.withUnsafeBufferPointer { luma in
                chroma.withUnsafeBufferPointer { chroma in
                    for plane in 0..<3 {
                        let w = plane == 0 ? width : (width + 1) / 2
                        let table = plane == 0 ? luma : chroma
                        for y in 0..<height {
                            let sy = plane > 0 && vertical420 ? y / 2 : y
                            let s = srcData[plane] + sy * srcLine[plane]
                            let d = UnsafeMutableRawPointer(dstData[plane] + y * dstLine[plane]).assumingMemoryBound(to: UInt16.self)
                            for x in 0..<w { d[x] = table[Int(s[x])] }
                        }
                    }
                }
            }
        }
    }
}
