/// The encodings a recording can use.
public enum VideoCodec: String, CaseIterable, Sendable {
    /// Motion JPEG, yuvj420p, fixed quantiser `quality` (like `ffmpeg -q:v`).
    case mjpeg
    /// FFV1 (lossless), yuv420p, every frame a keyframe so any packet can be repeated or cut at.
    case ffv1
    /// H.264 via libx264 (preset ultrafast, CRF 17 + 2·quality, a keyframe every second), yuv420p.
    case h264
}
