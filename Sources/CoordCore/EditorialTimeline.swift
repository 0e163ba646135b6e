import Foundation

/// The take as an OpenTimelineIO timeline (`<take-id>.otio` in the take directory), for the editorial handoff.
///
/// One video track per camera in manifest order, named `<node>/<camera>`, each holding one clip of the camera's
/// `.mkv`, or of its delivered `.mov` once `coord deliver` made it (CONTRACT §15; every target URL relative to the
/// take directory), with a marker per filled run and per event of the camera. Everything runs at the take's own
/// rate, as the XMLs do (a 15 fps take's `.otio` says 15), and starts at the group-0 timecode's frame of the day,
/// and every clip covers groups `0..<groups`: since frame `i` of every file is group `i` (CONTRACT §4), the tracks
/// line up frame for frame by group. A camera whose `.mkv` was not collected keeps its track with a missing media
/// reference. Then one audio track per microphone, its clip over the same groups at the same rate.
/// The JSON mirrors what opentimelineio 0.18 writes (`Timeline.1`, `Stack.1`, `Track.1`, `Clip.2`).
public enum EditorialTimeline {
    /// The `.otio` file's bytes: JSON with sorted keys.
    /// - Parameters:
    ///   - delivered: the deliverable standing for a recorded file (`node/cam.mkv` or `node/mic.mka` → `deliver/…`),
    ///     for those that exist; the others point at the recording.
    ///   - markers: each camera's and microphone's markers, keyed `node/camera` or `node/mic`.
    public static func otio(_ manifest: TakeManifest, delivered: [String: String] = [:],
                            markers: [String: [EditorMarker]] = [:]) throws -> Data {
        try JSONSerialization.data(withJSONObject: timeline(manifest, delivered: delivered, markers: markers),
                                   options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
    }

    /// The timeline as a JSON object.
    public static func timeline(_ manifest: TakeManifest, delivered: [String: String] = [:],
                                markers: [String: [EditorMarker]] = [:]) -> [String: Any] {
        // The grid's rate is every camera's fps; a camera under a frame-rate cap still holds one frame per group.
        let fps = Timecode.fps(framePeriodMicroseconds: manifest.framePeriodMicroseconds)
        // 29.97 is OTIO's 30000/1001 as a Double, as its adapters read NTSC rates.
        let rate = manifest.rate.value
        let unit: Int64 = 1  // units of the timeline's rate per frame of the grid
        let start = (manifest.timecode.flatMap { Timecode($0, rate: manifest.rate) }?.frameOfDay ?? 0) * unit
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
            if let movie = delivered[path] {
                // The delivered .mov holds exactly one frame per group (CONTRACT §10).
                media = [
                    "OTIO_SCHEMA": "ExternalReference.1", "metadata": ["coord": ["recorded": path]], "name": "",
                    "available_range": range(start: start, duration: manifest.groups * unit, rate: rate),
                    "available_image_bounds": NSNull(), "target_url": movie,
                ]
            } else if camera.files.contains(where: { $0.path == path }) {
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
                                           metadata: ["coord": ["node": camera.node, "camera": camera.camera, "ordinal": camera.ordinal]],
                                           markers: otioMarkers(markers[name] ?? [], start: start, unit: unit, rate: rate))
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
            let span = range(start: start + lead * unit, duration: a.sampleRate > 0 ? Int64(Double(a.frames) * rate / Double(a.sampleRate)) : 0, rate: rate)
            let wav = delivered[a.path]
            let media: [String: Any] = wav != nil
                ? ["OTIO_SCHEMA": "ExternalReference.1", "metadata": ["coord": ["recorded": a.path]], "name": "",
                   "available_range": range(start: start, duration: manifest.groups * unit, rate: rate),
                   "available_image_bounds": NSNull(), "target_url": wav!]
                : a.sha256.isEmpty
                ? ["OTIO_SCHEMA": "MissingReference.1", "metadata": ["coord": ["path": a.path]], "name": "",
                   "available_range": NSNull(), "available_image_bounds": NSNull()]
                : ["OTIO_SCHEMA": "ExternalReference.1", "metadata": [String: Any](), "name": "",
                   "available_range": span, "available_image_bounds": NSNull(), "target_url": a.path]
            let clip: [String: Any] = item("Clip.2", name: name, source: range(start: start, duration: manifest.groups * unit, rate: rate),
                                           metadata: ["coord": ["node": a.node, "mic": a.mic, "sample_rate": a.sampleRate,
                                                                "rate_error_ppm": a.rateErrorPPM]],
                                           markers: otioMarkers(markers[name] ?? [], start: start, unit: unit, rate: rate))
                .merging(["media_references": ["DEFAULT_MEDIA": media], "active_media_reference_key": "DEFAULT_MEDIA"]) { $1 }
            return item("Track.1", name: name).merging(["children": [clip], "kind": "Audio"]) { $1 }
        }
        return [
            "OTIO_SCHEMA": "Timeline.1", "metadata": ["coord": coord], "name": manifest.takeID,
            "global_start_time": time(start, rate: rate),
            "tracks": item("Stack.1", name: "tracks").merging(["children": tracks + audioTracks]) { $1 },
        ]
    }

    /// The fields every composable item carries.
    private static func item(_ schema: String, name: String, source: Any = NSNull(), metadata: [String: Any] = [:],
                             markers: [[String: Any]] = []) -> [String: Any] {
        ["OTIO_SCHEMA": schema, "metadata": metadata, "name": name, "source_range": source, "effects": [Any](),
         "markers": markers, "enabled": true, "color": NSNull()]
    }

    /// OTIO `Marker.2`s in the clip's source time (group 0 at `start`).
    private static func otioMarkers(_ markers: [EditorMarker], start: Int64, unit: Int64, rate: Double) -> [[String: Any]] {
        markers.map { m in
            ["OTIO_SCHEMA": "Marker.2", "metadata": ["coord": ["note": m.note]], "name": m.name, "color": m.name.contains("filled") ? "RED" : "ORANGE",
             "comment": m.note, "marked_range": range(start: start + m.group * unit, duration: m.length * unit, rate: rate)]
        }
    }

    private static func time(_ value: Int64, rate: Double) -> [String: Any] {
        ["OTIO_SCHEMA": "RationalTime.1", "rate": rate, "value": Double(value)]
    }

    private static func range(start: Int64, duration: Int64, rate: Double) -> [String: Any] {
        ["OTIO_SCHEMA": "TimeRange.1", "start_time": time(start, rate: rate), "duration": time(duration, rate: rate)]
    }
}
