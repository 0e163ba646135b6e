// `coord deliver --to multiview`'s movie, in one pass: every camera's frame of group i decoded, put through the
// filter graph of MultiviewGraph.swift into output frame i, encoded as H.264 beside the microphones' mix in AAC, and
// written through `LibavWriter` with a timecode track. Deliverables describe the movie with the plain values below.
import CFFmpeg

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

public enum MultiviewExport {
    /// A movie that could not be made: one sentence.
    public struct Failure: Error, Equatable, Sendable, CustomStringConvertible {
        public let sentence: String
        init(_ sentence: String) { self.sentence = sentence }
        public var description: String { sentence }
    }

    /// A rectangle in pixels.
    public struct Rect: Sendable, Equatable {
        public var x: Int, y: Int, width: Int, height: Int
        public init(x: Int, y: Int, width: Int, height: Int) { self.x = x; self.y = y; self.width = width; self.height = height }
    }

    /// One camera: its file (`input`, opened by libav; `source` as sentences name it), its cell of the picture and
    /// its scaled picture in the cell, its label, and the frames (by index) that get the filled mark.
    public struct Tile: Sendable, Equatable {
        public var source: String
        public var input: String
        public var cell: Rect
        public var picture: Rect
        public var label: String
        public var filled: Set<Int64>
        public init(source: String, input: String, cell: Rect, picture: Rect, label: String, filled: Set<Int64>) {
            self.source = source; self.input = input; self.cell = cell; self.picture = picture; self.label = label; self.filled = filled
        }
    }

    /// One microphone, aligned to frame 0 as its Broadcast WAV is: `skipSamples` of the recording dropped (positive)
    /// or of silence put before it (negative), `samples` long.
    public struct Sound: Sendable, Equatable {
        public var source: String
        public var input: String
        public var streamIndex: Int
        public var sampleRate: Int
        public var channels: Int
        public var skipSamples: Int64
        public var samples: Int64
        public init(source: String, input: String, streamIndex: Int, sampleRate: Int, channels: Int, skipSamples: Int64, samples: Int64) {
            self.source = source; self.input = input; self.streamIndex = streamIndex; self.sampleRate = sampleRate
            self.channels = channels; self.skipSamples = skipSamples; self.samples = samples
        }
    }

    /// The whole movie: `frames` frames of `width`×`height` at `rateNumerator/rateDenominator` fps from `timecode`.
    public struct Movie: Sendable, Equatable {
        public var width: Int
        public var height: Int
        /// The strip at the bottom that holds the timecode (0: the timecode goes top centre, over the picture).
        public var band: Int
        /// pip: the tiles are overlaid in order on the first; grid: stacked side by side.
        public var overlay: Bool
        public var tiles: [Tile]
        public var sounds: [Sound]
        public var frames: Int64
        public var rateNumerator: Int
        public var rateDenominator: Int
        public var timecode: String
        public var fontFile: String
        public init(width: Int, height: Int, band: Int, overlay: Bool, tiles: [Tile], sounds: [Sound], frames: Int64, rateNumerator: Int,
                    rateDenominator: Int, timecode: String, fontFile: String) {
            self.width = width; self.height = height; self.band = band; self.overlay = overlay; self.tiles = tiles; self.sounds = sounds
            self.frames = frames; self.rateNumerator = rateNumerator; self.rateDenominator = rateDenominator
            self.timecode = timecode; self.fontFile = fontFile
        }
    }

