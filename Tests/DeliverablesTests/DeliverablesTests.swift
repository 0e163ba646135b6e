import CoordCore
import Foundation
import Platform
#if canImport(FoundationXML)
import FoundationXML
#endif
import Testing
@testable import Deliverables
@testable import TakeDocuments

@Suite struct DeliverPlanTests {
    static func camera(_ node: String, _ name: String, codec: String = "mjpeg") -> TakeManifest.Camera {
        .init(node: node, camera: name, ordinal: 0, width: 640, height: 480, fps: 15, codec: codec, frames: 30, dropped: 0,
              clock: .init(offsetMicroseconds: 0, driftPPM: 0, uncertaintyMicroseconds: 1),
              files: [.init(path: "\(node)/\(name).mkv", bytes: 1_000, sha256: String(repeating: "ab", count: 32))])
    }

    static func manifest(cameras: [TakeManifest.Camera] = [camera("n1", "cam0"), camera("n2", "cam0", codec: "h264")],
                         micStartOffset: Int64 = 0) -> TakeManifest {
        var m = TakeManifest(takeID: "20260312-141500-s-0a1b2c", name: "s", status: .complete, t0Microseconds: 1_000_000_000,
                             framePeriodMicroseconds: 66_667, groups: 30, startWallclock: "2026-03-12T14:15:00.123456Z",
                             cameras: cameras, events: [])
        m.timecode = "14:15:00:01"
        var mic = TakeManifest.Audio(node: "n1", mic: "mic0", sampleRate: 48_000, channels: 1,
                                     startMicroseconds: 1_000_000_000 + micStartOffset, frames: 96_000,
                                     avOffsetMicroseconds: .init(p50: 0, p99: 0), rateErrorPPM: 0)
        mic.sha256 = String(repeating: "cd", count: 32)
        m.audio = [mic]
        return m
    }

    @Test func itemsParseInOrderWithoutDuplicates() throws {
        #expect(try DeliverItem.parse("mhl,mov,mhl").get() == [.mhl, .mov])
        #expect(throws: DeliverProblem.self) { try DeliverItem.parse("mov,edl").get() }
        #expect(throws: DeliverProblem.self) { try DeliverItem.parse("").get() }
    }

    @Test func aHostileManifestIsOneSentenceNeverAPathOutsideTheTakeOrATrap() throws {
        // Each edit is what a tampered or corrupted manifest.json could say; none may become a path outside the
        // take directory, a size that overflows, or a crash.
        let cases: [(String, (inout TakeManifest) -> Void)] = [
            ("node name", { $0.cameras[0].node = "../../etc" }),
            ("camera name", { $0.cameras[0].camera = "a/b" }),
            ("take_id", { $0.takeID = "../../x" }),
            ("groups", { $0.groups = .max }),
            ("frame_period_us", { $0.framePeriodMicroseconds = 0 }),
            ("frame size", { $0.cameras[0].width = .max }),
            ("microphone name", { $0.audio![0].mic = ".." }),
            ("file is", { $0.audio![0].path = "/etc/passwd" }),
            ("Hz", { $0.audio![0].sampleRate = .max }),
            ("stream", { $0.audio![0].streamIndex = .max }),
        ]
        for (words, edit) in cases {
            var m = Self.manifest()
            edit(&m)
            let problem = try #require(DeliverPlan.make(m, codec: .prores).failure(), "\(words)")
            #expect(problem.sentence.contains(words) && !problem.sentence.contains("\n"), "\(problem.sentence)")
        }
        // Figures that only push the arithmetic to its ends saturate instead of trapping.
        var far = Self.manifest()
        far.audio![0].startMicroseconds = .min
        #expect(throws: Never.self) { _ = try DeliverPlan.make(far, codec: .prores).get() }
    }

