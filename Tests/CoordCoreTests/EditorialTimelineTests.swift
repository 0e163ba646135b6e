import Foundation
import Testing
@testable import CoordCore

@Suite struct EditorialTimelineTests {
    static func camera(_ node: String, _ name: String, ordinal: Int, frames: Int64, collected: Bool = true) -> TakeManifest.Camera {
        let files: [TakeManifest.File] = collected
            ? [.init(path: "\(node)/\(name).mkv", bytes: 1_000, sha256: String(repeating: "ab", count: 32)),
               .init(path: "\(node)/\(name).frames.csv", bytes: 100, sha256: String(repeating: "cd", count: 32))]
            : []
        return .init(node: node, camera: name, ordinal: ordinal, width: 640, height: 480, fps: 30, codec: "mjpeg",
                     frames: frames, dropped: 0, clock: .init(offsetMicroseconds: 0, driftPPM: 0, uncertaintyMicroseconds: 1),
                     files: files)
    }

    var manifest: TakeManifest = {
        var m = TakeManifest(
            takeID: "20260312-141500-scene1-0a1b2c", name: "scene1", status: .partial, t0Microseconds: 123_456_789_000,
            framePeriodMicroseconds: 33_333, groups: 150, startWallclock: "2026-03-12T14:15:00.123456Z",
            cameras: [camera("node-2", "cam0", ordinal: 0, frames: 150), camera("node-1", "cam1", ordinal: 1, frames: 150),
                      camera("node-1", "cam0", ordinal: 2, frames: 0, collected: false)],
            events: [])
        m.timecode = "15:15:00:03"
        return m
    }()

