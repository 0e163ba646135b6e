// The multiview's inputs and encoders: a camera's `.mkv` decoded frame by frame, a microphone's PCM handed to the
// graph aligned to group 0, and the H.264 and AAC encoders writing into the one `.mov`.
import CFFmpeg

extension MultiviewExport {
    /// A camera's recording, decoded one frame at a time.
    final class CameraReader {
        let tile: Tile
        private let demuxer: Demuxer
        private var decoder: UnsafeMutablePointer<AVCodecContext>?
        private let packet: UnsafeMutablePointer<AVPacket>
        private var ended = false

        init(_ tile: Tile) throws(Failure) {
            self.tile = tile
            do throws(MediaError) { demuxer = try Demuxer(path: tile.input, operation: "read") } catch {
                throw Failure(error.description.replacingOccurrences(of: tile.input, with: tile.source))
            }
            let par = demuxer.stream.pointee.codecpar!
            guard par.pointee.codec_type == AVMEDIA_TYPE_VIDEO, let codec = avcodec_find_decoder(par.pointee.codec_id),
                  let context = avcodec_alloc_context3(codec) else {
                throw Failure("\(tile.source): libavcodec has no decoder for its video.")
            }
            decoder = context
            guard let p = av_packet_alloc() else { avcodec_free_context(&decoder); throw Failure("cannot read \(tile.source): out of memory.") }
            packet = p
            context.pointee.thread_count = 1
            guard avcodec_parameters_to_context(context, par) >= 0, avcodec_open2(context, codec, nil) >= 0 else {
                throw Failure("\(tile.source): its video decoder does not open.")
            }
        }

        deinit {
            avcodec_free_context(&decoder)
            var p: UnsafeMutablePointer<AVPacket>? = packet
            av_packet_free(&p)
        }

        /// The next picture into `frame`; false at the end of the file.
        func next(into frame: UnsafeMutablePointer<AVFrame>) throws(Failure) -> Bool {
            guard let decoder else { return false }
            while true {
                let r = avcodec_receive_frame(decoder, frame)
                if r >= 0 { return true }
                if r == cff_AVERROR_EOF { return false }
                guard r == cff_EAGAIN_error else { throw Failure("cannot decode \(tile.source): \(LibavCall.text(r)).") }
                if ended { return false }
                let read = av_read_frame(demuxer.context, packet)
                if read < 0 {
                    ended = true
                    _ = avcodec_send_packet(decoder, nil)
                    continue
                }
                defer { av_packet_unref(packet) }
                guard packet.pointee.stream_index == demuxer.stream.pointee.index else { continue }
                let sent = avcodec_send_packet(decoder, packet)
                guard sent >= 0 else { throw Failure("cannot decode \(tile.source): \(LibavCall.text(sent)).") }
            }
        }
    }

    /// A microphone's 16-bit PCM, handed to the graph from group 0's instant: silence where it does not reach.
    final class MicrophoneReader {
        let sound: Sound
        private let demuxer: Demuxer
        private let index: Int32
        private let packet: UnsafeMutablePointer<AVPacket>
        private var skip: Int64
        /// Samples handed to the graph so far (its pts).
        private var fed: Int64 = 0
        private var ended = false
        /// The channel layout as abuffer's option reads it.
        let layout: String

        init(_ sound: Sound) throws(Failure) {
            self.sound = sound
            do throws(MediaError) { demuxer = try Demuxer(path: sound.input, operation: "read") } catch {
                throw Failure(error.description.replacingOccurrences(of: sound.input, with: sound.source))
            }
            let ic = demuxer.context
            var i = Int32(sound.streamIndex)
            if i >= Int32(ic.pointee.nb_streams) || ic.pointee.streams[Int(i)]?.pointee.codecpar.pointee.codec_type != AVMEDIA_TYPE_AUDIO {
                i = av_find_best_stream(ic, AVMEDIA_TYPE_AUDIO, -1, -1, nil, 0)
            }
            guard i >= 0, let par = ic.pointee.streams[Int(i)]?.pointee.codecpar,
                  par.pointee.codec_id == AV_CODEC_ID_PCM_S16LE, par.pointee.ch_layout.nb_channels == Int32(sound.channels) else {
                throw Failure("\(sound.source) is not the \(sound.channels)-channel 16-bit PCM the manifest lists.")
            }
            index = i
            guard let p = av_packet_alloc() else { throw Failure("cannot read \(sound.source): out of memory.") }
            packet = p
            skip = max(0, sound.skipSamples)
            var ch = AVChannelLayout()
            av_channel_layout_default(&ch, Int32(sound.channels))
            var text = [CChar](repeating: 0, count: 64)
            _ = av_channel_layout_describe(&ch, &text, text.count)
            layout = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            av_channel_layout_uninit(&ch)
        }

