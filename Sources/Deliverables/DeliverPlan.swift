import CoordCore
import Foundation
import Platform
import TakeDocuments

/// What `coord deliver --to LIST` can make (CONTRACT §10).
public enum DeliverItem: String, CaseIterable, Sendable, Equatable {
    case mov, fcpxml, fcp7xml, mhl

    /// `mov,fcpxml,…` in the order given, duplicates dropped; or the one sentence naming what is wrong.
    public static func parse(_ list: String) -> Result<[DeliverItem], DeliverProblem> {
        var items: [DeliverItem] = []
        for word in list.split(separator: ",", omittingEmptySubsequences: false).map({ $0.trimmingCharacters(in: .whitespaces) }) {
            guard let item = DeliverItem(rawValue: word) else {
                let known = allCases.map(\.rawValue).joined(separator: ", ")
                return .failure(DeliverProblem("\(word.isEmpty ? "an empty item" : "'\(word)'") is not a deliverable (coord deliver makes \(known))."))
            }
            if !items.contains(item) { items.append(item) }
        }
        return .success(items)
    }
}

/// How a camera's pictures reach its `.mov` (`--video-codec`, CONTRACT §15).
public enum VideoCodecChoice: String, CaseIterable, Sendable, Equatable {
    /// ProRes 422 Proxy, LT, 422 and HQ (prores_ks, 10-bit 4:2:2): what every NLE imports.
    case proresProxy = "prores-proxy", proresLT = "prores-lt", prores, proresHQ = "prores-hq"
    /// H.264 via libx264: lighter files.
    case h264
    /// Re-wrap every camera's packets as recorded, when Final Cut Pro and Premiere can decode them.
    case copy

    /// What `coord deliver` uses unless told otherwise (ProRes 422 Proxy, as before v1.3).
    public static let standard = VideoCodecChoice.proresProxy

    /// `--video-codec WORD`, or the sentence naming the choices.
    public static func parse(_ word: String) -> Result<VideoCodecChoice, DeliverProblem> {
        guard let choice = VideoCodecChoice(rawValue: word) else {
            return .failure(DeliverProblem("--video-codec must be one of \(choices) (got \(Echo.short(word)))."))
        }
        return .success(choice)
    }

    static var choices: String { allCases.map(\.rawValue).joined(separator: ", ") }

    /// Recorded codecs a `.mov` may carry as they are: Final Cut Pro and Premiere decode H.264 and Motion JPEG, not FFV1.
    static let editorCodecs: Set<String> = ["h264", "mjpeg"]
}

/// One camera's `.mov`: exactly `groups` frames, frame i from frame i of the `.mkv` (group i, CONTRACT §4).
public struct MovJob: Equatable, Sendable {
    public enum Mode: String, Sendable, Equatable {
        case copy, proresProxy = "prores-proxy", proresLT = "prores-lt", prores, proresHQ = "prores-hq", h264
    }
    public var node: String
    public var camera: String
    /// Relative to the take directory.
    public var source: String
    public var output: String
    public var mode: Mode
    public var frames: Int64
    public var fps: Int
    public var timecode: String
    public var width: Int
    public var height: Int
    /// The camera's reel (tape) name, unique per take and camera: `<take-id>_<node>_<camera>`, the file's own name.
    public var reel: String
    /// What the output depends on: a change makes it again.
    public var fingerprint: String
    /// The exact rate when it is not an integer (30000/1001, CONTRACT §13); `fps` is then its whole rate.
    public var rationalRate: FrameRate? = nil
}

/// One microphone's Broadcast WAV: sample 0 is group 0's instant, `samples` long (the pictures' duration).
public struct WavJob: Equatable, Sendable {
    public var node: String
    public var mic: String
    public var source: String
    public var streamIndex: Int
    public var output: String
    public var sampleRate: Int
    public var channels: Int
    /// Samples of the recording before group 0 to drop (positive), or of silence to put before it (negative).
    public var skipSamples: Int64
    public var samples: Int64
    /// bext TimeReference: group 0's time of day in samples (the timecode's, so it lines up with the `.mov`).
    public var timeReference: Int64
    /// The `bext` origination date (`yyyy-MM-dd`) and time (`HH:mm:ss`): group 0 in the local time of day.
    public var originationDate: String
    public var originationTime: String
    /// The iXML chunk's text (project, scene, take, tape, timecode rate).
    public var ixml: String
    public var fingerprint: String
}