    /// Writes `movie` to `output` (a temporary name; the caller renames it). `progress` gets the frames written so far.
    public static func write(_ movie: Movie, to output: String, progress: (Int64) -> Void) throws(Failure) {
        cff_log_quiet()
        let cameras = try movie.tiles.map { tile throws(Failure) in try CameraReader(tile) }
        let microphones = try movie.sounds.map { sound throws(Failure) in try MicrophoneReader(sound) }
        guard let frame = av_frame_alloc(), let out = av_frame_alloc(), let packet = av_packet_alloc() else {
            throw Failure("cannot make \(output): out of memory.")
        }
        var owned = (Optional(frame), Optional(out), Optional(packet))
        defer { av_frame_free(&owned.0); av_frame_free(&owned.1); av_packet_free(&owned.2) }

        let writer: LibavWriter
        do throws(LibavCall) { writer = try LibavWriter(format: "mov", path: output); try writer.create() } catch {
            throw Failure("cannot create \(output): \(LibavCall.text(error.code)).")
        }
        defer { writer.release() }
        func check(_ r: Int32, _ call: String) throws(Failure) {
            if r < 0 { throw Failure("cannot write \(output): \(call) failed: \(LibavCall.text(r)).") }
        }
        let video = try Encoder.video(movie, writer: writer, check: check)
        let audio = movie.sounds.isEmpty ? nil : try Encoder.audio(writer: writer, check: check)
        defer { video.free(); audio?.free() }
        do throws(LibavCall) { try writer.writeHeader() } catch { try check(error.code, error.call) }

        // Each camera's first picture fixes its buffer source's size and pixel format.
        var firsts: [UnsafeMutablePointer<AVFrame>] = []
        defer { for f in firsts { var p: UnsafeMutablePointer<AVFrame>? = f; av_frame_free(&p) } }
        for camera in cameras {
            guard let f = av_frame_alloc() else { throw Failure("cannot make \(output): out of memory.") }
            firsts.append(f)
            guard try camera.next(into: f) else { throw Failure("\(camera.tile.source) holds no frame; the multiview needs one per group.") }
        }
        let graph = try MultiviewGraph(movie, pictures: firsts.map { .init(width: $0.pointee.width, height: $0.pointee.height, format: $0.pointee.format) },
                                       sounds: microphones.map { .init(sampleRate: $0.sound.sampleRate, layout: $0.layout) },
                                       audioFrameSize: audio?.context.pointee.frame_size ?? 1024)

        var pictures: Int64 = 0
        func drain(_ sink: UnsafeMutablePointer<AVFilterContext>, _ encoder: Encoder) throws(Failure) {
            while try graph.pull(sink, into: out) {
                defer { av_frame_unref(out) }
                if encoder === video {
                    // Output frame i is group i, whatever time base the graph's end settled on.
                    out.pointee.pts = pictures
                    pictures += 1
                } else {
                    out.pointee.pts = av_rescale_q(out.pointee.pts, graph.timeBase(sink), encoder.context.pointee.time_base)
                }
                try encoder.send(out, writer: writer, packet: packet, check: check)
            }
        }
        for i in 0..<movie.frames {
            for (k, camera) in cameras.enumerated() {
                let picture: UnsafeMutablePointer<AVFrame>
                if i == 0 { picture = firsts[k] } else {
                    guard try camera.next(into: frame) else {
                        throw Failure("\(camera.tile.source) holds \(i) frames but the take has \(movie.frames) groups; the multiview needs one frame per group.")
                    }
                    picture = frame
                }
                picture.pointee.pts = i
                av_dict_set(&picture.pointee.metadata, MultiviewGraph.markKey, camera.tile.filled.contains(i) ? "FILLED" : "", 0)
                try graph.push(graph.videoSources[k], picture)
                av_frame_unref(picture)
            }
            // The sound up to the end of this frame, so the file interleaves as it goes.
            for (k, mic) in microphones.enumerated() {
                let until = (i + 1) * Int64(mic.sound.sampleRate) * Int64(movie.rateDenominator) / Int64(movie.rateNumerator)
                try mic.feed(until: min(until, mic.sound.samples), graph: graph, source: graph.audioSources[k])
            }
            try drain(graph.videoSink, video)
            if let sink = graph.audioSink, let audio { try drain(sink, audio) }
            progress(i + 1)
        }
        for source in graph.videoSources { try graph.push(source, nil) }
        for (k, mic) in microphones.enumerated() {
            try mic.feed(until: mic.sound.samples, graph: graph, source: graph.audioSources[k])
            try graph.push(graph.audioSources[k], nil)
        }
        try drain(graph.videoSink, video)
        try video.send(nil, writer: writer, packet: packet, check: check)
        if let sink = graph.audioSink, let audio {
            try drain(sink, audio)
            try audio.send(nil, writer: writer, packet: packet, check: check)
        }
        guard video.written == movie.frames else {
            throw Failure("cannot write \(output): the filter graph gave \(video.written) frames for \(movie.frames) groups.")
        }
        do throws(LibavCall) { try writer.finish() } catch { try check(error.code, error.call) }
    }
}
