// The libav funnel (libavformat, libavcodec) is this module: every av_* call in the tree is in Sources/LibAV, and
// every file written through libavformat goes through `LibavWriter` (LibavWriter.swift). Here `Muxer` writes one
// Matroska stream (MatroskaWriter's video, MatroskaAudioWriter's sound, MatroskaRepair's copy); `VideoEncoder`
// feeds it encoded pictures, `Demuxer` reads a file back for the repair, and `JPEGEncoder` makes single JPEGs;
// QuickTimeExport.swift makes `coord deliver`'s QuickTime and WAV files.
import CFFmpeg
import CoordCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension MediaError {
    /// A failed libav call as one sentence, with FFmpeg's own words for `code`.
    init(ffmpeg code: Int32, operation: String, path: String?, call: String) {
        self.init(operation: operation, path: path, call: call, code: code, reason: LibavCall.text(code))
    }

    /// Input refused before any libav call (AVERROR(EINVAL)).
    static func invalid(_ operation: String, path: String?, _ reason: String) -> MediaError {
        MediaError(operation: operation, path: path, call: nil, code: cff_AVERROR_EINVAL, reason: reason)
    }
}

/// A time base: `num/den` seconds per tick.
struct TimeBase {
    var num: Int32, den: Int32
    /// µs: the codec sees exact capture times; the muxer rescales to Matroska's 1 ms.
    static let microseconds = TimeBase(num: 1, den: 1_000_000)
    var rational: AVRational { AVRational(num: num, den: den) }
}

/// One Matroska file with one stream, written packet by packet. Not thread-safe: one writer drives it.
final class Muxer {
    /// The file written.
    let path: String
    /// The file the sentences name (the repair writes a temporary copy of it).
    private let reportedPath: String
    /// Every sentence says this instead of the step's own operation (the repair's "repair").
    private let fixedOperation: String?
    /// The container, through the funnel's one writer; nil once released.
    private var writer: LibavWriter?
    private var stream: UnsafeMutablePointer<AVStream>?
    private var packet: UnsafeMutablePointer<AVPacket>?
    /// The last packet written with `keep` (intra codecs only), re-muxed by `writeRepeat`.
    private var lastPacket: UnsafeMutablePointer<AVPacket>?
    /// Whether `path` was created (to be removed again if set-up fails after that).
    private(set) var createdFile = false
    private(set) var headerWritten = false
    /// A recording's disk calls (a test's full disk); its file holds disk space to be finished in (`open`).
    private let calls: DiskCalls
    /// Packets written, and the bytes of the longest run one cluster may hold (from a keyframe, within a second).
    private var packets: Int64 = 0
    private var run: (bytes: Int64, startMilliseconds: Int64) = (0, 0)
    private var largestRun: Int64 = 0

    init(path: String, reportedPath: String? = nil, fixedOperation: String? = nil, calls: DiskCalls = .system) throws(MediaError) {
        self.path = path
        self.reportedPath = reportedPath ?? path
        self.fixedOperation = fixedOperation
        self.calls = calls
        do throws(LibavCall) { writer = try LibavWriter(format: "matroska", path: path) } catch { throw failure("create", error) }
    }

    deinit { release() }

    // MARK: set-up

    /// A video stream carrying `encoder`'s packets at `rate` (30000/1001 stays exact), in Matroska's 1 ms; `timecode`
    /// (`HH:MM:SS:FF`, `HH:MM:SS;FF` drop-frame) is also the track's tag.
    func addVideoStream(_ encoder: VideoEncoder, rate: FrameRate, timecode: String?) throws(MediaError) {
        guard let cc = encoder.context else { throw failure("create", "avformat_new_stream", cff_AVERROR_EINVAL) }
        let st = try newStream()
        st.pointee.time_base = AVRational(num: 1, den: 1000)
        st.pointee.avg_frame_rate = AVRational(num: Int32(rate.numerator), den: Int32(rate.denominator))
        st.pointee.r_frame_rate = AVRational(num: Int32(rate.numerator), den: Int32(rate.denominator))
        try check(avcodec_parameters_from_context(st.pointee.codecpar, cc), "create", "avcodec_parameters_from_context")
        // `ffmpeg -timecode` puts a Matroska file's timecode in the global tags, and remuxing to MOV takes it from there
        // or from the video track's tags (into a tmcd track); tools that read only stream tags find it here too.
        if let timecode {
            try check(av_dict_set(&st.pointee.metadata, "timecode", timecode, 0), "create", "av_dict_set(timecode)")
        }
    }

