import Foundation

/// Finalizes a Matroska file whose writer was killed (SIGKILL, power loss): no cues, no duration, and perhaps a
/// last block cut short. Every whole frame is copied, as it is (no re-encoding), into a new file with a proper
/// trailer, which then replaces the old one; a cut or corrupt last frame is left out. libav through the `Muxer`.
public enum MatroskaRepair {
    public struct Outcome: Sendable, Equatable {
        /// Frames the repaired file holds.
        public var frames: Int
        /// Whether a cut or corrupt last frame was left out.
        public var droppedTail: Bool
    }

    /// The whole frames a file holds, read to its end as `repair` would copy them (a file whose writer failed
    /// mid-cluster: the frames it lost are those past this count).
    public static func wholeFrames(path: String) throws(MediaError) -> Int {
        let input = try Demuxer(path: path, operation: "read")
        let isJPEG = input.isJPEG
        return input.wholePackets { data, corrupt in !corrupt && !(isJPEG && !endsJPEG(data)) }
    }

    /// A JPEG ends with its EOI marker; a cut one does not.
    private static func endsJPEG(_ data: UnsafeBufferPointer<UInt8>) -> Bool {
        data.count >= 2 && data[data.count - 2] == 0xFF && data[data.count - 1] == 0xD9
    }

    public static func repair(path: String) throws(MediaError) -> Outcome {
        let input = try Demuxer(path: path, operation: "repair")
        let isJPEG = input.isJPEG
        let temporary = path + ".repair"
        let muxer = try Muxer(path: temporary, reportedPath: path, fixedOperation: "repair")
        defer { muxer.release() }
        try muxer.addStream(copying: input)
        try muxer.open(clusterMilliseconds: nil)
        let (frames, droppedTail) = try muxer.copyPackets(from: input) { data, corrupt in
            // A JPEG ends with its EOI marker; a cut one does not.
            let cut = isJPEG && !(data.count >= 2 && data[data.count - 2] == 0xFF && data[data.count - 1] == 0xD9)
            return !corrupt && !cut
        }
        try muxer.finish()
        guard rename(temporary, path) == 0 else {
            let code = errno
            // AVERROR(e) is -e.
            throw MediaError(operation: "repair", path: path, code: -code, reason: "cannot replace it with its repaired copy: \(String(cString: strerror(code)))")
        }
        return Outcome(frames: frames, droppedTail: droppedTail)
    }
}
