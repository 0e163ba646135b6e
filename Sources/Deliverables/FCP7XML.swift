import Foundation
import TakeDocuments

/// `<take-id>.xml`, FCP 7 XML (xmeml 4) for Premiere Pro (CONTRACT §10 and §15): one sequence at the take's timecode,
/// a video track per camera and an audio track per microphone, every clip from the sequence's start over the whole
/// take, each file's `<timecode>` the take's with the camera's reel. Each camera's clip is linked to its own node's
/// microphones (its angle's sound); the microphones' tracks are the sync sound. Markers where frames were filled or
/// a camera or microphone had an event. Every `pathurl` is relative to the take directory, where the document lies.
public enum FCP7XMLDocument {
    public static func xml(_ plan: DeliverPlan) -> String {
        let e = XMLText.escape
        // 29.97 is timebase 30 with ntsc TRUE, its timecode drop-frame (CONTRACT §13).
        let rate = "<rate><timebase>\(plan.fps)</timebase><ntsc>\(plan.rate.isInteger ? "FALSE" : "TRUE")</ntsc></rate>"
        func timecode(reel: String?) -> String {
            "<timecode>\(rate)<string>\(plan.timecode)</string><frame>\(plan.startFrameOfDay)</frame><displayformat>\(plan.rate.isDropFrame ? "DF" : "NDF")</displayformat>"
                + (reel.map { "<reel><name>\(e($0))</name></reel>" } ?? "") + "</timecode>"
        }
        let g = plan.groups
        func clipTiming() -> String {
            "<duration>\(g)</duration>\(rate)<start>0</start><end>\(g)</end><in>0</in><out>\(g)</out>"
        }
        func markers(_ key: String) -> String {
            (plan.markers[key] ?? []).map { m in
                "<marker><name>\(e(m.name))</name><comment>\(e(m.note))</comment><in>\(m.group)</in><out>\(m.group + m.length)</out></marker>"
            }.joined()
        }
        let audioTrack = Dictionary(uniqueKeysWithValues: plan.wavs.enumerated().map { ("\($1.node)/\($1.mic)", $0 + 1) })
        /// `<link>`s tying a clip to the others that play with it: Premiere moves and cuts them together.
        func links(video: Int?, audio: [Int]) -> String {
            var out = ""
            if let video {
                out += "<link><linkclipref>clipitem-v\(video)</linkclipref><mediatype>video</mediatype><trackindex>\(video)</trackindex><clipindex>1</clipindex></link>"
            }
            for a in audio {
                out += "<link><linkclipref>clipitem-a\(a)</linkclipref><mediatype>audio</mediatype><trackindex>\(a)</trackindex><clipindex>1</clipindex></link>"
            }
            return out
        }
        let width = plan.movs.first?.width ?? 1920, height = plan.movs.first?.height ?? 1080
        var x = """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE xmeml>
        <xmeml version="4">
            <sequence id="sequence-1">
                <name>\(e(plan.takeID))</name>
                <duration>\(g)</duration>
                \(rate)
                \(timecode(reel: nil))
                <media>
                    <video>
                        <format><samplecharacteristics>\(rate)<width>\(width)</width><height>\(height)</height><pixelaspectratio>square</pixelaspectratio></samplecharacteristics></format>

        """
        for (i, mov) in plan.movs.enumerated() {
            let sound = plan.wavs(of: mov).compactMap { audioTrack["\($0.node)/\($0.mic)"] }
            x += """
                            <track>
                                <clipitem id="clipitem-v\(i + 1)">
                                    <name>\(e(mov.reel))</name>
                                    <enabled>TRUE</enabled>
                                    \(clipTiming())
                                    <file id="file-v\(i + 1)">
                                        <name>\(e((mov.output as NSString).lastPathComponent))</name>
                                        <pathurl>\(e(XMLText.relativeURL(mov.output)))</pathurl>
                                        \(rate)
                                        <duration>\(g)</duration>
                                        \(timecode(reel: mov.reel))
                                        <media><video><samplecharacteristics>\(rate)<width>\(mov.width)</width><height>\(mov.height)</height></samplecharacteristics></video></media>
                                    </file>
                                    \(markers("\(mov.node)/\(mov.camera)"))\(sound.isEmpty ? "" : links(video: i + 1, audio: sound))
                                </clipitem>
                            </track>

            """
        }
        x += "            </video>\n            <audio>\n"
        for (i, wav) in plan.wavs.enumerated() {
            let picture = plan.movs.firstIndex { $0.node == wav.node }.map { $0 + 1 }
            x += """
                            <track>
                                <clipitem id="clipitem-a\(i + 1)">
                                    <name>\(e(FCPXMLDocument.name(wav, plan)))</name>
                                    <enabled>TRUE</enabled>
                                    \(clipTiming())
                                    <file id="file-a\(i + 1)">
                                        <name>\(e((wav.output as NSString).lastPathComponent))</name>
                                        <pathurl>\(e(XMLText.relativeURL(wav.output)))</pathurl>
                                        \(rate)
                                        <duration>\(g)</duration>
                                        \(timecode(reel: nil))
                                        <media><audio><samplecharacteristics><depth>16</depth><samplerate>\(wav.sampleRate)</samplerate></samplecharacteristics><channelcount>\(wav.channels)</channelcount></audio></media>
                                    </file>
                                    <sourcetrack><mediatype>audio</mediatype><trackindex>1</trackindex></sourcetrack>
                                    \(markers("\(wav.node)/\(wav.mic)"))\(picture == nil ? "" : links(video: picture, audio: [i + 1]))
                                </clipitem>
                            </track>

            """
        }
        x += """
                    </audio>
                </media>
            </sequence>
        </xmeml>

        """
        return x
    }
}
