import CFFmpeg
import Foundation

/// Finalizes a Matroska file whose writer was killed (SIGKILL, power loss): no cues, no duration, and perhaps a
/// last block cut short. Every whole frame is copied, as it is (no re-encoding), into a new file with a proper
/// trailer, which then replaces the old one; a cut or corrupt last frame is left out.
public enum MatroskaRepair {
    public struct Outcome: Sendable, Equatable {
        /// Frames the repaired file holds.
        public var frames: Int
        /// Whether a cut or corrupt last frame was left out.
        public var droppedTail: Bool
    }

    public static func repair(path: String) throws(MediaError) -> Outcome {
        func failure(_ call: String, _ code: Int32) -> MediaError {
            var buffer = [CChar](repeating: 0, count: Int(cff_AV_ERROR_MAX_STRING_SIZE))
            _ = cff_err2str(code, &buffer, buffer.count)
            return MediaError(operation: "repair", path: path, call: call, code: code, reason: String(cString: buffer))
        }
        cff_log_quiet()
        var input: UnsafeMutablePointer<AVFormatContext>?
        var r = avformat_open_input(&input, path, nil, nil)
        guard r >= 0, let ic = input else { throw failure("avformat_open_input", r) }
        defer { avformat_close_input(&input) }
        r = avformat_find_stream_info(ic, nil)
        guard r >= 0 else { throw failure("avformat_find_stream_info", r) }
        guard ic.pointee.nb_streams >= 1, let inStream = ic.pointee.streams[0] else {
            throw MediaError(operation: "repair", path: path, code: cff_AVERROR_EINVAL, reason: "it holds no stream")
        }
        let isJPEG = inStream.pointee.codecpar.pointee.codec_id == AV_CODEC_ID_MJPEG

        let temporary = path + ".repair"
        var output: UnsafeMutablePointer<AVFormatContext>?
        r = avformat_alloc_output_context2(&output, nil, "matroska", temporary)
        guard r >= 0, let oc = output else { throw failure("avformat_alloc_output_context2", r) }
        var opened = false
        defer {
            if opened { avio_closep(&oc.pointee.pb) }
            avformat_free_context(oc)
        }
        guard let outStream = avformat_new_stream(oc, nil) else { throw failure("avformat_new_stream", cff_AVERROR_ENOMEM) }
        r = avcodec_parameters_copy(outStream.pointee.codecpar, inStream.pointee.codecpar)
        guard r >= 0 else { throw failure("avcodec_parameters_copy", r) }
        outStream.pointee.codecpar.pointee.codec_tag = 0
        outStream.pointee.time_base = inStream.pointee.time_base
        outStream.pointee.avg_frame_rate = inStream.pointee.avg_frame_rate
        outStream.pointee.r_frame_rate = inStream.pointee.r_frame_rate
        _ = av_dict_copy(&oc.pointee.metadata, ic.pointee.metadata, 0)
        _ = av_dict_copy(&outStream.pointee.metadata, inStream.pointee.metadata, 0)
        r = avio_open(&oc.pointee.pb, temporary, cff_AVIO_FLAG_WRITE)
        guard r >= 0 else { throw failure("avio_open", r) }
        opened = true
        r = avformat_write_header(oc, nil)
        guard r >= 0 else { throw failure("avformat_write_header", r) }

        var packetBox = av_packet_alloc(), heldBox = av_packet_alloc()
        defer { av_packet_free(&packetBox); av_packet_free(&heldBox) }
        guard let packet = packetBox, let held = heldBox else { throw failure("av_packet_alloc", cff_AVERROR_ENOMEM) }
        // One packet is held back: only once another follows is it known to be whole.
        var holding = false
        var frames = 0
        func write(_ p: UnsafeMutablePointer<AVPacket>) throws(MediaError) {
            p.pointee.stream_index = 0
            av_packet_rescale_ts(p, inStream.pointee.time_base, outStream.pointee.time_base)
            let w = av_write_frame(oc, p)
            guard w >= 0 else { throw failure("av_write_frame", w) }
            frames += 1
        }
        while av_read_frame(ic, packet) >= 0 {
            defer { av_packet_unref(packet) }
            guard packet.pointee.stream_index == 0 else { continue }
            if holding { try write(held); av_packet_unref(held) }
            av_packet_move_ref(held, packet)
            holding = true
        }
        var droppedTail = false
        if holding {
            let data = UnsafeBufferPointer(start: held.pointee.data, count: Int(held.pointee.size))
            let corrupt = held.pointee.flags & cff_AV_PKT_FLAG_CORRUPT != 0
            // A JPEG ends with its EOI marker; a cut one does not.
            let cut = isJPEG && !(data.count >= 2 && data[data.count - 2] == 0xFF && data[data.count - 1] == 0xD9)
            if corrupt || cut { droppedTail = true } else { try write(held) }
            av_packet_unref(held)
        }
        r = av_write_trailer(oc)
        guard r >= 0 else { throw failure("av_write_trailer", r) }
        avio_closep(&oc.pointee.pb)
        opened = false
        guard rename(temporary, path) == 0 else {
            throw MediaError(operation: "repair", path: path, code: cff_averror(errno), reason: "cannot replace it with its repaired copy: \(String(cString: strerror(errno)))")
        }
        return Outcome(frames: frames, droppedTail: droppedTail)
    }
}