    @Test func h264IsRewrappedAndOtherCodecsEncoded() throws {
        let plan = try DeliverPlan.make(Self.manifest(), codec: .prores).get()
        #expect(plan.movs.map(\.mode) == [.prores, .copy])
        // CONTRACT §15: the files carry the take.
        #expect(plan.movs.map(\.output) == ["deliver/20260312-141500-s-0a1b2c_n1_cam0.mov", "deliver/20260312-141500-s-0a1b2c_n2_cam0.mov"])
        #expect(plan.movs.map(\.reel) == ["20260312-141500-s-0a1b2c_n1_cam0", "20260312-141500-s-0a1b2c_n2_cam0"])
        #expect(plan.movs.allSatisfy { $0.frames == 30 && $0.fps == 15 && $0.timecode == "14:15:00:01" })
        #expect(try DeliverPlan.make(Self.manifest(), codec: .h264).get().movs.map(\.mode) == [.h264, .copy])
        #expect(try DeliverPlan.make(Self.manifest(), codec: .copy).get().movs.map(\.mode) == [.copy, .copy])
        #expect(try DeliverPlan.make(Self.manifest(), codec: .proresHQ).get().movs.map(\.mode) == [.proresHQ, .copy])
        #expect(try DeliverPlan.make(Self.manifest(), codec: .standard).get().movs.map(\.mode) == [.proresProxy, .copy])
    }

    @Test func videoCodecChoicesAndCopyOfACodecEditorsCannotDecode() throws {
        #expect(VideoCodecChoice.allCases.map(\.rawValue) == ["prores-proxy", "prores-lt", "prores", "prores-hq", "h264", "copy"])
        #expect(try VideoCodecChoice.parse("prores-lt").get() == .proresLT)
        let bad = try #require(VideoCodecChoice.parse("vp9").failure())
        #expect(bad.sentence.contains("prores-hq") && bad.sentence.contains("vp9"))
        let ffv1 = Self.manifest(cameras: [Self.camera("n1", "cam0", codec: "ffv1")])
        let refused = try #require(DeliverPlan.make(ffv1, codec: .copy).failure())
        #expect(refused.sentence.contains("FFV1") && refused.sentence.contains("n1/cam0") && refused.sentence.contains("prores-hq"))
        #expect(!refused.sentence.contains("\n"))
        #expect(try DeliverPlan.make(Self.manifest(), codec: .copy).get().movs.count == 2)
    }

    @Test func twoTakesShareNoDeliverableName() throws {
        var other = Self.manifest()
        other.takeID = "20260312-141700-s-99ffee"
        let a = try DeliverPlan.make(Self.manifest(), codec: .standard).get(), b = try DeliverPlan.make(other, codec: .standard).get()
        let names = { (p: DeliverPlan) in Set(p.movs.map(\.output) + p.wavs.map(\.output) + p.movs.map(\.reel)) }
        #expect(names(a).isDisjoint(with: names(b)))
    }

    @Test func filledRunsAndEventsBecomeMarkersAtTheirGroups() throws {
        let csv = "frame,group,center_us,flags\n0,0,1,\n1,1,2,dup\n2,2,3,dup\n3,3,4,\n4,4,5,dup\n"
        let runs = EditorMarker.fills(csv, groups: 5)
        #expect(runs.map(\.group) == [1, 4] && runs.map(\.length) == [2, 1])
        var m = Self.manifest()
        m.events = [.init(tMicroseconds: m.t0Microseconds + 10 * 66_667 + 20_000, node: "n2", camera: "cam0", kind: .cameraEnded, detail: "unplugged"),
                    .init(tMicroseconds: m.t0Microseconds, node: "n1", camera: "cam0", kind: "dup", detail: "3 filled"),
                    .init(tMicroseconds: m.t0Microseconds - 1_000_000, node: "n1", camera: "mic0", kind: .microphoneGap, detail: "overrun"),
                    .init(tMicroseconds: m.t0Microseconds, node: "", camera: "", kind: .start, detail: "go")]
        var plan = try DeliverPlan.make(m, codec: .standard).get()
        plan.addFills(csv, node: "n1", camera: "cam0")
        #expect(plan.markers["n2/cam0"] == [EditorMarker(group: 10, length: 1, name: "camera-ended", note: "unplugged")])
        #expect(plan.markers["n1/mic0"]?.map(\.group) == [0])
        #expect(plan.markers["n1/cam0"]?.map(\.group) == [1, 4], "the dup summary is not marked again")
        #expect(plan.markers.count == 3)
        let x = try XMLDocument(xmlString: FCPXMLDocument.xml(plan))
        #expect(try x.nodes(forXPath: "//mc-angle[@angleID='n1_cam0']/asset-clip/marker").count == 2)
        #expect(try x.nodes(forXPath: "//mc-angle[@angleID='n2_cam0']/asset-clip/marker").count == 1)
        let x7 = try XMLDocument(xmlString: FCP7XMLDocument.xml(plan))
        #expect(try x7.nodes(forXPath: "//clipitem[@id='clipitem-v1']/marker/in").compactMap(\.stringValue) == ["1", "4"])
    }

