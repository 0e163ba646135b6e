import Foundation
import TakeDocuments

/// `<take-id>.fcpxml` (FCPXML 1.9, CONTRACT §10): one multicam clip whose angles are the cameras, synced by timecode
/// (every angle's clip starts at the take's timecode), the microphones connected under the first angle as its sound,
/// and a project whose spine holds one `<mc-clip>` spanning the take.
public enum FCPXMLDocument {
    /// - Parameter takeDirectory: absolute path of the take directory (FCP needs absolute file URLs).
    public static func xml(_ plan: DeliverPlan, takeDirectory: String) -> String {
        let fps = plan.fps
        func t(_ frames: Int64) -> String { frames == 0 ? "0s" : "\(frames)/\(fps)s" }
        let start = t(plan.startFrameOfDay), duration = t(plan.groups)
        let e = XMLText.escape
        let width = plan.movs.first?.width ?? 1920, height = plan.movs.first?.height ?? 1080
        var x = """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE fcpxml>
        <fcpxml version="1.9">
            <resources>
                <format id="r1" name="FFVideoFormatRateUndefined" frameDuration="1/\(fps)s" width="\(width)" height="\(height)"/>

        """
        for (i, mov) in plan.movs.enumerated() {
            x += """
                    <asset id="v\(i + 1)" name="\(e("\(mov.node)_\(mov.camera)"))" uid="\(e("\(plan.takeID)/\(mov.output)"))" start="\(start)" duration="\(duration)" hasVideo="1" format="r1" videoSources="1">
                        <media-rep kind="original-media" src="\(e(XMLText.fileURL(takeDirectory + "/" + mov.output)))"/>
                    </asset>

            """
        }
        for (i, wav) in plan.wavs.enumerated() {
            x += """
                    <asset id="a\(i + 1)" name="\(e("\(wav.node)_\(wav.mic)"))" uid="\(e("\(plan.takeID)/\(wav.output)"))" start="\(start)" duration="\(duration)" hasAudio="1" audioSources="1" audioChannels="\(wav.channels)" audioRate="\(wav.sampleRate)">
                        <media-rep kind="original-media" src="\(e(XMLText.fileURL(takeDirectory + "/" + wav.output)))"/>
                    </asset>

            """
        }
        x += """
                <media id="m1" name="\(e(plan.takeID))">
                    <multicam format="r1" tcStart="\(start)" tcFormat="NDF">

        """
        for (i, mov) in plan.movs.enumerated() {
            x += """
                        <mc-angle name="\(e("\(mov.node)/\(mov.camera)"))" angleID="\(e("\(mov.node)_\(mov.camera)"))">
                            <asset-clip ref="v\(i + 1)" name="\(e("\(mov.node)/\(mov.camera)"))" offset="\(start)" start="\(start)" duration="\(duration)" tcFormat="NDF"\(i == 0 && !plan.wavs.isEmpty ? ">" : "/>")

            """
            if i == 0 && !plan.wavs.isEmpty {
                for (j, wav) in plan.wavs.enumerated() {
                    x += """
                                    <asset-clip ref="a\(j + 1)" lane="-\(j + 1)" name="\(e("\(wav.node)/\(wav.mic)"))" offset="\(start)" start="\(start)" duration="\(duration)" tcFormat="NDF" audioRole="dialogue"/>

                    """
                }
                x += "                </asset-clip>\n"
            }
            x += "                </mc-angle>\n"
        }
        let first = plan.movs.first.map { e("\($0.node)_\($0.camera)") } ?? ""
        x += """
                    </multicam>
                </media>
            </resources>
            <library>
                <event name="\(e(plan.takeID))">
                    <project name="\(e(plan.takeID))">
                        <sequence format="r1" duration="\(duration)" tcStart="\(start)" tcFormat="NDF" audioLayout="stereo" audioRate="48k">
                            <spine>
                                <mc-clip ref="m1" name="\(e(plan.takeID))" offset="\(start)" start="\(start)" duration="\(duration)">
                                    <mc-source angleID="\(first)" srcEnable="all"/>
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
}

/// `<take-id>.xml`, FCP 7 XML (xmeml 4) for Premiere Pro (CONTRACT §10): one sequence at the take's timecode, a video
/// track per camera and an audio track per microphone, every clip from the sequence's start over the whole take,
/// each file's `<timecode>` the take's.
public enum FCP7XMLDocument {
    public static func xml(_ plan: DeliverPlan, takeDirectory: String) -> String {
        let e = XMLText.escape
        let rate = "<rate><timebase>\(plan.fps)</timebase><ntsc>FALSE</ntsc></rate>"
        let timecode = "<timecode>\(rate)<string>\(plan.timecode)</string><frame>\(plan.startFrameOfDay)</frame><displayformat>NDF</displayformat></timecode>"
        let g = plan.groups
        func clipTiming() -> String {
            "<duration>\(g)</duration>\(rate)<start>0</start><end>\(g)</end><in>0</in><out>\(g)</out>"
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
                \(timecode)
                <media>
                    <video>
                        <format><samplecharacteristics>\(rate)<width>\(width)</width><height>\(height)</height><pixelaspectratio>square</pixelaspectratio></samplecharacteristics></format>

        """
        for (i, mov) in plan.movs.enumerated() {
            let name = "\(mov.node)_\(mov.camera)"
            x += """
                            <track>
                                <clipitem id="clipitem-v\(i + 1)">
                                    <name>\(e("\(mov.node)/\(mov.camera)"))</name>
                                    <enabled>TRUE</enabled>
                                    \(clipTiming())
                                    <file id="file-v\(i + 1)">
                                        <name>\(e(name)).mov</name>
                                        <pathurl>\(e(XMLText.fileURL(takeDirectory + "/" + mov.output)))</pathurl>
                                        \(rate)
                                        <duration>\(g)</duration>
                                        \(timecode)
                                        <media><video><samplecharacteristics>\(rate)<width>\(mov.width)</width><height>\(mov.height)</height></samplecharacteristics></video></media>
                                    </file>
                                </clipitem>
                            </track>

            """
        }
        x += "            </video>\n            <audio>\n"
        for (i, wav) in plan.wavs.enumerated() {
            let name = "\(wav.node)_\(wav.mic)"
            x += """
                            <track>
                                <clipitem id="clipitem-a\(i + 1)">
                                    <name>\(e("\(wav.node)/\(wav.mic)"))</name>
                                    <enabled>TRUE</enabled>
                                    \(clipTiming())
                                    <file id="file-a\(i + 1)">
                                        <name>\(e(name)).wav</name>
                                        <pathurl>\(e(XMLText.fileURL(takeDirectory + "/" + wav.output)))</pathurl>
                                        \(rate)
                                        <duration>\(g)</duration>
                                        \(timecode)
                                        <media><audio><samplecharacteristics><depth>16</depth><samplerate>\(wav.sampleRate)</samplerate></samplecharacteristics><channelcount>\(wav.channels)</channelcount></audio></media>
                                    </file>
                                    <sourcetrack><mediatype>audio</mediatype><trackindex>1</trackindex></sourcetrack>
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