/// The pure decisions of `coord deliver`: what a take's deliverables are, and which are out of date.
public struct DeliverPlan: Equatable, Sendable {
    public static let directory = "deliver"
    public static let record = "deliver/deliver.json"

    public var takeID: String
    /// The take's name (the rig's `--name`): the scene in the FCPXML's and the WAVs' metadata.
    public var takeName = ""
    /// The whole rate (30 at 29.97): the timecode's frames a second.
    public var fps: Int
    /// The take's exact rate (CONTRACT §13).
    public var rate: FrameRate = FrameRate(30)
    public var groups: Int64
    /// `HH:MM:SS:FF` of group 0.
    public var timecode: String
    public var startFrameOfDay: Int64
    public var movs: [MovJob]
    public var wavs: [WavJob]
    /// The markers of each angle's clip, keyed `node/camera` or `node/mic`: events here, filled runs once
    /// `addFills` has read the frames tables.
    public var markers: [String: [EditorMarker]] = [:]
    /// What is left out and why, one sentence each (a microphone that recorded no sound has no WAV).
    public var notes: [String] = []

    /// The plan for a complete take, or the sentence why this take cannot be delivered.
    public static func make(_ manifest: TakeManifest, codec: VideoCodecChoice) -> Result<DeliverPlan, DeliverProblem> {
        guard manifest.format == TakeManifest.formatV1 else {
            return .failure(DeliverProblem("the manifest's format is \(manifest.format), not \(TakeManifest.formatV1)."))
        }
        let collected = manifest.collection.map { $0.state == .complete } ?? true
        guard manifest.status == .complete, collected else {
            let why = collected ? "it is \(manifest.status.rawValue)" : "its collection is \(manifest.collection!.state.rawValue)"
            return .failure(DeliverProblem("take \(manifest.takeID) is not complete (\(why)); coord deliver needs a complete, collected take."))
        }
        guard manifest.groups > 0, !manifest.cameras.isEmpty else {
            return .failure(DeliverProblem("take \(manifest.takeID) has no frames to deliver."))
        }
        // The manifest is a file anyone may have edited: its names become paths and its figures sizes.
        if let problem = edgeProblem(manifest) { return .failure(DeliverProblem("manifest.json: \(problem)")) }
        let take = manifest.rate, fps = take.nominal
        let tc = manifest.timecode.flatMap { Timecode($0, rate: take) } ?? Timecode(frameOfDay: 0, rate: take)
        var movs: [MovJob] = []
        for camera in manifest.cameras {
            let path = "\(camera.node)/\(camera.camera).mkv"
            guard let file = camera.files.first(where: { $0.path == path }) else {
                return .failure(DeliverProblem("take \(manifest.takeID) lacks \(path) in its manifest; coord deliver needs every camera's file."))
            }
            let recorded = camera.codec.lowercased()
            if codec == .copy && !VideoCodecChoice.editorCodecs.contains(recorded) {
                return .failure(DeliverProblem("--video-codec copy would put camera \(camera.node)/\(camera.camera)'s \(camera.codec.uppercased()) in a .mov, which Final Cut Pro and Premiere cannot decode; choose one of \(VideoCodecChoice.choices.replacingOccurrences(of: ", copy", with: ""))."))
            }
            let mode: MovJob.Mode = recorded == "h264" ? .copy : movMode(codec)
            let reel = "\(manifest.takeID)_\(camera.node)_\(camera.camera)"
            movs.append(MovJob(node: camera.node, camera: camera.camera, source: path,
                               output: "\(directory)/\(reel).mov", mode: mode, frames: manifest.groups,
                               fps: fps, timecode: tc.description, width: camera.width, height: camera.height, reel: reel,
                               fingerprint: "mov/2 \(file.sha256) \(mode.rawValue) \(manifest.groups) \(take) \(tc) \(reel)",
                               rationalRate: take.isInteger ? nil : take))
        }
        var wavs: [WavJob] = []
        var notes = (manifest.audioLost ?? []).map {
            "microphone \($0.node)/\($0.mic) recorded no sound (it ended before group 0), so it has no WAV."
        }
        for a in manifest.audio ?? [] {
            // A take recorded before lost microphones were left out lists one with an empty file ffprobe cannot read.
            if a.frames == 0 && a.ended != nil {
                notes.append("microphone \(a.node)/\(a.mic) recorded no sound (\(a.path) holds none), so it has no WAV.")
                continue
            }
            guard !a.sha256.isEmpty, a.sampleRate > 0, a.channels > 0 else {
                return .failure(DeliverProblem("take \(manifest.takeID) lacks \(a.path) (microphone \(a.node)/\(a.mic)); coord deliver needs every microphone's file."))
            }
            let rate = Int64(a.sampleRate)
            let skip = roundedDiv(Saturating.multiply(Saturating.subtract(a.startMicroseconds, manifest.t0Microseconds), -rate), 1_000_000)
            // Frames are D/N s long: 1001/30000 at 29.97.
            let samples = roundedDiv(manifest.groups * rate * Int64(take.denominator), Int64(take.numerator))
            let timeReference = roundedDiv(tc.frameOfDay * rate * Int64(take.denominator), Int64(take.numerator))
            let (date, time) = BroadcastWAV.origination(manifest.startWallclock,
                                                        timecodeSeconds: manifest.timecode == nil ? nil : tc.frameOfDay / Int64(fps))
            let ixml = BroadcastWAV.ixml(manifest, mic: a, fps: fps, ntsc: !take.isInteger, timeReference: timeReference)
            wavs.append(WavJob(node: a.node, mic: a.mic, source: a.path, streamIndex: a.streamIndex,
                               output: "\(directory)/\(manifest.takeID)_\(a.node)_\(a.mic).wav", sampleRate: a.sampleRate,
                               channels: a.channels, skipSamples: skip, samples: samples, timeReference: timeReference,
                               originationDate: date, originationTime: time, ixml: ixml,
                               fingerprint: "wav/2 \(a.sha256) \(skip) \(samples) \(tc) \(date) \(time) \(XXH128.bytes(Data(ixml.utf8)))"))
        }
        var plan = DeliverPlan(takeID: manifest.takeID, fps: fps, groups: manifest.groups, timecode: tc.description,
                               startFrameOfDay: tc.frameOfDay, movs: movs, wavs: wavs, notes: notes)
        plan.rate = take
        plan.markers = EditorMarker.events(manifest)
        plan.takeName = manifest.name
        return .success(plan)
    }