        deinit {
            var p: UnsafeMutablePointer<AVPacket>? = packet
            av_packet_free(&p)
        }

        /// Hands the graph samples up to `until` (from group 0): the lead of silence, the recording, then silence.
        func feed(until: Int64, graph: MultiviewGraph, source: UnsafeMutablePointer<AVFilterContext>) throws(Failure) {
            let frameBytes = Int64(2 * sound.channels)
            while fed < until {
                let lead = max(0, -sound.skipSamples) - fed
                if lead > 0 || ended {
                    let n = min(lead > 0 ? lead : until - fed, until - fed, Int64(sound.sampleRate / 10))
                    try push(nil, samples: n, graph: graph, source: source)
                    continue
                }
                if av_read_frame(demuxer.context, packet) < 0 { ended = true; continue }
                defer { av_packet_unref(packet) }
                guard packet.pointee.stream_index == index else { continue }
                var available = Int64(packet.pointee.size) / frameBytes
                let dropped = min(skip, available)
                skip -= dropped; available -= dropped
                // Whole packets are handed over; the encoder's end trims nothing, so the last may run past `until`
                // by less than a packet, which the next frame's feed then counts.
                let n = min(available, sound.samples - fed)
                if n > 0 { try push(packet.pointee.data + Int(dropped * frameBytes), samples: n, graph: graph, source: source) }
            }
        }

        private func push(_ data: UnsafeMutablePointer<UInt8>?, samples: Int64, graph: MultiviewGraph,
                          source: UnsafeMutablePointer<AVFilterContext>) throws(Failure) {
            guard samples > 0, var frame = Optional(av_frame_alloc()), let f = frame else { return }
            defer { av_frame_free(&frame) }
            f.pointee.format = AV_SAMPLE_FMT_S16.rawValue
            f.pointee.sample_rate = Int32(sound.sampleRate)
            av_channel_layout_default(&f.pointee.ch_layout, Int32(sound.channels))
            f.pointee.nb_samples = Int32(samples)
            guard av_frame_get_buffer(f, 0) >= 0, let target = f.pointee.data.0 else { throw Failure("cannot read \(sound.source): out of memory.") }
            let bytes = Int(samples) * 2 * sound.channels
            if let data { memcpy(target, data, bytes) } else { memset(target, 0, bytes) }
            f.pointee.pts = fed
            fed += samples
            try graph.push(source, f)
        }
    }

    /// One encoder of the `.mov` and its stream.
    final class Encoder {
        let context: UnsafeMutablePointer<AVCodecContext>
        let stream: UnsafeMutablePointer<AVStream>
        private(set) var written: Int64 = 0
        private let counts: Bool

        private init(_ context: UnsafeMutablePointer<AVCodecContext>, _ stream: UnsafeMutablePointer<AVStream>, counts: Bool) {
            self.context = context; self.stream = stream; self.counts = counts
        }