    @Test func theWavSaysWhenAndWhatInBextAndIXML() throws {
        // The coordinator's zone is read off its timecode: 14:15 UTC labelled 15:15 is UTC+1.
        var paris = Self.manifest()
        paris.timecode = "15:15:00:01"
        let wav = try #require(try DeliverPlan.make(paris, codec: .standard).get().wavs.first)
        #expect(wav.originationDate == "2026-03-12" && wav.originationTime == "15:15:00")
        // Just after midnight in Tokyo is the previous day in UTC.
        #expect(BroadcastWAV.origination("2026-03-12T15:30:05.5Z", timecodeSeconds: 30 * 60 + 5) == ("2026-03-13", "00:30:05"))
        #expect(BroadcastWAV.origination("2026-03-12T02:00:00Z", timecodeSeconds: 21 * 3600) == ("2026-03-11", "21:00:00"))
        #expect(BroadcastWAV.origination("nonsense", timecodeSeconds: 0) == ("", ""))
        let ixml = try XMLDocument(xmlString: wav.ixml)
        func text(_ path: String) throws -> String? { try ixml.nodes(forXPath: path).first?.stringValue }
        #expect(try text("/BWFXML/SCENE") == "s" && text("/BWFXML/TAPE") == "20260312-141500-s-0a1b2c" && text("/BWFXML/TAKE") == "0a1b2c")
        #expect(try text("/BWFXML/PROJECT") == "s" && text("/BWFXML/SPEED/TIMECODE_RATE") == "15/1")
        #expect(try text("/BWFXML/SPEED/TIMESTAMP_SAMPLES_SINCE_MIDNIGHT_LO") == String(wav.timeReference))
        let chunk = BroadcastWAV.chunk("abc")
        #expect(chunk == Data("iXML".utf8) + Data([3, 0, 0, 0]) + Data("abc".utf8) + Data([0]))
    }

    @Test func theWavSpansThePicturesFromGroupZero() throws {
        let wav = try #require(try DeliverPlan.make(Self.manifest(), codec: .prores).get().wavs.first)
        #expect(wav.output == "deliver/20260312-141500-s-0a1b2c_n1_mic0.wav")
        #expect(wav.samples == 30 * 48_000 / 15)
        #expect(wav.skipSamples == 0)
        // 14:15:00 and one frame at 15 fps, in samples.
        #expect(wav.timeReference == (14 * 3600 + 15 * 60) * 48_000 + 48_000 / 15)
        // Sound starting 10 ms after group 0 gets 480 samples of silence before it; 10 ms before, loses 480.
        #expect(try DeliverPlan.make(Self.manifest(micStartOffset: 10_000), codec: .prores).get().wavs[0].skipSamples == -480)
        #expect(try DeliverPlan.make(Self.manifest(micStartOffset: -10_000), codec: .prores).get().wavs[0].skipSamples == 480)
    }

