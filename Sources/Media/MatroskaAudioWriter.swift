import CFFmpeg

#if canImport(Glibc)
import Glibc
#endif

/// Writes 16-bit PCM sound into a Matroska audio file (`.mka`) with libavformat: no encoder, each packet the
/// samples as they are, its timestamp the index of its first sample (the time base is one sample), so the file
/// holds exactly the samples given and its duration is their count over the rate. With `MatroskaWriter`, the only
/// Swift code that calls av_*.
///
/// Not thread-safe: one writer is driven by one thread.
public final class MatroskaAudioWriter {
    public let path: String
    public let sampleRate: Int
    public let channels: Int
    /// Sample frames written so far (one sample per channel each).
    public private(set) var framesWritten: Int64 = 0

    private var formatContext: UnsafeMutablePointer<AVFormatContext>?
    private var stream: UnsafeMutablePointer<AVStream>?
    private var packet: UnsafeMutablePointer<AVPacket>?
    private var headerWritten = false
    private var finished = false
    private var createdFile = false

    public init(path: String, sampleRate: Int, channels: Int, metadata: [String: String] = [:]) throws {
        self.path = path
        self.sampleRate = sampleRate
        self.channels = channels
        do {
            guard (8000...192_000).contains(sampleRate), (1...8).contains(channels) else {
                throw MediaError(operation: "create", path: path, call: nil, code: cff_AVERROR_EINVAL,
                                 reason: "a sample rate of \(sampleRate) Hz with \(channels) channel(s) is not supported (8000-192000 Hz, 1-8 channels)")
            }
            try open(metadata: metadata)
        } catch {
            finished = true
            release()
            if createdFile { unlink(path) }
            throw error
        }
    }

    deinit { release() }

    /// Appends interleaved samples (a whole number of frames).
    public func write(_ samples: UnsafeBufferPointer<Int16>) throws {
        guard !finished, headerWritten, let formatContext, let stream, let packet else {
            throw MediaError(operation: "write to", path: path, call: nil, code: cff_AVERROR_EINVAL, reason: "the recording is already finished")
        }
        let frames = samples.count / channels
        guard frames > 0, let base = samples.baseAddress else { return }
        let bytes = frames * channels * 2
        try check(av_new_packet(packet, Int32(bytes)), "write sound to", "av_new_packet")
        memcpy(packet.pointee.data, base, bytes)
        packet.pointee.pts = framesWritten
        packet.pointee.dts = framesWritten
        packet.pointee.duration = Int64(frames)
        packet.pointee.flags |= cff_AV_PKT_FLAG_KEY
        packet.pointee.stream_index = stream.pointee.index
        av_packet_rescale_ts(packet, AVRational(num: 1, den: Int32(sampleRate)), stream.pointee.time_base)
        let w = av_write_frame(formatContext, packet)
        av_packet_unref(packet)
        try check(w, "write sound to", "av_write_frame")
        framesWritten += Int64(frames)
    }

    public func write(_ samples: [Int16]) throws {
        try samples.withUnsafeBufferPointer { try write($0) }
    }

    /// Writes the trailer and closes the file. Idempotent.
    public func finish() throws {
        if finished { return }
        finished = true
        var firstError: Error?
        if headerWritten, let formatContext {
            let r = av_write_trailer(formatContext)
            if r < 0 { firstError = avError("finish", "av_write_trailer", r) }
        }
        if let formatContext, formatContext.pointee.pb != nil {
            let r = avio_closep(&formatContext.pointee.pb)
            if r < 0, firstError == nil { firstError = avError("close", "avio_closep", r) }
        }
        release()
        if let firstError { throw firstError }
    }

    private func open(metadata: [String: String]) throws {
        cff_log_quiet()
        var fc: UnsafeMutablePointer<AVFormatContext>?
        try check(avformat_alloc_output_context2(&fc, nil, "matroska", path), "create", "avformat_alloc_output_context2")
        guard let fc else { throw avError("create", "avformat_alloc_output_context2", cff_AVERROR_ENOMEM) }
        formatContext = fc
        guard let st = avformat_new_stream(fc, nil) else { throw avError("create", "avformat_new_stream", cff_AVERROR_ENOMEM) }
        stream = st
        let par = st.pointee.codecpar!
        par.pointee.codec_type = AVMEDIA_TYPE_AUDIO
        par.pointee.codec_id = AV_CODEC_ID_PCM_S16LE
        par.pointee.sample_rate = Int32(sampleRate)
        par.pointee.format = AV_SAMPLE_FMT_S16.rawValue
        par.pointee.bits_per_coded_sample = 16
        av_channel_layout_default(&par.pointee.ch_layout, Int32(channels))
        st.pointee.time_base = AVRational(num: 1, den: Int32(sampleRate))
        for key in metadata.keys.sorted() {
            try check(av_dict_set(&fc.pointee.metadata, key, metadata[key], 0), "create", "av_dict_set(\(key))")
        }
        try check(avio_open(&fc.pointee.pb, path, cff_AVIO_FLAG_WRITE), "create", "avio_open")
        createdFile = true
        var options: OpaquePointer?
        defer { av_dict_free(&options) }
        try check(av_dict_set(&options, "cluster_time_limit", "1000", 0), "create", "av_dict_set")
        fc.pointee.flush_packets = 1
        try check(avformat_write_header(fc, &options), "create", "avformat_write_header")
        headerWritten = true
        guard let p = av_packet_alloc() else { throw avError("create", "av_packet_alloc", cff_AVERROR_ENOMEM) }
        packet = p
    }

    @discardableResult
    private func check(_ result: Int32, _ operation: String, _ call: String) throws -> Int32 {
        if result < 0 { throw avError(operation, call, result) }
        return result
    }

    private func avError(_ operation: String, _ call: String, _ code: Int32) -> MediaError {
        MediaError(ffmpeg: code, operation: operation, path: path, call: call)
    }

    private func release() {
        if packet != nil { av_packet_free(&packet) }
        if let fc = formatContext {
            if fc.pointee.pb != nil { avio_closep(&fc.pointee.pb) }
            avformat_free_context(fc)
            formatContext = nil
        }
        stream = nil
    }
}