    /// 16-bit PCM, the time base one sample: each packet's timestamp is the index of its first sample.
    func addAudioStream(sampleRate: Int, channels: Int) throws(MediaError) {
        let st = try newStream()
        let par = st.pointee.codecpar!
        par.pointee.codec_type = AVMEDIA_TYPE_AUDIO
        par.pointee.codec_id = AV_CODEC_ID_PCM_S16LE
        par.pointee.sample_rate = Int32(sampleRate)
        par.pointee.format = AV_SAMPLE_FMT_S16.rawValue
        par.pointee.bits_per_coded_sample = 16
        av_channel_layout_default(&par.pointee.ch_layout, Int32(channels))
        st.pointee.time_base = AVRational(num: 1, den: Int32(sampleRate))
    }

    /// The input's first stream as it is (no re-encoding), with its tags and the file's.
    func addStream(copying input: Demuxer) throws(MediaError) {
        let inStream = input.stream
        let outStream = try newStream()
        try check(avcodec_parameters_copy(outStream.pointee.codecpar, inStream.pointee.codecpar), "create", "avcodec_parameters_copy")
        outStream.pointee.codecpar.pointee.codec_tag = 0
        outStream.pointee.time_base = inStream.pointee.time_base
        outStream.pointee.avg_frame_rate = inStream.pointee.avg_frame_rate
        outStream.pointee.r_frame_rate = inStream.pointee.r_frame_rate
        writer?.copyTags(from: input.context)
        _ = av_dict_copy(&outStream.pointee.metadata, inStream.pointee.metadata, 0)
    }

    /// A new stream of the file, kept as the one this muxer writes.
    private func newStream() throws(MediaError) -> UnsafeMutablePointer<AVStream> {
        guard let writer else { throw failure("create", "avformat_new_stream", cff_AVERROR_EINVAL) }
        do throws(LibavCall) {
            let st = try writer.newStream()
            stream = st
            return st
        } catch { throw failure("create", error) }
    }

    /// The file's global tags, in key order.
    func setMetadata(_ metadata: [String: String]) throws(MediaError) {
        guard let writer else { return }
        for key in metadata.keys.sorted() {
            do throws(LibavCall) { try writer.setTag(key, metadata[key]!) } catch { throw failure("create", error) }
        }
    }

    /// Whether this container wants the codec's headers out of band (an encoder must know before it opens).
    var wantsGlobalHeader: Bool { writer?.wantsGlobalHeader ?? false }

    /// Creates the file and writes the header. `clusterMilliseconds`: bytes leave the muxer only when a cluster
    /// closes, so bound that (a crash then loses at most that much) and flush after every packet; nil: libav's way.
    /// A recording (`clusterMilliseconds` given) holds disk space past its end to be finished in (`isShortOfSpace`).
    func open(clusterMilliseconds: Int?) throws(MediaError) {
        guard let writer else { throw failure("create", "avio_open", cff_AVERROR_EINVAL) }
        do throws(LibavCall) {
            if clusterMilliseconds != nil {
                try writer.create(holding: headroom, calls: calls)
            } else {
                try writer.create()
            }
            createdFile = true
            // avio_flush after every packet (what `ffmpeg -flush_packets 1` does): one write(2) per closed cluster, and
            // av_write_frame then reports I/O errors. Measured the same CPU as calling avio_flush here by hand.
            try writer.writeHeader(options: clusterMilliseconds.map { [("cluster_time_limit", String($0))] } ?? [],
                                   flushEveryPacket: clusterMilliseconds != nil)
        } catch { throw failure("create", error) }
        headerWritten = true
        guard let p = av_packet_alloc(), let lp = av_packet_alloc() else { throw failure("create", "av_packet_alloc", cff_AVERROR_ENOMEM) }
        packet = p
        lastPacket = lp
    }

    // MARK: disk space

    /// The disk could not give this recording's file the space it holds to be finished in: take no more frames,
    /// finish it now (the space held still takes the frames written, the index and the trailer).
    var isShortOfSpace: Bool { writer?.file?.isShortOfSpace ?? false }
    /// The errno that made the file short of space (ENOSPC, EDQUOT), 0 if none.
    var spaceErrno: Int32 { writer?.file?.spaceErrno ?? 0 }
    /// The file's size when the last packet was written whole: a recording flushes after every packet and a
    /// cluster reaches the file whole, so this is where its last whole cluster ends (0 before any).
    private(set) var wholeClustersEnd: Int64 = 0