        /// H.264 (libx264) of the picture, with the take's timecode for the mov muxer's `tmcd` track.
        static func video(_ movie: Movie, writer: LibavWriter, check: (Int32, String) throws(Failure) -> Void) throws(Failure) -> Encoder {
            guard let codec = avcodec_find_encoder_by_name("libx264"), let cc = avcodec_alloc_context3(codec) else {
                throw Failure("libavcodec lacks the libx264 encoder the multiview needs.")
            }
            var context: UnsafeMutablePointer<AVCodecContext>? = cc
            let stream: UnsafeMutablePointer<AVStream>
            do throws(LibavCall) { stream = try writer.newStream() } catch {
                avcodec_free_context(&context)
                throw Failure("cannot write the multiview: \(error.call) failed: \(LibavCall.text(error.code)).")
            }
            let rate = AVRational(num: Int32(movie.rateNumerator), den: Int32(movie.rateDenominator))
            cc.pointee.width = Int32(movie.width)
            cc.pointee.height = Int32(movie.height)
            cc.pointee.pix_fmt = AV_PIX_FMT_YUV420P
            cc.pointee.time_base = AVRational(num: rate.den, den: rate.num)
            cc.pointee.framerate = rate
            cc.pointee.sample_aspect_ratio = AVRational(num: 1, den: 1)
            cc.pointee.gop_size = Int32((movie.rateNumerator + movie.rateDenominator - 1) / movie.rateDenominator)
            cc.pointee.max_b_frames = 0
            cc.pointee.thread_count = 0
            _ = cff_opt_set_child(cc, "preset", "veryfast")
            _ = cff_opt_set_child(cc, "crf", "20")
            if writer.wantsGlobalHeader { cc.pointee.flags |= cff_AV_CODEC_FLAG_GLOBAL_HEADER }
            stream.pointee.time_base = cc.pointee.time_base
            stream.pointee.avg_frame_rate = rate
            stream.pointee.r_frame_rate = rate
            av_dict_set(&stream.pointee.metadata, "timecode", movie.timecode, 0)
            let encoder = Encoder(cc, stream, counts: true)
            do throws(Failure) {
                try check(avcodec_open2(cc, codec, nil), "avcodec_open2(libx264)")
                try check(avcodec_parameters_from_context(stream.pointee.codecpar, cc), "avcodec_parameters_from_context")
            } catch {
                encoder.free()
                throw error
            }
            return encoder
        }

        /// AAC of the microphones' stereo mix at 48 kHz.
        static func audio(writer: LibavWriter, check: (Int32, String) throws(Failure) -> Void) throws(Failure) -> Encoder {
            guard let codec = avcodec_find_encoder(AV_CODEC_ID_AAC), let cc = avcodec_alloc_context3(codec) else {
                throw Failure("libavcodec lacks the AAC encoder the multiview needs.")
            }
            var context: UnsafeMutablePointer<AVCodecContext>? = cc
            let stream: UnsafeMutablePointer<AVStream>
            do throws(LibavCall) { stream = try writer.newStream() } catch {
                avcodec_free_context(&context)
                throw Failure("cannot write the multiview: \(error.call) failed: \(LibavCall.text(error.code)).")
            }
            cc.pointee.sample_fmt = AV_SAMPLE_FMT_FLTP
            cc.pointee.sample_rate = 48000
            av_channel_layout_default(&cc.pointee.ch_layout, 2)
            cc.pointee.bit_rate = 192_000
            cc.pointee.time_base = AVRational(num: 1, den: 48000)
            if writer.wantsGlobalHeader { cc.pointee.flags |= cff_AV_CODEC_FLAG_GLOBAL_HEADER }
            stream.pointee.time_base = cc.pointee.time_base
            let encoder = Encoder(cc, stream, counts: false)
            do throws(Failure) {
                try check(avcodec_open2(cc, codec, nil), "avcodec_open2(aac)")
                try check(avcodec_parameters_from_context(stream.pointee.codecpar, cc), "avcodec_parameters_from_context")
            } catch {
                encoder.free()
                throw error
            }
            return encoder
        }

        /// Encodes `frame` (nil: the end) and writes what comes out.
        func send(_ frame: UnsafeMutablePointer<AVFrame>?, writer: LibavWriter, packet: UnsafeMutablePointer<AVPacket>,
                  check: (Int32, String) throws(Failure) -> Void) throws(Failure) {
            if let frame { frame.pointee.pict_type = AV_PICTURE_TYPE_NONE }
            try check(avcodec_send_frame(context, frame), "avcodec_send_frame")
            while true {
                let r = avcodec_receive_packet(context, packet)
                if r == cff_EAGAIN_error || r == cff_AVERROR_EOF { return }
                try check(r, "avcodec_receive_packet")
                defer { av_packet_unref(packet) }
                if packet.pointee.duration == 0 && counts { packet.pointee.duration = 1 }
                av_packet_rescale_ts(packet, context.pointee.time_base, stream.pointee.time_base)
                packet.pointee.stream_index = stream.pointee.index
                do throws(LibavCall) { try writer.write(packet) } catch { try check(error.code, error.call) }
                if counts { written += 1 }
            }
        }

        func free() {
            var c: UnsafeMutablePointer<AVCodecContext>? = context
            avcodec_free_context(&c)
        }
    }
}
