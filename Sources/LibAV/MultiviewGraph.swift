// The multiview's libavfilter graph: the only place coord calls avfilter, through the functions the shim loads on
// first use (cff_avfilter_load). One buffer source per camera and per microphone, one sink for the picture and one
// for the sound; the graph between them is the text `description` makes.
import CFFmpeg

/// A configured filter graph with its named sources and two sinks.
final class MultiviewGraph {
    /// libavfilter, loaded once: its functions, or the sentence saying it does not load.
    static let library: Result<cff_avfilter, MultiviewExport.Failure> = {
        var api = cff_avfilter()
        if let error = cff_avfilter_load(&api) {
            return .failure(MultiviewExport.Failure("the multiview needs \(String(cString: cff_avfilter_soname)), which does not load (\(String(cString: error))); install the libavfilter8 package."))
        }
        return .success(api)
    }()

    let api: cff_avfilter
    let graph: UnsafeMutablePointer<AVFilterGraph>
    private(set) var videoSources: [UnsafeMutablePointer<AVFilterContext>] = []
    private(set) var audioSources: [UnsafeMutablePointer<AVFilterContext>] = []
    private(set) var videoSink: UnsafeMutablePointer<AVFilterContext>!
    private(set) var audioSink: UnsafeMutablePointer<AVFilterContext>?

    /// The picture a camera's buffer source receives.
    struct Picture { var width: Int32, height: Int32, format: Int32 }
    /// The sound a microphone's buffer source receives (16-bit interleaved PCM).
    struct Sound { var sampleRate: Int, layout: String }

    /// Builds the graph for `movie` from cameras delivering `pictures` and microphones `sounds`; `audioFrameSize` is the
    /// sound encoder's frame (the sink hands out frames of exactly that many samples).
    init(_ movie: MultiviewExport.Movie, pictures: [Picture], sounds: [Sound], audioFrameSize: Int32) throws(MultiviewExport.Failure) {
        api = try Self.library.get()
        guard let g = api.graph_alloc() else { throw MultiviewExport.Failure("cannot make the multiview's filter graph: out of memory.") }
        graph = g
        let timeBase = "\(movie.rateDenominator)/\(movie.rateNumerator)"
        for (k, p) in pictures.enumerated() {
            let args = "video_size=\(p.width)x\(p.height):pix_fmt=\(p.format):time_base=\(timeBase):pixel_aspect=1/1"
            videoSources.append(try make("buffer", "v\(k)", args))
        }
        for (k, s) in sounds.enumerated() {
            let args = "time_base=1/\(s.sampleRate):sample_rate=\(s.sampleRate):sample_fmt=s16:channel_layout=\(s.layout)"
            audioSources.append(try make("abuffer", "a\(k)", args))
        }
        videoSink = try make("buffersink", "vout", nil)
        if !sounds.isEmpty { audioSink = try make("abuffersink", "aout", nil) }

        // The open ends of the description: its [vK]/[aK] inputs are our sources' outputs, [vout]/[aout] our sinks.
        var outputs: UnsafeMutablePointer<AVFilterInOut>?
        var inputs: UnsafeMutablePointer<AVFilterInOut>?
        defer { api.inout_free(&outputs); api.inout_free(&inputs) }
        func chain(_ list: inout UnsafeMutablePointer<AVFilterInOut>?, _ name: String, _ context: UnsafeMutablePointer<AVFilterContext>) -> Bool {
            guard let end = api.inout_alloc() else { return false }
            end.pointee.name = av_strdup(name)
            end.pointee.filter_ctx = context
            end.pointee.pad_idx = 0
            end.pointee.next = list
            list = end
            return true
        }
        var linked = true
        for (k, s) in videoSources.enumerated() { linked = linked && chain(&outputs, "v\(k)", s) }
        for (k, s) in audioSources.enumerated() { linked = linked && chain(&outputs, "a\(k)", s) }
        linked = linked && chain(&inputs, "vout", videoSink)
        if let audioSink { linked = linked && chain(&inputs, "aout", audioSink) }
        guard linked else { throw MultiviewExport.Failure("cannot make the multiview's filter graph: out of memory.") }
        let text = Self.description(movie, audio: sounds.count)
        var r = api.graph_parse_ptr(graph, text, &inputs, &outputs, nil)
        guard r >= 0 else { throw failure("avfilter_graph_parse_ptr", r) }
        r = api.graph_config(graph, nil)
        guard r >= 0 else { throw failure("avfilter_graph_config", r) }
        if let audioSink { api.buffersink_set_frame_size(audioSink, UInt32(audioFrameSize)) }
    }

    deinit {
        var g: UnsafeMutablePointer<AVFilterGraph>? = graph
        api.graph_free(&g)
    }

    private func make(_ filter: String, _ name: String, _ args: String?) throws(MultiviewExport.Failure) -> UnsafeMutablePointer<AVFilterContext> {
        var context: UnsafeMutablePointer<AVFilterContext>?
        let r = api.graph_create_filter(&context, api.get_by_name(filter), name, args, nil, graph)
        guard r >= 0, let context else { throw failure("avfilter_graph_create_filter(\(filter))", r < 0 ? r : cff_AVERROR_ENOMEM) }
        return context
    }

    private func failure(_ call: String, _ r: Int32) -> MultiviewExport.Failure {
        MultiviewExport.Failure("cannot make the multiview's filter graph: \(call) failed: \(LibavCall.text(r)).")
    }