    /// What finishing the file may still write: the cluster being filled (at most the longest run of packets one
    /// cluster has held, twice over for the one closing as the next opens), a cue per packet and the trailer.
    private var headroom: Int64 { 256 * 1024 + 2 * largestRun + 48 * packets }

    /// Counts a packet of `size` bytes written at `pts` (the stream's time base) toward the headroom.
    private func count(size: Int32, pts: Int64, key: Bool) {
        packets += 1
        var milliseconds = pts
        if let stream { milliseconds = av_rescale_q(pts, stream.pointee.time_base, AVRational(num: 1, den: 1000)) }
        // A cluster closes at a video keyframe and at least every second (clusterMilliseconds ≤ 1000).
        if (key && stream?.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO) || milliseconds - run.startMilliseconds >= 1000 {
            run = (0, milliseconds)
        }
        run.bytes += Int64(size)
        largestRun = max(largestRun, run.bytes)
        writer?.file?.headroom = headroom
    }

    // MARK: writing

    /// Writes `bytes` as one keyframe packet at `pts` lasting `duration` (both in `timeBase`). `keep`: kept for
    /// `writeRepeat`. `allocating` and `writing` are the sentences' operations for the two steps.
    func write(_ bytes: UnsafeRawBufferPointer, pts: Int64, duration: Int64, timeBase: TimeBase, keep: Bool,
               allocating: String, writing: String) throws(MediaError) {
        guard writer != nil, let stream, let packet, let lastPacket, let base = bytes.baseAddress else {
            throw MediaError.invalid("write to", path: reportedPath, "the recording is already finished")
        }
        try check(av_new_packet(packet, Int32(bytes.count)), allocating, "av_new_packet")
        memcpy(packet.pointee.data, base, bytes.count)
        packet.pointee.pts = pts
        packet.pointee.dts = pts
        packet.pointee.duration = duration
        packet.pointee.flags |= cff_AV_PKT_FLAG_KEY
        packet.pointee.stream_index = stream.pointee.index
        av_packet_rescale_ts(packet, timeBase.rational, stream.pointee.time_base)
        try write(packet, keep: keep, lastPacket, writing)
    }

    /// Whether a kept packet can be written again.
    var hasKeptPacket: Bool { (lastPacket?.pointee.size ?? 0) > 0 }

    /// Writes the kept packet again at `pts` lasting `duration` (in `timeBase`).
    func writeRepeat(pts: Int64, duration: Int64, timeBase: TimeBase) throws(MediaError) {
        guard let writer, let stream, let lastPacket else {
            throw MediaError.invalid("write to", path: reportedPath, "the recording is already finished")
        }
        let ts = av_rescale_q(pts, timeBase.rational, stream.pointee.time_base)
        lastPacket.pointee.pts = ts
        lastPacket.pointee.dts = ts
        lastPacket.pointee.duration = av_rescale_q(duration, timeBase.rational, stream.pointee.time_base)
        lastPacket.pointee.pos = -1
        count(size: lastPacket.pointee.size, pts: ts, key: true)
        // av_write_frame leaves the caller's packet untouched, so lastPacket stays reusable.
        do throws(LibavCall) { try writer.write(lastPacket) } catch { throw failure("write a frame to", error) }
        wholeClustersEnd = writer.file?.size ?? 0
    }

    /// Moves every packet `encoder` has ready into the file (its time base µs); `keep`: each is kept for `writeRepeat`.
    func writeEncoded(from encoder: VideoEncoder, frameDuration: Int64, keep: Bool) throws(MediaError) {
        guard let cc = encoder.context, writer != nil, let stream, let packet, let lastPacket else {
            throw MediaError.invalid("write to", path: reportedPath, "the recording is already finished")
        }
        while true {
            let r = avcodec_receive_packet(cc, packet)
            if r == cff_EAGAIN_error || r == cff_AVERROR_EOF { return }
            try check(r, "encode a frame into", "avcodec_receive_packet")
            if packet.pointee.duration == 0 { packet.pointee.duration = frameDuration }
            av_packet_rescale_ts(packet, TimeBase.microseconds.rational, stream.pointee.time_base)
            packet.pointee.stream_index = stream.pointee.index
            try write(packet, keep: keep, lastPacket, "write a frame to")
        }
    }