    /// The timeline as JSON objects, decoded from the bytes written.
    func decoded(_ m: TakeManifest) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: EditorialTimeline.otio(m)) as? [String: Any])
    }

    func tracks(_ timeline: [String: Any]) throws -> [[String: Any]] {
        let stack = try #require(timeline["tracks"] as? [String: Any])
        #expect(stack["OTIO_SCHEMA"] as? String == "Stack.1")
        return try #require(stack["children"] as? [[String: Any]])
    }

    func time(_ o: Any?) -> (value: Double, rate: Double)? {
        guard let t = o as? [String: Any], t["OTIO_SCHEMA"] as? String == "RationalTime.1",
              let v = (t["value"] as? NSNumber)?.doubleValue, let r = (t["rate"] as? NSNumber)?.doubleValue else { return nil }
        return (v, r)
    }

    func range(_ o: Any?) -> (start: Double, duration: Double, rate: Double)? {
        guard let r = o as? [String: Any], r["OTIO_SCHEMA"] as? String == "TimeRange.1",
              let s = time(r["start_time"]), let d = time(r["duration"]), s.rate == d.rate else { return nil }
        return (s.value, d.value, s.rate)
    }

    static let start = Double((15 * 3600 + 15 * 60) * 30 + 3)

    @Test func theTimelineStartsAtGroupZerosTimecodeAndCarriesTheTake() throws {
        let t = try decoded(manifest)
        #expect(t["OTIO_SCHEMA"] as? String == "Timeline.1")
        #expect(t["name"] as? String == manifest.takeID)
        let start = try #require(time(t["global_start_time"]))
        #expect(start.value == Self.start && start.rate == 30)
        let coord = try #require((t["metadata"] as? [String: Any])?["coord"] as? [String: Any])
        #expect(coord["take_id"] as? String == manifest.takeID)
        #expect(coord["status"] as? String == "partial")
        #expect((coord["t0_us"] as? NSNumber)?.int64Value == 123_456_789_000)
        #expect((coord["frame_period_us"] as? NSNumber)?.int64Value == 33_333)
        #expect(coord["start_wallclock"] as? String == "2026-03-12T14:15:00.123456Z")
        #expect(coord["timecode"] as? String == "15:15:00:03")
    }

    @Test func oneVideoTrackPerCameraInManifestOrder() throws {
        let tracks = try tracks(try decoded(manifest))
        #expect(tracks.map { $0["name"] as? String } == ["node-2/cam0", "node-1/cam1", "node-1/cam0"])
        for track in tracks {
            #expect(track["OTIO_SCHEMA"] as? String == "Track.1")
            #expect(track["kind"] as? String == "Video")
            #expect((track["children"] as? [Any])?.count == 1)
        }
    }

    @Test func everyClipCoversTheTakesGroupsFromTheSameStart() throws {
        for track in try tracks(try decoded(manifest)) {
            let clip = try #require((track["children"] as? [[String: Any]])?.first)
            #expect(clip["OTIO_SCHEMA"] as? String == "Clip.2")
            let source = try #require(range(clip["source_range"]))
            #expect(source.start == Self.start && source.duration == 150 && source.rate == 30)
        }
    }

    @Test func aCollectedFileIsAnExternalReferenceRelativeToTheTake() throws {
        let track = try tracks(try decoded(manifest))[0]
        let clip = try #require((track["children"] as? [[String: Any]])?.first)
        #expect(clip["active_media_reference_key"] as? String == "DEFAULT_MEDIA")
        let media = try #require((clip["media_references"] as? [String: Any])?["DEFAULT_MEDIA"] as? [String: Any])
        #expect(media["OTIO_SCHEMA"] as? String == "ExternalReference.1")
        #expect(media["target_url"] as? String == "node-2/cam0.mkv")
        let available = try #require(range(media["available_range"]))
        #expect(available.start == Self.start && available.duration == 150 && available.rate == 30)
    }

    @Test func aCameraNotCollectedKeepsItsTrackWithAMissingReference() throws {
        let track = try tracks(try decoded(manifest))[2]
        let clip = try #require((track["children"] as? [[String: Any]])?.first)
        let media = try #require((clip["media_references"] as? [String: Any])?["DEFAULT_MEDIA"] as? [String: Any])
        #expect(media["OTIO_SCHEMA"] as? String == "MissingReference.1")
        #expect(media["target_url"] == nil)
        #expect(media["available_range"] is NSNull)
        #expect(range(clip["source_range"])?.duration == 150)
    }

    @Test func withoutATimecodeEverythingStartsAtZero() throws {
        var m = manifest
        m.timecode = nil
        let t = try decoded(m)
        #expect(time(t["global_start_time"])?.value == 0)
        for track in try tracks(t) {
            let clip = try #require((track["children"] as? [[String: Any]])?.first)
            #expect(range(clip["source_range"])?.start == 0)
        }
        #expect(((t["metadata"] as? [String: Any])?["coord"] as? [String: Any])?["timecode"] == nil)
    }

    @Test func theRateIsTheGrids() throws {
        var m = manifest
        m.framePeriodMicroseconds = FrameGrid.period(fps: 60)
        m.timecode = "00:00:01:59"
        let t = try decoded(m)
        let start = try #require(time(t["global_start_time"]))
        #expect(start.value == 119 && start.rate == 60)
    }

    @Test func aRateWithoutSMPTETimecodeStaysTheTakesOwn() throws {
        // Issue 40: a 15 fps take's .otio said 30 while its XMLs said 15; it says 15 now.
        var m = manifest
        m.framePeriodMicroseconds = FrameGrid.period(fps: 15)
        m.timecode = "10:00:00:14"
        let t = try decoded(m)
        let start = try #require(time(t["global_start_time"]))
        #expect(start.value == Double(10 * 3600 * 15 + 14) && start.rate == 15)
        #expect((((t["metadata"] as? [String: Any])?["coord"] as? [String: Any])?["fps"] as? NSNumber)?.intValue == 15)
        for track in try tracks(t) {
            let clip = try #require((track["children"] as? [[String: Any]])?.first)
            #expect(range(clip["source_range"]).map { [$0.start, $0.duration, $0.rate] } == [start.value, 150, 15])
        }
    }

    @Test func theDeliverablesAndMarkersOnceDeliverMadeThem() throws {
        let marker = EditorMarker(group: 7, length: 2, name: "2 filled frames", note: "groups 7–8 repeat")
        let data = try EditorialTimeline.otio(manifest, delivered: ["node-2/cam0.mkv": "deliver/x_node-2_cam0.mov"],
                                              markers: ["node-2/cam0": [marker]])
        let t = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let clips = try tracks(t).map { try #require(($0["children"] as? [[String: Any]])?.first) }
        let refs = clips.map { (($0["media_references"] as? [String: Any])?["DEFAULT_MEDIA"] as? [String: Any])?["target_url"] as? String }
        #expect(refs == ["deliver/x_node-2_cam0.mov", "node-1/cam1.mkv", nil])
        let markers = try #require(clips[0]["markers"] as? [[String: Any]])
        #expect(markers.count == 1 && markers[0]["name"] as? String == "2 filled frames")
        let start = 15 * 3600 * 30 + 15 * 60 * 30 + 3
        #expect(range(markers[0]["marked_range"]).map { [$0.start, $0.duration, $0.rate] } == [Double(start + 7), 2, 30])
        #expect((clips[1]["markers"] as? [Any])?.isEmpty == true)
    }

    @Test func theBytesAreStableWithSortedKeys() throws {
        let a = try EditorialTimeline.otio(manifest)
        #expect(a == (try EditorialTimeline.otio(manifest)))
        // Slashes unescaped, as opentimelineio writes a target_url.
        #expect(String(decoding: a, as: UTF8.self).contains("\"target_url\" : \"node-2/cam0.mkv\""))
    }
}
