import Foundation
import TakeDocuments

/// `<take-id>.fcpxml` (FCPXML 1.9, CONTRACT §10 and §15): one multicam clip whose angles are the cameras, synced by
/// timecode (every angle's clip starts at the take's timecode), each camera's angle carrying its own node's
/// microphones as connected clips, one more angle of every microphone (the sync sound), markers where frames were
/// filled or a camera or microphone had an event, and a project whose spine holds one `<mc-clip>` spanning the take.
/// Every `src` is relative to the take directory, where the document lies, so a copied take relinks where it lands.
public enum FCPXMLDocument {
    /// The audio-only angle's id: a camera's is `<node>_<camera>`, which always holds a `_`.
    static let soundAngle = "sync-sound"

    public static func xml(_ plan: DeliverPlan) -> String {
        // A frame is D/N s: 1001/30000s at 29.97, drop-frame timecode there and at 59.94 (CONTRACT §13).
        let n = plan.rate.numerator, d = Int64(plan.rate.denominator), tcFormat = plan.rate.isDropFrame ? "DF" : "NDF"
        func t(_ frames: Int64) -> String { frames == 0 ? "0s" : "\(frames * d)/\(n)s" }
        let start = t(plan.startFrameOfDay), duration = t(plan.groups)
        let e = XMLText.escape
        let width = plan.movs.first?.width ?? 1920, height = plan.movs.first?.height ?? 1080
        var x = """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE fcpxml>
        <fcpxml version="1.9">
            <resources>
                <format id="r1" name="FFVideoFormatRateUndefined" frameDuration="\(d)/\(n)s" width="\(width)" height="\(height)"/>

        """
        for (i, mov) in plan.movs.enumerated() {
            x += """
                    <asset id="v\(i + 1)" name="\(e(mov.reel))" uid="\(e(mov.output))" start="\(start)" duration="\(duration)" hasVideo="1" format="r1" videoSources="1">
                        <media-rep kind="original-media" src="\(e(XMLText.relativeURL(mov.output)))"/>
                        <metadata>
                            <md key="com.apple.proapps.studio.reel" value="\(e(mov.reel))"/>
                            <md key="com.apple.proapps.studio.scene" value="\(e(plan.takeName))"/>
                            <md key="com.apple.proapps.studio.shot" value="\(e(String(plan.takeID.suffix(6))))"/>
                            <md key="com.apple.proapps.studio.angle" value="\(e("\(mov.node)/\(mov.camera)"))"/>
                        </metadata>
                    </asset>

            """
        }
        for (i, wav) in plan.wavs.enumerated() {
            x += """
                    <asset id="a\(i + 1)" name="\(e(name(wav, plan)))" uid="\(e(wav.output))" start="\(start)" duration="\(duration)" hasAudio="1" audioSources="1" audioChannels="\(wav.channels)" audioRate="\(wav.sampleRate)">
                        <media-rep kind="original-media" src="\(e(XMLText.relativeURL(wav.output)))"/>
                    </asset>

            """
        }
        x += """
                <media id="m1" name="\(e(plan.takeID))">
                    <multicam format="r1" tcStart="\(start)" tcFormat="\(tcFormat)">

        """
        let audioID = Dictionary(uniqueKeysWithValues: plan.wavs.enumerated().map { ("\($1.node)/\($1.mic)", "a\($0 + 1)") })
        /// One `<asset-clip>`: its connected clips (lanes below), then its markers (the DTD's order).
        func clip(ref: String, name: String, key: String, lane: Int?, audio: Bool, connected: [WavJob], indent: String) -> String {
            let role = audio ? " audioRole=\"dialogue\"" : ""
            let head = "\(indent)<asset-clip ref=\"\(ref)\"\(lane.map { " lane=\"\($0)\"" } ?? "") name=\"\(e(name))\" offset=\"\(start)\" start=\"\(start)\" duration=\"\(duration)\" tcFormat=\"\(tcFormat)\"\(role)"
            var body = ""
            for (j, wav) in connected.enumerated() {
                body += clip(ref: audioID["\(wav.node)/\(wav.mic)"]!, name: self.name(wav, plan), key: "\(wav.node)/\(wav.mic)",
                             lane: -(j + 1), audio: true, connected: [], indent: indent + "    ")
            }
            for m in plan.markers[key] ?? [] {
                body += "\(indent)    <marker start=\"\(t(plan.startFrameOfDay + m.group))\" duration=\"\(t(m.length))\" value=\"\(e(m.name))\" note=\"\(e(m.note))\"/>\n"
            }
            return body.isEmpty ? head + "/>\n" : head + ">\n" + body + "\(indent)</asset-clip>\n"
        }
        let indent = String(repeating: " ", count: 16)
        for (i, mov) in plan.movs.enumerated() {
            x += "            <mc-angle name=\"\(e("\(mov.node)/\(mov.camera)"))\" angleID=\"\(e("\(mov.node)_\(mov.camera)"))\">\n"
            x += clip(ref: "v\(i + 1)", name: mov.reel, key: "\(mov.node)/\(mov.camera)", lane: nil, audio: false,
                      connected: plan.wavs(of: mov), indent: indent)
            x += "            </mc-angle>\n"
        }
        if let first = plan.wavs.first {
            x += "            <mc-angle name=\"sync sound\" angleID=\"\(soundAngle)\">\n"
            // Every microphone: the first in the angle's storyline, the others connected below it.
            x += clip(ref: audioID["\(first.node)/\(first.mic)"]!, name: name(first, plan), key: "\(first.node)/\(first.mic)", lane: nil,
                      audio: true, connected: Array(plan.wavs.dropFirst()), indent: indent)
            x += "            </mc-angle>\n"
        }
        let firstAngle = plan.movs.first.map { e("\($0.node)_\($0.camera)") } ?? ""
        x += """
                    </multicam>
                </media>
            </resources>
            <library>
                <event name="\(e(plan.takeID))">
                    <project name="\(e(plan.takeID))">
                        <sequence format="r1" duration="\(duration)" tcStart="\(start)" tcFormat="\(tcFormat)" audioLayout="stereo" audioRate="48k">
                            <spine>
                                <mc-clip ref="m1" name="\(e(plan.takeID))" offset="\(start)" start="\(start)" duration="\(duration)">
                                    <mc-source angleID="\(firstAngle)" srcEnable="all"/>
                                </mc-clip>
                            </spine>
                        </sequence>
                    </project>
                </event>
            </library>
        </fcpxml>

        """
        return x
    }

    /// A microphone's clip name: its file's, which carries the take.
    static func name(_ wav: WavJob, _ plan: DeliverPlan) -> String { "\(plan.takeID)_\(wav.node)_\(wav.mic)" }
}