    @Test func aMicrophoneThatRecordedNoSoundHasNoWavAndASentence() throws {
        var lost = Self.manifest()
        lost.audio = nil
        lost.audioLost = [.init(node: "n2", mic: "mic1", ended: "unplugged")]
        let plan = try DeliverPlan.make(lost, codec: .prores).get()
        #expect(plan.wavs.isEmpty && plan.movs.count == 2)
        #expect(plan.notes == ["microphone n2/mic1 recorded no sound (it ended before group 0), so it has no WAV."])
        // An older take lists it in audio with 0 frames and an empty file: left out the same way.
        var older = Self.manifest()
        older.audio![0].frames = 0
        older.audio![0].ended = "unplugged"
        let olderPlan = try DeliverPlan.make(older, codec: .prores).get()
        #expect(olderPlan.wavs.isEmpty && olderPlan.notes.count == 1 && olderPlan.notes[0].contains("n1/mic0"))
        #expect(try DeliverPlan.make(Self.manifest(), codec: .prores).get().notes.isEmpty)
    }

    @Test func anIncompleteTakeIsRefusedInOneSentence() {
        var m = Self.manifest()
        m.status = .partial
        #expect(throws: DeliverProblem.self) { try DeliverPlan.make(m, codec: .prores).get() }
        var missing = Self.manifest()
        missing.cameras[0].files = []
        #expect(throws: DeliverProblem.self) { try DeliverPlan.make(missing, codec: .prores).get() }
    }

    @Test func theFramesTableMustPutFrameIInGroupI() {
        let header = "frame,group,center_us,flags\n"
        #expect(DeliverPlan.framesProblem(header + "0,0,10,\n1,1,20,dup\n2,2,30,\n", groups: 3, file: "n/c.frames.csv") == nil)
        #expect(DeliverPlan.framesProblem(header + "0,0,10,\n1,2,20,\n", groups: 3, file: "n/c.frames.csv") != nil)
        #expect(DeliverPlan.framesProblem(header + "0,0,10,\n1,1,20,\n", groups: 3, file: "n/c.frames.csv") != nil)
        #expect(DeliverPlan.framesProblem(header + "x,0,10,\n", groups: 1, file: "n/c.frames.csv") != nil)
    }

    @Test func theRecordSkipsOnlyWhatIsUpToDate() throws {
        let job = try DeliverPlan.make(Self.manifest(), codec: .prores).get().movs[0]
        var record = DeliverRecord()
        record.outputs[job.output] = .init(fingerprint: job.fingerprint, bytes: 10)
        #expect(record.isUpToDate(job.output, fingerprint: job.fingerprint, bytes: 10))
        #expect(!record.isUpToDate(job.output, fingerprint: job.fingerprint, bytes: 9))
        #expect(!record.isUpToDate(job.output, fingerprint: job.fingerprint, bytes: nil))
        let h264 = try DeliverPlan.make(Self.manifest(), codec: .h264).get().movs[0]
        #expect(!record.isUpToDate(job.output, fingerprint: h264.fingerprint, bytes: 10))
    }
}

@Suite struct EditorXMLTests {
    let plan = try! DeliverPlan.make(DeliverPlanTests.manifest(), codec: .prores).get()

    func count(_ needle: String, in text: String) -> Int { text.components(separatedBy: needle).count - 1 }

