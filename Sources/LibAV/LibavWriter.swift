// The writing end of the libav funnel: every file coord writes through libavformat (the recorder's Matroska, the
// repair's copy, `coord deliver`'s QuickTime and WAV) is created, written and closed here. Callers word the sentence.
import CFFmpeg

/// A libav call that failed, with libav's code: the caller turns it into its own sentence.
struct LibavCall: Error {
    let call: String
    let code: Int32

    /// FFmpeg's own words for `code`.
    static func text(_ code: Int32) -> String {
        var buffer = [CChar](repeating: 0, count: Int(cff_AV_ERROR_MAX_STRING_SIZE))
        _ = cff_err2str(code, &buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// One output file of one container (`matroska`, `mov`, `wav`): its streams, header, packets and trailer. Not
/// thread-safe: one writer drives it.
final class LibavWriter {
    let path: String
    private(set) var context: UnsafeMutablePointer<AVFormatContext>?
    /// Whether `path` was created (to be removed again if set-up fails after that).
    private(set) var createdFile = false
    private(set) var headerWritten = false
    /// The file under a recording's own I/O context (`create(holding:)`), which holds disk space past its end.
    private(set) var file: HeadroomFile?

    init(format: String, path: String) throws(LibavCall) {
        self.path = path
        cff_log_quiet()
        var fc: UnsafeMutablePointer<AVFormatContext>?
        let r = avformat_alloc_output_context2(&fc, nil, format, path)
        guard r >= 0, let fc else { throw LibavCall(call: "avformat_alloc_output_context2", code: r < 0 ? r : cff_AVERROR_ENOMEM) }
        context = fc
    }

    deinit { release() }

    func newStream() throws(LibavCall) -> UnsafeMutablePointer<AVStream> {
        guard let fc = context else { throw LibavCall(call: "avformat_new_stream", code: cff_AVERROR_EINVAL) }
        guard let st = avformat_new_stream(fc, nil) else { throw LibavCall(call: "avformat_new_stream", code: cff_AVERROR_ENOMEM) }
        return st
    }

    /// Sets one of the file's global tags (a WAV's `bext` fields are tags too).
    func setTag(_ key: String, _ value: String) throws(LibavCall) {
        guard let fc = context else { return }
        let r = av_dict_set(&fc.pointee.metadata, key, value, 0)
        if r < 0 { throw LibavCall(call: "av_dict_set(\(key))", code: r) }
    }

    /// Copies every global tag of another file.
    func copyTags(from input: UnsafeMutablePointer<AVFormatContext>) {
        guard let fc = context else { return }
        _ = av_dict_copy(&fc.pointee.metadata, input.pointee.metadata, 0)
    }

    /// Whether this container wants the codec's headers out of band (an encoder must know before it opens).
    var wantsGlobalHeader: Bool {
        guard let fc = context else { return false }
        return fc.pointee.oformat.pointee.flags & cff_AVFMT_GLOBALHEADER != 0
    }

    /// Creates the file.
    func create() throws(LibavCall) {
        guard let fc = context else { throw LibavCall(call: "avio_open", code: cff_AVERROR_EINVAL) }
        let r = avio_open(&fc.pointee.pb, path, cff_AVIO_FLAG_WRITE)
        if r < 0 { throw LibavCall(call: "avio_open", code: r) }
        createdFile = true
    }

    /// Creates the file as a `HeadroomFile` holding `headroom` bytes past its end, written through an I/O context of
    /// this writer's own (libav's file protocol would report a full disk only once the trailer no longer fits).
    func create(holding headroom: Int64, calls: DiskCalls) throws(LibavCall) {
        guard let fc = context else { throw LibavCall(call: "avio_open", code: cff_AVERROR_EINVAL) }
        let file: HeadroomFile
        do throws(HeadroomFile.Failure) {
            file = try HeadroomFile(path: path, headroom: headroom, calls: calls)
        } catch { throw LibavCall(call: error.call, code: cff_averror(error.code)) }
        createdFile = true
        guard let pb = cff_avio_alloc_write_context(32768, Unmanaged.passUnretained(file).toOpaque(), headroomWrite, headroomSeek) else {
            file.close()
            throw LibavCall(call: "avio_alloc_context", code: cff_AVERROR_ENOMEM)
        }
        fc.pointee.pb = pb
        fc.pointee.flags |= AVFMT_FLAG_CUSTOM_IO
        self.file = file
    }

    /// Writes the header with the muxer's `options` (in the order given). `flushEveryPacket`: avio_flush after every
    /// packet, as `ffmpeg -flush_packets 1`.
    func writeHeader(options: [(String, String)] = [], flushEveryPacket: Bool = false) throws(LibavCall) {
        guard let fc = context else { throw LibavCall(call: "avformat_write_header", code: cff_AVERROR_EINVAL) }
        var dictionary: OpaquePointer?
        defer { av_dict_free(&dictionary) }
        for (key, value) in options {
            let r = av_dict_set(&dictionary, key, value, 0)
            if r < 0 { throw LibavCall(call: "av_dict_set", code: r) }
        }
        if flushEveryPacket { fc.pointee.flush_packets = 1 }
        let r = options.isEmpty ? avformat_write_header(fc, nil) : avformat_write_header(fc, &dictionary)
        if r < 0 { throw LibavCall(call: "avformat_write_header", code: r) }
        headerWritten = true
    }

    /// Writes one packet (its stream index and timestamps set by the caller). av_write_frame does not take the packet
    /// over: the caller unrefs or reuses it.
    func write(_ packet: UnsafeMutablePointer<AVPacket>) throws(LibavCall) {
        guard let fc = context else { throw LibavCall(call: "av_write_frame", code: cff_AVERROR_EINVAL) }
        let r = av_write_frame(fc, packet)
        if r < 0 { throw LibavCall(call: "av_write_frame", code: r) }
    }

    /// Writes the trailer (if the header was written) and closes the file; both are tried, the first failure is
    /// thrown after everything is released. Idempotent.
    func finish() throws(LibavCall) {
        var firstError: LibavCall?
        if headerWritten, let fc = context {
            let r = av_write_trailer(fc)
            if r < 0 { firstError = LibavCall(call: "av_write_trailer", code: r) }
        }
        if let file, let fc = context {
            if let pb = fc.pointee.pb {
                avio_flush(pb)
                if pb.pointee.error < 0, firstError == nil { firstError = LibavCall(call: "avio_flush", code: pb.pointee.error) }
                cff_avio_free_write_context(&fc.pointee.pb)
            }
            let r = file.close()
            if r != 0, firstError == nil { firstError = LibavCall(call: "avio_closep", code: cff_averror(r)) }
            self.file = nil
        } else if let fc = context, fc.pointee.pb != nil {
            let r = avio_closep(&fc.pointee.pb)
            if r < 0, firstError == nil { firstError = LibavCall(call: "avio_closep", code: r) }
        }
        release()
        if let firstError { throw firstError }
    }

    /// Frees every libav object without a trailer; safe to call repeatedly.
    func release() {
        if let fc = context {
            if file != nil {
                if let pb = fc.pointee.pb { avio_flush(pb) }
                cff_avio_free_write_context(&fc.pointee.pb)
            } else if fc.pointee.pb != nil {
                avio_closep(&fc.pointee.pb)
            }
            avformat_free_context(fc)
            context = nil
        }
        file?.close()
        file = nil
    }
}

// The recording's I/O context calls these with its `HeadroomFile` as the opaque pointer (unretained: the writer
// holds the file for as long as the context lives).
private let headroomWrite: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<UInt8>?, Int32) -> Int32 = { opaque, buffer, size in
    guard let opaque, size >= 0 else { return cff_AVERROR_EINVAL }
    let file = Unmanaged<HeadroomFile>.fromOpaque(opaque).takeUnretainedValue()
    let r = file.write(UnsafeRawBufferPointer(start: buffer, count: Int(size)))
    return r == 0 ? size : cff_averror(r)
}

private let headroomSeek: @convention(c) (UnsafeMutableRawPointer?, Int64, Int32) -> Int64 = { opaque, offset, whence in
    guard let opaque else { return Int64(cff_AVERROR_EINVAL) }
    let file = Unmanaged<HeadroomFile>.fromOpaque(opaque).takeUnretainedValue()
    if whence & cff_AVSEEK_SIZE != 0 { return file.size }
    let position = file.seek(to: offset, whence: whence & ~cff_AVSEEK_FORCE)
    return position < 0 ? Int64(cff_AVERROR_EINVAL) : position
}
