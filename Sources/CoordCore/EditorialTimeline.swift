import Foundation

/// The take as an OpenTimelineIO timeline (`<take-id>.otio` in the take directory), for the editorial handoff.
///
/// One video track per camera in manifest order, named `<node>/<camera>`, each holding one clip of the camera's
/// `.mkv`. Everything runs at the grid's rate (or a multiple, below) and starts at the group-0 timecode's frame of
/// the day, and every clip covers groups `0..<groups`: since frame `i` of every file is group `i` (CONTRACT §4), the tracks line up frame for
/// frame by group. A camera whose `.mkv` was not collected keeps its track with a missing media reference. Then one
/// audio track per microphone, its clip over the same groups at the same rate, so every track lines up.
/// A grid rate SMPTE timecode lacks (15 fps, 10, 12, 20) is written at its smallest multiple that has one (30, 24,
/// 60), each frame that many units long: OTIO's editorial adapters write every range as timecode and refuse the rest.
/// The JSON mirrors what opentimelineio 0.18 writes (`Timeline.1`, `Stack.1`, `Track.1`, `Clip.2`).
public enum EditorialTimeline {
    /// The `.otio` file's bytes: JSON with sorted keys.
    public static func otio(_ manifest: TakeManifest) throws -> Data {
        try JSONSerialization.data(withJSONObject: timeline(manifest), options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
    }

    /// The timeline as a JSON object.
    public static func timeline(_ manifest: TakeManifest) -> [String: Any] {
        // The grid's rate is every camera's fps; a camera under a frame-rate cap still holds one frame per group.
        let fps = Timecode.fps(framePeriodMicroseconds: manifest.framePeriodMicroseconds)
        let rate = editRate(fps: fps)
        let unit = Int64(rate / fps)  // units of the timeline's rate per frame of the grid
        let start = (manifest.timecode.flatMap { Timecode($0, fps: fps) }?.frameOfDay ?? 0) * unit
        var coord: [String: Any] = [
            "take_id": manifest.takeID, "status": manifest.status.rawValue, "t0_us": manifest.t0Microseconds,
            "frame_period_us": manifest.framePeriodMicroseconds, "start_wallclock": manifest.startWallclock,
            "groups": manifest.groups, "fps": fps,
        ]
        if let timecode = manifest.timecode { coord["timecode"] = timecode }
        let tracks: [[String: Any]] = manifest.cameras.map { camera in
            let name = "\(camera.node)/\(camera.camera)"
            let path = "\(name).mkv"
            let media: [String: Any]
            if camera.files.contains(where: { $0.path == path }) {
                media = [
                    "OTIO_SCHEMA": "ExternalReference.1", "metadata": [String: Any](), "name": "",
                    "available_range": range(start: start, duration: camera.frames * unit, rate: rate),
                    "available_image_bounds": NSNull(), "target_url": path,
                ]
            } else {
                media = [
                    "OTIO_SCHEMA": "MissingReference.1", "metadata": ["coord": ["path": path]], "name": "",
                    "available_range": NSNull(), "available_image_bounds": NSNull(),
                ]
            }
            let clip: [String: Any] = item("Clip.2", name: name, source: range(start: start, duration: manifest.groups * unit, rate: rate),
                                           metadata: ["coord": ["node": camera.node, "camera": camera.camera, "ordinal": camera.ordinal]])
                .merging(["media_references": ["DEFAULT_MEDIA": media], "active_media_reference_key": "DEFAULT_MEDIA"]) { $1 }
            return item("Track.1", name: name).merging(["children": [clip], "kind": "Video"]) { $1 }
        }
        // One audio track per microphone (CONTRACT §9), ranged like the pictures: at the grid's rate (the FCP 7 XML
        // adapter writes every range as SMPTE timecode, which has no 48 kHz), over groups 0..<groups. The file's
        // own span is its first sample's group and its length in whole frames.
        let audioTracks: [[String: Any]] = (manifest.audio ?? []).map { a in
            let name = "\(a.node)/\(a.mic)"
            let period = max(manifest.framePeriodMicroseconds, 1)
            let lead = Int64((Double(a.startMicroseconds - manifest.t0Microseconds) / Double(period)).rounded())
            let span = range(start: start + lead * unit, duration: a.sampleRate > 0 ? a.frames * Int64(rate) / Int64(a.sampleRate) : 0, rate: rate)
            let media: [String: Any] = a.sha256.isEmpty
                ? ["OTIO_SCHEMA": "MissingReference.1", "metadata": ["coord": ["path": a.path]], "name": "",
                   "available_range": NSNull(), "available_image_bounds": NSNull()]
                : ["OTIO_SCHEMA": "ExternalReference.1", "metadata": [String: Any](), "name": "",
                   "available_range": span, "available_image_bounds": NSNull(), "target_url": a.path]
            let clip: [String: Any] = item("Clip.2", name: name, source: range(start: start, duration: manifest.groups * unit, rate: rate),
                                           metadata: ["coord": ["node": a.node, "mic": a.mic, "sample_rate": a.sampleRate,
                                                                "rate_error_ppm": a.rateErrorPPM]])
                .merging(["media_references": ["DEFAULT_MEDIA": media], "active_media_reference_key": "DEFAULT_MEDIA"]) { $1 }
            return item("Track.1", name: name).merging(["children": [clip], "kind": "Audio"]) { $1 }
        }
        return [
            "OTIO_SCHEMA": "Timeline.1", "metadata": ["coord": coord], "name": manifest.takeID,
            "global_start_time": time(start, rate: rate),
            "tracks": item("Stack.1", name: "tracks").merging(["children": tracks + audioTracks]) { $1 },
        ]
    }

    /// The SMPTE rates OpenTimelineIO's timecode accepts that a whole grid rate can map to (integer, non-drop).
    static let timecodeRates = [24, 25, 30, 48, 50, 60]

    /// The timeline's rate for a grid of `fps`: `fps` itself when SMPTE timecode has it, else its smallest multiple
    /// that it has (15 → 30), else `fps` (7, 120: no timecode rate holds every frame; the adapters will refuse it).
    public static func editRate(fps: Int) -> Int {
        guard fps > 0, !timecodeRates.contains(fps) else { return fps }
        return timecodeRates.first { $0 % fps == 0 } ?? fps
    }

    /// The fields every composable item carries.
    private static func item(_ schema: String, name: String, source: Any = NSNull(), metadata: [String: Any] = [:]) -> [String: Any] {
        ["OTIO_SCHEMA": schema, "metadata": metadata, "name": name, "source_range": source, "effects": [Any](),
         "markers": [Any](), "enabled": true, "color": NSNull()]
    }

    private static func time(_ value: Int64, rate: Int) -> [String: Any] {
        ["OTIO_SCHEMA": "RationalTime.1", "rate": Double(rate), "value": Double(value)]
    }

    private static func range(start: Int64, duration: Int64, rate: Int) -> [String: Any] {
        ["OTIO_SCHEMA": "TimeRange.1", "start_time": time(start, rate: rate), "duration": time(duration, rate: rate)]
    }
}