    /// Copies every packet of the input's first stream as it is; the last one only if `lastIsWhole(bytes, corrupt)`
    /// (one packet is held back: only once another follows is it known to be whole). Returns the packets written
    /// and whether the last was left out.
    func copyPackets(from input: Demuxer,
                     lastIsWhole: (UnsafeBufferPointer<UInt8>, _ corrupt: Bool) -> Bool) throws(MediaError) -> (frames: Int, droppedTail: Bool) {
        guard let writer, let outStream = stream, let packet, let held = lastPacket else {
            throw MediaError.invalid("write to", path: reportedPath, "the recording is already finished")
        }
        let inStream = input.stream
        var holding = false
        var frames = 0
        func write(_ p: UnsafeMutablePointer<AVPacket>) throws(MediaError) {
            p.pointee.stream_index = 0
            av_packet_rescale_ts(p, inStream.pointee.time_base, outStream.pointee.time_base)
            do throws(LibavCall) { try writer.write(p) } catch { throw failure("write a frame to", error) }
            frames += 1
        }
        while av_read_frame(input.context, packet) >= 0 {
            defer { av_packet_unref(packet) }
            guard packet.pointee.stream_index == 0 else { continue }
            if holding { try write(held); av_packet_unref(held) }
            av_packet_move_ref(held, packet)
            holding = true
        }
        var droppedTail = false
        if holding {
            let data = UnsafeBufferPointer(start: held.pointee.data, count: Int(held.pointee.size))
            if lastIsWhole(data, held.pointee.flags & cff_AV_PKT_FLAG_CORRUPT != 0) { try write(held) } else { droppedTail = true }
            av_packet_unref(held)
        }
        return (frames, droppedTail)
    }

    /// Flushes `encoder` (if any) into the file, writes the trailer and closes the file; the first failure is
    /// thrown, after everything is released. Idempotent.
    func finish(flushing encoder: VideoEncoder? = nil, frameDuration: Int64 = 0, keep: Bool = false) throws(MediaError) {
        var firstError: MediaError?
        if headerWritten, writer != nil, let encoder {
            do throws(MediaError) {
                try encoder.flush()
                try writeEncoded(from: encoder, frameDuration: frameDuration, keep: keep)
            } catch { firstError = error }
        }
        do throws(LibavCall) { try writer?.finish() } catch {
            if firstError == nil { firstError = failure(error.call == "avio_closep" ? "close" : "finish", error) }
        }
        release()
        if let firstError { throw firstError }
    }

    /// Frees every libav object; safe to call repeatedly.
    func release() {
        if packet != nil { av_packet_free(&packet) }
        if lastPacket != nil { av_packet_free(&lastPacket) }
        writer?.release()
        writer = nil
        stream = nil
    }

    /// Writes `packet`; with `keep` it moves into `lastPacket` for `writeRepeat`, else it is unreffed.
    private func write(_ packet: UnsafeMutablePointer<AVPacket>, keep: Bool, _ lastPacket: UnsafeMutablePointer<AVPacket>,
                       _ operation: String) throws(MediaError) {
        guard let writer else { throw MediaError.invalid("write to", path: reportedPath, "the recording is already finished") }
        count(size: packet.pointee.size, pts: packet.pointee.pts, key: packet.pointee.flags & cff_AV_PKT_FLAG_KEY != 0)
        do throws(LibavCall) {
            try writer.write(packet)
        } catch {
            av_packet_unref(packet)
            throw failure(operation, error)
        }
        wholeClustersEnd = writer.file?.size ?? 0
        if keep {
            av_packet_unref(lastPacket)
            av_packet_move_ref(lastPacket, packet)
        } else {
            av_packet_unref(packet)
        }
    }

    @discardableResult
    private func check(_ result: Int32, _ operation: String, _ call: String) throws(MediaError) -> Int32 {
        if result < 0 { throw failure(operation, call, result) }
        return result
    }

    private func failure(_ operation: String, _ call: String, _ code: Int32) -> MediaError {
        MediaError(ffmpeg: code, operation: fixedOperation ?? operation, path: reportedPath, call: call)
    }

    private func failure(_ operation: String, _ call: LibavCall) -> MediaError { failure(operation, call.call, call.code) }
}
