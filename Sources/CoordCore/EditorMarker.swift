/// A marker on one angle's clip in the FCPXML, the FCP 7 XML and the `.otio` (CONTRACT §15): a run of filled frames
/// (`dup` rows of a camera's frames table) or an event of that camera or microphone (camera lost, sound gap…), at
/// the group where it begins.
public struct EditorMarker: Equatable, Sendable {
    /// The first group it covers, from group 0.
    public var group: Int64
    /// How many groups it covers (at least 1).
    public var length: Int64
    /// What an editor reads on the marker.
    public var name: String
    /// The sentence behind it.
    public var note: String

    public init(group: Int64, length: Int64, name: String, note: String) {
        self.group = group; self.length = length; self.name = name; self.note = note
    }

    /// One marker per run of consecutive `dup` rows of a frames table (`frame,group,center_us,flags`), over groups
    /// `0..<groups`. Rows that do not parse are left to the deliverer's check of the table.
    public static func fills(_ csv: String, groups: Int64) -> [EditorMarker] {
        var runs: [EditorMarker] = []
        var open: (first: Int64, last: Int64)?
        func close() {
            guard let run = open else { return }
            let n = run.last - run.first + 1
            let span = n == 1 ? "group \(run.first) repeats" : "groups \(run.first)–\(run.last) repeat"
            runs.append(EditorMarker(group: run.first, length: n, name: n == 1 ? "filled frame" : "\(n) filled frames",
                                     note: "\(span) the frame before (flagged dup in frames.csv)."))
            open = nil
        }
        for line in csv.split(whereSeparator: \.isNewline).dropFirst() {
            let fields = line.split(separator: ",", omittingEmptySubsequences: false)
            guard fields.count >= 4, let group = Int64(fields[1]), (0..<groups).contains(group) else { continue }
            if fields[3].trimmingCharacters(in: .whitespaces) == "dup" {
                if let run = open, run.last + 1 == group { open = (run.first, group) } else { close(); open = (group, group) }
            } else {
                close()
            }
        }
        close()
        return runs
    }

    /// Event kinds summarized by the runs of the frames tables (`fills`), not marked again.
    public static let summaries: Set<TakeEvent.Kind> = ["dup", "held"]

    /// The manifest's events of each camera and microphone of the take, keyed `node/camera` or `node/mic`, each at
    /// the group nearest its instant (clamped into the take).
    public static func events(_ manifest: TakeManifest) -> [String: [EditorMarker]] {
        let angles = Set(manifest.cameras.map { "\($0.node)/\($0.camera)" } + (manifest.audio ?? []).map { "\($0.node)/\($0.mic)" })
        let period = max(manifest.framePeriodMicroseconds, 1)
        var out: [String: [EditorMarker]] = [:]
        for event in manifest.events where !summaries.contains(event.kind) {
            let key = "\(event.node)/\(event.camera)"
            guard angles.contains(key), manifest.groups > 0 else { continue }
            let since = Saturating.subtract(event.tMicroseconds, manifest.t0Microseconds)
            let group = min(max((since >= 0 ? Saturating.add(since, period / 2) : Saturating.subtract(since, period / 2)) / period, 0), manifest.groups - 1)
            out[key, default: []].append(EditorMarker(group: group, length: 1, name: event.kind.rawValue, note: event.detail))
        }
        return out
    }
}