    @Test func fcpxmlHoldsOneMulticamWithAnAnglePerCameraAndAnMcClip() throws {
        let x = FCPXMLDocument.xml(plan)
        #expect(x.contains("<fcpxml version=\"1.9\">"))
        #expect(count("<multicam ", in: x) == 1)
        // An angle per camera, and one of the microphones (the sync sound).
        #expect(count("<mc-angle ", in: x) == 3)
        #expect(count("<mc-clip ", in: x) == 1)
        let start = "\((14 * 3600 + 15 * 60) * 15 + 1)/15s"
        #expect(x.contains("tcStart=\"\(start)\""))
        #expect(x.contains("duration=\"30/15s\""))
        // Relative to the take directory (CONTRACT §15).
        #expect(x.contains("src=\"deliver/20260312-141500-s-0a1b2c_n1_cam0.mov\""))
        #expect(x.contains("src=\"deliver/20260312-141500-s-0a1b2c_n1_mic0.wav\""))
        #expect(!x.contains("file:"))
        let document = try XMLDocument(xmlString: x)
        #expect(try document.nodes(forXPath: "//mc-angle/asset-clip[@start='\(start)']").count == 3)
        // n1's angle carries n1's microphone; n2 has none; the sync-sound angle holds it.
        #expect(try document.nodes(forXPath: "//mc-angle[@angleID='n1_cam0']/asset-clip/asset-clip[@ref='a1'][@lane='-1']").count == 1)
        #expect(try document.nodes(forXPath: "//mc-angle[@angleID='n2_cam0']/asset-clip/asset-clip").isEmpty)
        #expect(try document.nodes(forXPath: "//mc-angle[@angleID='sync-sound']/asset-clip[@ref='a1']").count == 1)
        let reels = try document.nodes(forXPath: "//asset/metadata/md[@key='com.apple.proapps.studio.reel']/@value").compactMap(\.stringValue)
        #expect(reels == ["20260312-141500-s-0a1b2c_n1_cam0", "20260312-141500-s-0a1b2c_n2_cam0"])
        // Scene and take as the WAVs' iXML says them: the take's name, its id's last six hex digits.
        #expect(try document.nodes(forXPath: "//asset/metadata/md[@key='com.apple.proapps.studio.scene']/@value").compactMap(\.stringValue) == ["s", "s"])
        #expect(try document.nodes(forXPath: "//asset/metadata/md[@key='com.apple.proapps.studio.shot']/@value").compactMap(\.stringValue) == ["0a1b2c", "0a1b2c"])
    }

    @Test func fcp7XMLHasATrackPerCameraAndMicEveryClipAtZero() throws {
        let x = FCP7XMLDocument.xml(plan)
        let document = try XMLDocument(xmlString: x)
        #expect(try document.nodes(forXPath: "//sequence").count == 1)
        #expect(try document.nodes(forXPath: "//media/video/track").count == 2)
        #expect(try document.nodes(forXPath: "//media/audio/track").count == 1)
        let starts = try document.nodes(forXPath: "//clipitem/start").map { $0.stringValue }
        #expect(starts == ["0", "0", "0"])
        let tcs = try document.nodes(forXPath: "//file/timecode/string").map { $0.stringValue }
        #expect(tcs == ["14:15:00:01", "14:15:00:01", "14:15:00:01"])
        #expect(try document.nodes(forXPath: "//file/pathurl").compactMap(\.stringValue).allSatisfy { $0.hasPrefix("deliver/20260312-141500-s-0a1b2c_") })
        #expect(try document.nodes(forXPath: "//video//file/timecode/reel/name").compactMap(\.stringValue)
            == ["20260312-141500-s-0a1b2c_n1_cam0", "20260312-141500-s-0a1b2c_n2_cam0"])
        // n1's picture is linked to n1's microphone.
        #expect(try document.nodes(forXPath: "//clipitem[@id='clipitem-v1']/link/linkclipref").compactMap(\.stringValue) == ["clipitem-v1", "clipitem-a1"])
        #expect(try document.nodes(forXPath: "//clipitem[@id='clipitem-v2']/link").isEmpty)
    }

    @Test func aTakeWithoutSoundStillParses() throws {
        var m = DeliverPlanTests.manifest()
        m.audio = nil
        let silent = try DeliverPlan.make(m, codec: .prores).get()
        let fcpxml = try XMLDocument(xmlString: FCPXMLDocument.xml(silent))
        #expect(try fcpxml.nodes(forXPath: "//mc-angle").count == 2)
        #expect(try fcpxml.nodes(forXPath: "//asset-clip[@lane]").isEmpty)
        let xmeml = try XMLDocument(xmlString: FCP7XMLDocument.xml(silent))
        #expect(try xmeml.nodes(forXPath: "//media/audio/track").isEmpty)
    }

    @Test func namesAreEscaped() {
        #expect(XMLText.escape("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c&apos;")
    }
}