    /// The encoder `--video-codec` asks for, for a camera not recorded in H.264.
    static func movMode(_ codec: VideoCodecChoice) -> MovJob.Mode {
        switch codec {
        case .proresProxy: .proresProxy
        case .proresLT: .proresLT
        case .prores: .prores
        case .proresHQ: .proresHQ
        case .h264: .h264
        case .copy: .copy
        }
    }

    /// The microphones of a camera's node, in manifest order: the sound of its angle.
    public func wavs(of mov: MovJob) -> [WavJob] { wavs.filter { $0.node == mov.node } }

    /// Adds a marker per run of filled frames (`dup` rows) of the camera whose frames table is `csv`.
    public mutating func addFills(_ csv: String, node: String, camera: String) {
        let runs = EditorMarker.fills(csv, groups: groups)
        guard !runs.isEmpty else { return }
        markers["\(node)/\(camera)", default: []] += runs
        markers["\(node)/\(camera)"]!.sort { $0.group < $1.group }
    }

    /// Whether a camera's `frames.csv` (CONTRACT §4: `frame,group,center_us,flags`) has frame i in group i for every
    /// one of the take's groups, which a `.mov` of one frame per group needs; the sentence naming the first row that
    /// does not, else nil.
    public static func framesProblem(_ csv: String, groups: Int64, file: String) -> DeliverProblem? {
        var rows: Int64 = 0
        for line in csv.split(whereSeparator: \.isNewline).dropFirst() where !line.isEmpty {
            let fields = line.split(separator: ",", omittingEmptySubsequences: false)
            guard fields.count >= 2, let frame = Int64(fields[0]), let group = Int64(fields[1]) else {
                return DeliverProblem("\(file) has a row that is not frame,group,…: \"\(quoted(line))\".")
            }
            guard frame == rows, group == rows else {
                return DeliverProblem("\(file) puts frame \(frame) in group \(group) at row \(rows + 1); coord deliver needs frame i in group i.")
            }
            rows += 1
        }
        return rows == groups ? nil : DeliverProblem("\(file) lists \(rows) frames but the take has \(groups) groups.")
    }

