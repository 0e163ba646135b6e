import CoordCore
import Foundation
import TakeDocuments

/// What a Broadcast WAV says beyond its sound (CONTRACT §15): the `bext` origination date and time, and the iXML
/// chunk sound editors' tools read for project, scene, take and tape.
public enum BroadcastWAV {
    /// Group 0's `start_wallclock` (UTC) as the `bext` origination date (`yyyy-MM-dd`) and time (`HH:mm:ss`) in the
    /// coordinator's local time, the one its timecode counts: the zone offset is read off the timecode's time of day
    /// (`timecodeSeconds`, to the nearest quarter hour), so the take says the same wherever it is delivered. Empty
    /// strings for a date that does not parse.
    public static func origination(_ startWallclock: String, timecodeSeconds: Int64?) -> (date: String, time: String) {
        let format = DateFormatter()
        format.locale = Locale(identifier: "en_US_POSIX")
        format.timeZone = TimeZone(identifier: "UTC")
        format.dateFormat = "yyyy-MM-dd'T'HH:mm:ss"
        guard startWallclock.count >= 19, let instant = format.date(from: String(startWallclock.prefix(19))) else { return ("", "") }
        var offset: Int64 = 0
        if let timecodeSeconds {
            let utc = Int64(instant.timeIntervalSince1970) % 86_400
            offset = ((timecodeSeconds - utc) % 86_400 + 86_400) % 86_400
            if offset > 14 * 3600 { offset -= 86_400 }  // zones run from UTC−12 to UTC+14
            offset = (offset + (offset >= 0 ? 450 : -450)) / 900 * 900
        }
        let local = instant.addingTimeInterval(TimeInterval(offset))
        format.dateFormat = "yyyy-MM-dd"
        let date = format.string(from: local)
        format.dateFormat = "HH:mm:ss"
        return (date, format.string(from: local))
    }

    /// The iXML document of one microphone's WAV: PROJECT and SCENE the take's name, TAKE the take id's last six hex
    /// digits (what tells takes of one name apart), TAPE the take id, the timecode rate and flag, and the time
    /// reference in samples since midnight.
    public static func ixml(_ manifest: TakeManifest, mic: TakeManifest.Audio, fps: Int, ntsc: Bool, timeReference: Int64) -> String {
        let e = XMLText.escape
        let rate = ntsc ? "\(fps * 1000)/1001" : "\(fps)/1"
        let flag = ntsc && fps % 30 == 0 ? "DF" : "NDF"
        let nonce = manifest.takeID.split(separator: "-").last.map(String.init) ?? manifest.takeID
        let reference = UInt64(max(0, timeReference))
        var tracks = ""
        for channel in 1...max(1, mic.channels) {
            let name = mic.channels == 1 ? mic.mic : "\(mic.mic) \(channel)"
            tracks += "<TRACK><CHANNEL_INDEX>\(channel)</CHANNEL_INDEX><INTERLEAVE_INDEX>\(channel)</INTERLEAVE_INDEX><NAME>\(e(name))</NAME></TRACK>"
        }
        return """
        <?xml version="1.0" encoding="UTF-8"?>
        <BWFXML><IXML_VERSION>2.10</IXML_VERSION><PROJECT>\(e(manifest.name))</PROJECT><SCENE>\(e(manifest.name))</SCENE>\
        <TAKE>\(e(nonce))</TAKE><TAPE>\(e(manifest.takeID))</TAPE><NOTE>\(e("\(mic.node)/\(mic.mic)"))</NOTE>\
        <SPEED><MASTER_SPEED>\(rate)</MASTER_SPEED><CURRENT_SPEED>\(rate)</CURRENT_SPEED><TIMECODE_RATE>\(rate)</TIMECODE_RATE>\
        <TIMECODE_FLAG>\(flag)</TIMECODE_FLAG><FILE_SAMPLE_RATE>\(mic.sampleRate)</FILE_SAMPLE_RATE><AUDIO_BIT_DEPTH>16</AUDIO_BIT_DEPTH>\
        <TIMESTAMP_SAMPLES_SINCE_MIDNIGHT_HI>\(reference >> 32)</TIMESTAMP_SAMPLES_SINCE_MIDNIGHT_HI>\
        <TIMESTAMP_SAMPLES_SINCE_MIDNIGHT_LO>\(reference & 0xFFFF_FFFF)</TIMESTAMP_SAMPLES_SINCE_MIDNIGHT_LO>\
        <TIMESTAMP_SAMPLE_RATE>\(mic.sampleRate)</TIMESTAMP_SAMPLE_RATE></SPEED>\
        <TRACK_LIST><TRACK_COUNT>\(max(1, mic.channels))</TRACK_COUNT>\(tracks)</TRACK_LIST></BWFXML>

        """
    }

    /// The `iXML` RIFF chunk holding `text`: id, little-endian size, the bytes, a pad byte to an even length.
    public static func chunk(_ text: String) -> Data {
        var body = Data(text.utf8)
        var out = Data("iXML".utf8)
        withUnsafeBytes(of: UInt32(body.count).littleEndian) { out.append(contentsOf: $0) }
        if body.count % 2 == 1 { body.append(0) }
        return out + body
    }
}