@Suite struct ASCMHLTests {
    let when = Date(timeIntervalSince1970: 1_790_000_000)

    @Test func c4MatchesTheReferenceIDs() {
        // The C4 ID of no bytes (SMPTE ST 2114's example).
        #expect(ASCMHL.c4(Data()) == "c459dsjfscH38cYeXXYogktxf4Cd9ibshE3BHUo6a58hBXmRQdZrAkZzsWcbWtDg5oQstpDuni4Hirj75GEmTc1sFT")
        #expect(ASCMHL.c4(Data("foo".utf8)).count == 90)
    }

    @Test func aGenerationReadsBack() {
        let entries = [ASCMHL.Entry(path: "n1/a&b.mkv", size: 12, modified: when, xxh128: String(repeating: "0f", count: 16), action: .original)]
        let xml = ASCMHL.generation(entries, created: when, hostname: "h", tool: "coord", version: "1")
        let known = ASCMHL.parse(xml)
        #expect(known["n1/a&b.mkv"] == ASCMHL.Known(size: 12, modified: ASCMHL.date(when), xxh128: String(repeating: "0f", count: 16)))
        #expect(ASCMHL.generationFile(1, folderName: "take", created: when) == "0001_take_2026-09-21_141320Z.mhl")
        #expect(ASCMHL.generationNumber("0012_take_x.mhl") == 12)
        #expect(ASCMHL.generationNumber("ascmhl_chain.xml") == nil)
        let chain = ASCMHL.chain([.init(file: "0001_take_x.mhl", c4: "c4abc")])
        #expect(ASCMHL.parseChain(chain) == [.init(file: "0001_take_x.mhl", c4: "c4abc")])
    }

    @Test func aGenerationIsDueOnlyWhenTheFilesChanged() {
        let files = ["a": ASCMHL.OnDisk(size: 1, modified: when)]
        let known = ["a": ASCMHL.Known(size: 1, modified: ASCMHL.date(when), xxh128: "00")]
        #expect(ASCMHL.isUpToDate(files, known: known))
        #expect(!ASCMHL.isUpToDate(files.merging(["b": .init(size: 2, modified: when)]) { $1 }, known: known))
        #expect(!ASCMHL.isUpToDate(["a": .init(size: 2, modified: when)], known: known))
        #expect(!ASCMHL.isUpToDate(files, known: [:]))
    }

    @Test func aChangedFileIsRefusedAndANewOneIsOriginal() throws {
        let files = ["a": ASCMHL.OnDisk(size: 1, modified: when), "b": .init(size: 1, modified: when)]
        let known = ["a": ASCMHL.Known(size: 1, modified: ASCMHL.date(when), xxh128: "00")]
        let entries = try ASCMHL.entries(files, hashes: ["a": "00", "b": "11"], known: known).get()
        #expect(entries.map(\.action) == [.verified, .original])
        #expect(throws: DeliverFailure.self) { try ASCMHL.entries(files, hashes: ["a": "01", "b": "11"], known: known).get() }
    }

    @Test func xxh128IsTheCanonicalDigest() {
        // xxhsum -H2 of "hello\n" (also what ascmhl create wrote for it).
        #expect(XXH128.bytes(Data("hello\n".utf8)) == "6bba86c7e069f56d5a10b435f1c8e49c")
    }

