import CFFmpeg

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A Matroska file read back, its first stream's packets as they are.
final class Demuxer {
    let context: UnsafeMutablePointer<AVFormatContext>
    let stream: UnsafeMutablePointer<AVStream>

    /// Opens `path`; every failure's sentence says `operation`.
    init(path: String, operation: String) throws(MediaError) {
        cff_log_quiet()
        var input: UnsafeMutablePointer<AVFormatContext>?
        var r = avformat_open_input(&input, path, nil, nil)
        guard r >= 0, let ic = input else { throw MediaError(ffmpeg: r, operation: operation, path: path, call: "avformat_open_input") }
        r = avformat_find_stream_info(ic, nil)
        guard r >= 0 else {
            avformat_close_input(&input)
            throw MediaError(ffmpeg: r, operation: operation, path: path, call: "avformat_find_stream_info")
        }
        guard ic.pointee.nb_streams >= 1, let first = ic.pointee.streams[0] else {
            avformat_close_input(&input)
            throw MediaError(operation: operation, path: path, code: cff_AVERROR_EINVAL, reason: "it holds no stream")
        }
        context = ic
        stream = first
    }

    deinit {
        var input: UnsafeMutablePointer<AVFormatContext>? = context
        avformat_close_input(&input)
    }

    /// Whether the stream is Motion JPEG (each packet one JPEG, ending in its EOI marker).
    var isJPEG: Bool { stream.pointee.codecpar.pointee.codec_id == AV_CODEC_ID_MJPEG }

    /// Counts the first stream's packets to the end of the file, the last one only if `lastIsWhole(bytes, corrupt)`.
    func wholePackets(lastIsWhole: (UnsafeBufferPointer<UInt8>, _ corrupt: Bool) -> Bool) -> Int {
        var allocated = (av_packet_alloc(), av_packet_alloc())
        defer { av_packet_free(&allocated.0); av_packet_free(&allocated.1) }
        guard let packet = allocated.0, let held = allocated.1 else { return 0 }
        // One packet is held back: only once another follows is it known to be whole.
        var count = 0
        var holding = false
        while av_read_frame(context, packet) >= 0 {
            defer { av_packet_unref(packet) }
            guard packet.pointee.stream_index == 0 else { continue }
            if holding { count += 1; av_packet_unref(held) }
            av_packet_move_ref(held, packet)
            holding = true
        }
        if holding {
            let data = UnsafeBufferPointer(start: held.pointee.data, count: Int(held.pointee.size))
            if lastIsWhole(data, held.pointee.flags & cff_AV_PKT_FLAG_CORRUPT != 0) { count += 1 }
            av_packet_unref(held)
        }
        return count
    }
}