    /// At most the first 24 characters of a line read from a file, control characters escaped: a sentence shows
    /// what is wrong, never the file.
    static func quoted(_ line: Substring) -> String {
        var out = ""
        for scalar in line.prefix(24).unicodeScalars {
            if scalar.properties.generalCategory == .control || scalar == "\"" || scalar == "\\" {
                out += scalar.escaped(asASCII: false)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return line.count > 24 ? out + "…" : out
    }

    /// `a / b` rounded half away from zero (b > 0).
    static func roundedDiv(_ a: Int64, _ b: Int64) -> Int64 {
        a >= 0 ? Saturating.add(a, b / 2) / b : -(Saturating.add(Saturating.subtract(0, a), b / 2) / b)
    }

    /// A day at 240 fps: more groups than any take coord records, small enough that every size derived from it fits.
    static let maxGroups: Int64 = 24 * 3600 * 240

    /// The first value of `manifest` that a take coord wrote cannot hold, as a sentence; nil when all are sane.
    static func edgeProblem(_ manifest: TakeManifest) -> String? {
        guard TakeID(parsing: manifest.takeID) != nil else {
            return "take_id \"\(Echo.short(manifest.takeID))\" is not a coord take id (YYYYMMDD-HHMMSS-NAME-xxxxxx)."
        }
        guard manifest.groups <= maxGroups else { return "groups \(manifest.groups) is more than a day of frames at 240 fps." }
        guard manifest.framePeriodMicroseconds > 0 else { return "frame_period_us \(manifest.framePeriodMicroseconds) is not positive." }
        for camera in manifest.cameras {
            if let p = RigName.problem(with: camera.node, kind: "node") ?? RigName.problem(with: camera.camera, kind: "camera") { return p }
            guard (2...16384).contains(camera.width), (2...16384).contains(camera.height) else {
                return "camera \(camera.node)/\(camera.camera) is \(camera.width)x\(camera.height), not a frame size (2 to 16384 a side)."
            }
        }
        for a in manifest.audio ?? [] {
            if let p = RigName.problem(with: a.node, kind: "node") ?? RigName.problem(with: a.mic, kind: "microphone") { return p }
            guard a.path == "\(a.node)/\(a.mic).mka" else {
                return "microphone \(a.node)/\(a.mic)'s file is \"\(Echo.short(a.path))\", not \(a.node)/\(a.mic).mka."
            }
            guard (1...768_000).contains(a.sampleRate), (1...64).contains(a.channels), (0...255).contains(a.streamIndex) else {
                return "microphone \(a.node)/\(a.mic) has \(a.sampleRate) Hz, \(a.channels) channel(s), stream \(a.streamIndex): not a sound file coord records."
            }
        }
        return nil
    }
}

/// `deliver/deliver.json`: what each deliverable was made from, so a second run skips what is up to date.
public struct DeliverRecord: Codable, Equatable, Sendable {
    public struct Entry: Codable, Equatable, Sendable {
        public var fingerprint: String
        public var bytes: UInt64
        public init(fingerprint: String, bytes: UInt64) { self.fingerprint = fingerprint; self.bytes = bytes }
    }
    public var format = "coord.deliver/1"
    public var outputs: [String: Entry] = [:]
    public init() {}

    /// Whether `output` was made from `fingerprint` and is still the `bytes` it was then (nil: the file is missing).
    public func isUpToDate(_ output: String, fingerprint: String, bytes: UInt64?) -> Bool {
        guard let entry = outputs[output], let bytes else { return false }
        return entry.fingerprint == fingerprint && entry.bytes == bytes
    }
}