    @Test func theNodesOneReadGivesTheSameDigestsAsEachHashAlone() throws {
        // What a node computes as it finalizes a file, what the collector computes as the bytes arrive, and what
        // deliver computes from the file: one hash.
        let bytes = Data((0..<(5 << 20) + 7).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ ($0 >> 9)) })
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("xxh128-\(UUID().uuidString).bin")
        try bytes.write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        let both = try FileDigest.sha256AndXXH128(of: url)
        #expect(both.bytes == UInt64(bytes.count))
        let sha = try FileDigest.sha256(of: url).sha256
        let xxh = try XXH128.file(url.path)
        #expect(both.sha256 == sha)
        #expect(both.xxh128 == XXH128.bytes(bytes) && both.xxh128 == xxh)
        let streaming = XXH128.Hasher()
        var at = 0
        for size in [1, 4095, 1 << 20, 3, 4 << 20] where at < bytes.count {
            let end = min(bytes.count, at + size)
            streaming.update(bytes[at..<end])
            at = end
        }
        streaming.update(bytes[at...])
        #expect(streaming.hex() == both.xxh128 && XXH128.isValid(both.xxh128))
        streaming.reset()
        #expect(streaming.hex() == XXH128.bytes(Data()))
        #expect(!XXH128.isValid(both.xxh128.uppercased()) && !XXH128.isValid(both.sha256))
    }

    @Test func aCollectionGenerationUsesTheNodesHashesAndIsAddedOnlyForNewFiles() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("mhl-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root + "/n1", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        try Data("camera".utf8).write(to: URL(fileURLWithPath: root + "/n1/cam0.mkv"))
        try Data("frames".utf8).write(to: URL(fileURLWithPath: root + "/n1/cam0.frames.csv"))
        // The node's hash is taken as it is (collection checked it as the bytes arrived): no second read.
        let nodes = String(repeating: "ab", count: 16)
        func files(_ paths: [String]) -> [String: ASCMHL.OnDisk] {
            Dictionary(uniqueKeysWithValues: paths.map { ($0, ASCMHLHistory.onDisk(root: root, path: $0)!) })
        }
        let first = try ASCMHLHistory.seal(root: root, files: files(["n1/cam0.mkv"]), known: ["n1/cam0.mkv": nodes],
                                           exactly: false, ignore: ASCMHLHistory.coordinatorFiles, status: { _ in })
        let text = try String(contentsOfFile: root + "/ascmhl/" + #require(first), encoding: .utf8)
        #expect(ASCMHL.parse(text)["n1/cam0.mkv"]?.xxh128 == nodes)
        #expect(text.contains("<pattern>manifest.json</pattern>") && text.contains("<pattern>*.otio</pattern>"))
        #expect(try ASCMHLHistory.seal(root: root, files: files(["n1/cam0.mkv"]), exactly: false, status: { _ in }) == nil)
        // A file without a node's hash is hashed here; the one already sealed is listed again as verified.
        let second = try ASCMHLHistory.seal(root: root, files: files(["n1/cam0.mkv", "n1/cam0.frames.csv"]),
                                            known: ["n1/cam0.mkv": nodes], exactly: false, status: { _ in })
        let again = ASCMHL.parse(try String(contentsOfFile: root + "/ascmhl/" + #require(second), encoding: .utf8))
        #expect(again["n1/cam0.frames.csv"]?.xxh128 == XXH128.bytes(Data("frames".utf8)))
        let chain = ASCMHL.parseChain(try String(contentsOfFile: root + "/ascmhl/" + ASCMHL.chainFile, encoding: .utf8))
        #expect(chain.map(\.file) == [first, second].compactMap { $0 })
    }

    @Test func aManifestFileCarriesXXH128AndReadsOlderManifestsWithout() throws {
        let old = #"{"path":"n/c.mkv","bytes":3,"sha256":"ab"}"#
        let file = try JSONDecoder().decode(TakeManifest.File.self, from: Data(old.utf8))
        #expect(file.xxh128 == "")
        #expect(!String(decoding: try JSONEncoder().encode(file), as: UTF8.self).contains("xxh128"))
        let new = TakeManifest.File(path: "n/c.mkv", bytes: 3, sha256: "ab", xxh128: String(repeating: "0", count: 32))
        #expect(try JSONDecoder().decode(TakeManifest.File.self, from: JSONEncoder().encode(new)) == new)
    }
}

private extension Result {
    func failure() -> Failure? { if case .failure(let f) = self { return f } else { return nil } }
}
