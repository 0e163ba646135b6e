import ArgumentParser
import Coordinator
import Deliverables
import TakeDocuments
import Foundation

/// `coord deliver TAKE_DIR [--to LIST] [--video-codec prores-proxy|prores-lt|prores|prores-hq|h264|copy]`: the
/// hand-off to post-production (CONTRACT §10, §15), from the take directory alone.
struct Deliver: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make a collected take's deliverables for editors and DITs.",
        discussion: """
        mov: deliver/<take-id>_<node>_<camera>.mov (QuickTime with a timecode track and the camera's reel name, one frame \
        per group; h264 re-wrapped, other codecs encoded per --video-codec) and deliver/<take-id>_<node>_<mic>.wav \
        (Broadcast WAV: bext TimeReference at group 0, origination date and time, iXML). fcpxml: <take-id>.fcpxml, a Final Cut Pro multicam clip. fcp7xml: <take-id>.xml for Premiere Pro. \
        mhl: an ASC MHL history in ascmhl/ (xxh128 of every file; check it with the ASC's `ascmhl-debug verify TAKE_DIR`). multiview (not made unless \
        asked): deliver/<take-id>_multiview.mov, every camera of each group in one labelled H.264 frame (--layout grid|pip, \
        --width) with the timecode burnt in and the microphones' mix. A second \
        run skips what is up to date. Every reference is relative to the take directory, so a copied take relinks.
        """)

    @Argument(help: "The take directory.") var takeDirectory: String
    @Option(help: "What to make: any of mov, fcpxml, fcp7xml, mhl, multiview, comma-separated.") var to = "mov,fcpxml,fcp7xml,mhl"
    @Option(help: "Pictures not recorded in h264: prores-proxy (ProRes 422 Proxy), prores-lt, prores (ProRes 422), prores-hq (10-bit), h264, or copy (re-wrap as recorded, refused for FFV1).")
    var videoCodec = VideoCodecChoice.standard.rawValue
    @Option(help: "With --to multiview: grid (every camera in a grid) or pip (the first camera full frame, the others as insets).")
    var layout: String?
    @Option(help: "With --to multiview: the movie's width in pixels, even (default 1920).") var width: Int?

    func run() throws {
        // multiview is made first, so an mhl in the same list seals it (DeliverMultiview.swift).
        let (multiview, rest) = Multiview.split(to)
        if multiview { try Multiview.deliver(takeDirectory, layout: layout, width: width) } else { try Multiview.refuseOptions(layout, width) }
        if multiview && rest.isEmpty { return }
        let items = try Self.items(rest)
        let codec: VideoCodecChoice
        switch VideoCodecChoice.parse(videoCodec) {
        case .success(let choice): codec = choice
        case .failure(let problem): throw CoordError(.usage, problem.sentence)
        }
        try Self.deliver(takeDirectory, items: items, codec: codec)
    }

    /// `--to LIST` (also `coord demo --deliver LIST`), or a usage error.
    static func items(_ list: String) throws -> [DeliverItem] {
        switch DeliverItem.parse(list) {
        case .success(let parsed): return parsed
        case .failure(let problem): throw CoordError(.usage, problem.sentence)
        }
    }

    /// The rig file's `take.deliver`, once a take is collected and complete (`finishTake` has thrown otherwise).
    static func afterCollection(_ outcome: TakeOutcome, _ items: [String]?) throws {
        guard let items, !items.isEmpty, outcome.manifest.collection?.state != .pending else { return }
        try deliver(outcome.directory.path, items: try Self.items(items.joined(separator: ",")), codec: .standard)
    }

    /// Runs a delivery and prints what it made; failures as CoordError (bad input: exit 2, else 1).
    static func deliver(_ takeDirectory: String, items: [DeliverItem], codec: VideoCodecChoice) throws {
        do {
            let summary = try Deliverer.run(takeDirectory: takeDirectory, items: items, codec: codec) { line in
                FileHandle.standardError.write(Data("coord deliver: \(line)\n".utf8))
            }
            for made in summary.made { print("made \(made)") }
            for same in summary.upToDate { print("up to date \(same)") }
        } catch let problem as DeliverProblem {
            throw CoordError(.usage, problem.sentence)
        } catch let failure as DeliverFailure {
            throw CoordError(.failure, failure.sentence)
        }
    }
}