    /// Hands `frame` (nil: the end) to a source; the graph keeps its own reference.
    func push(_ source: UnsafeMutablePointer<AVFilterContext>, _ frame: UnsafeMutablePointer<AVFrame>?) throws(MultiviewExport.Failure) {
        let r = api.buffersrc_add_frame_flags(source, frame, Int32(AV_BUFFERSRC_FLAG_KEEP_REF))
        guard r >= 0 else { throw MultiviewExport.Failure("the multiview's filter graph refused a frame: \(LibavCall.text(r)).") }
    }

    /// The next frame of a sink into `frame`; false when it needs more input or has ended.
    func pull(_ sink: UnsafeMutablePointer<AVFilterContext>, into frame: UnsafeMutablePointer<AVFrame>) throws(MultiviewExport.Failure) -> Bool {
        let r = api.buffersink_get_frame(sink, frame)
        if r == cff_EAGAIN_error || r == cff_AVERROR_EOF { return false }
        guard r >= 0 else { throw MultiviewExport.Failure("the multiview's filter graph failed: \(LibavCall.text(r)).") }
        return true
    }

    /// The time base of what `sink` hands out.
    func timeBase(_ sink: UnsafeMutablePointer<AVFilterContext>) -> AVRational { api.buffersink_get_time_base(sink) }

    /// The frame metadata key whose value the tile's mark shows (empty: no mark).
    static let markKey = "coord.mark"

    /// The graph as libavfilter's text: each camera scaled into its cell, labelled, its mark drawn from the frame's
    /// metadata; the cells stacked (grid) or overlaid (pip); the timecode burnt in; the microphones mixed to stereo.
    static func description(_ movie: MultiviewExport.Movie, audio: Int) -> String {
        let font = escape(movie.fontFile)
        var parts: [String] = []
        for (k, tile) in movie.tiles.enumerated() {
            let size = max(10, min(tile.cell.height, movie.height / 3) / 16)
            // The label bottom left, except on pip's main picture, whose bottom the insets cover: there top right.
            let main = movie.overlay && k == 0
            let label = "drawtext=fontfile='\(font)':text='\(escape(tile.label))':fontsize=\(size):fontcolor=white"
                + ":box=1:boxcolor=black@0.6:boxborderw=\(size / 4)"
                + (main ? ":x=w-tw-\(size / 2):y=\(size / 2)" : ":x=\(size / 2):y=h-th-\(size / 2)")
            // An empty value draws nothing; "FILLED" a red box in the cell's top-right corner, clear of the stripe.
            let mark = "drawtext=fontfile='\(font)':text='%{metadata\\:\(markKey)}':fontsize=\(size):fontcolor=white"
                + ":box=1:boxcolor=red:boxborderw=\(size / 3):x=w-tw-\(size / 2):y=\(main ? size * 5 / 2 : size / 2)"
            let p = tile.picture, c = tile.cell
            parts.append("[v\(k)]scale=\(p.width):\(p.height),setsar=1,pad=\(c.width):\(c.height):\(p.x):\(p.y):black,\(label),\(mark)[t\(k)]")
        }
        let n = movie.tiles.count
        let stacked: String
        if n == 1 {
            stacked = "[t0]null"
        } else if movie.overlay {
            var chain = ""
            for k in 1..<n {
                let c = movie.tiles[k].cell
                chain += "[\(k == 1 ? "t0" : "o\(k - 1)")][t\(k)]overlay=x=\(c.x):y=\(c.y):eof_action=endall"
                chain += k == n - 1 ? "" : "[o\(k)];"
            }
            stacked = chain
        } else {
            let layout = movie.tiles.map { "\($0.cell.x)_\($0.cell.y)" }.joined(separator: "|")
            stacked = (0..<n).map { "[t\($0)]" }.joined() + "xstack=inputs=\(n):layout=\(layout):fill=black"
        }
        // grid: centred in the band under the cells; pip: top centre (the insets sit along the bottom edge).
        let size = movie.band > 0 ? max(10, movie.band * 2 / 3) : max(14, movie.height / 20)
        let y = movie.band > 0 ? "h-(\(movie.band)+th)/2" : "\(size / 2)"
        let timecode = "drawtext=fontfile='\(font)':timecode='\(escape(movie.timecode))':rate=\(movie.rateNumerator)/\(movie.rateDenominator)"
            + ":fontsize=\(size):fontcolor=white:box=1:boxcolor=black@0.6:boxborderw=\(movie.band > 0 ? 0 : size / 4):x=(w-tw)/2:y=\(y)"
        parts.append("\(stacked),pad=\(movie.width):\(movie.height):0:0:black,\(timecode),format=yuv420p[vout]")
        if audio > 0 {
            for k in 0..<audio { parts.append("[a\(k)]aresample=48000,aformat=sample_fmts=fltp:channel_layouts=stereo[m\(k)]") }
            let mix = audio == 1 ? "[m0]anull" : (0..<audio).map { "[m\($0)]" }.joined() + "amix=inputs=\(audio):duration=longest:dropout_transition=0"
            parts.append("\(mix),aformat=sample_fmts=fltp:sample_rates=48000:channel_layouts=stereo[aout]")
        }
        return parts.joined(separator: ";")
    }

    /// A value inside '…' of a filter option: the option parser's escapes for `\`, `'` and `:` (quotes keep the rest).
    static func escape(_ text: String) -> String {
        var out = ""
        for c in text {
            switch c {
            case "\\", ":": out += "\\\(c)"
            case "'": out += "'\\''"
            default: out.append(c)
            }
        }
        return out
    }
}
