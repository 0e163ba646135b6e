/// The encodings a recording can use: one name for each in the rig file, on the wire (`codec` strings) and in the
/// console's API, mapped to this type at those edges.
public enum VideoCodec: String, CaseIterable, Sendable {
    /// Motion JPEG, yuvj420p, fixed quantiser `quality` (like `ffmpeg -q:v`).
    case mjpeg
    /// FFV1 (lossless), yuv420p, every frame a keyframe so any packet can be repeated or cut at.
    case ffv1
    /// H.264 via libx264 (preset ultrafast, CRF 17 + 2·quality, a keyframe every second), yuv420p.
    case h264

    /// The codec a name spells, in any case ("MJPEG", "ffv1"); nil for any other name.
    public init?(named name: String) { self.init(rawValue: name.lowercased()) }

    /// Every packet stands alone (no inter-frame prediction): a held group repeats the whole packet on disk.
    public var isIntra: Bool { self != .h264 }

    /// "mjpeg, ffv1 or h264", for sentences listing what may be asked.
    public static var spelled: String {
        let names = allCases.map(\.rawValue)
        return names.dropLast().joined(separator: ", ") + " or " + names.last!
    }
}
