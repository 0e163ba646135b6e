// A UVC camera's isochronous alternate settings, read from the raw descriptors sysfs keeps for a USB device
// (`/sys/bus/usb/devices/<dev>/descriptors`: the device descriptor, then each configuration's descriptors).
// sysfs's own ep_XX directories show only the alternate setting in force, so every setting is read from here.

public enum UsbDescriptors {
    static let interfaceType: UInt8 = 4, endpointType: UInt8 = 5, configurationType: UInt8 = 2
    static let ssCompanionType: UInt8 = 0x30, classSpecificInterface: UInt8 = 0x24
    static let videoClass: UInt8 = 0x0e, videoControl: UInt8 = 1, videoStreaming: UInt8 = 2

    /// The isochronous IN alternate settings of the video streaming interfaces that the video control interface
    /// `controlInterface` lists in its class-specific header (baInterfaceNr), in the configuration numbered
    /// `configuration` (the first when no configuration has that number); every streaming interface's when
    /// `controlInterface` is nil or lists none. Keyed by streaming interface number; empty for malformed bytes.
    public static func uvcStreams(_ bytes: [UInt8], configuration: Int? = nil, controlInterface: Int? = nil) -> [Int: [UsbIsoAltSetting]] {
        let configs = configurations(bytes)
        guard let config = configs.first(where: { $0.count > 5 && Int($0[5]) == configuration }) ?? configs.first
        else { return [:] }
        var streams: [Int: [UsbIsoAltSetting]] = [:]
        var listed: [Int]? = nil
        var interface = (number: -1, alt: -1, cls: UInt8(0), sub: UInt8(0))
        var i = 0
        while i + 2 <= config.count {
            let length = Int(config[i]), type = config[i + 1]
            guard length >= 2, i + length <= config.count else { break }
            let d = Array(config[i..<(i + length)])
            switch type {
            case interfaceType where length >= 9:
                interface = (Int(d[2]), Int(d[3]), d[5], d[6])
            case classSpecificInterface where length >= 12 && d[2] == 1 && interface.cls == videoClass
                    && interface.sub == videoControl && interface.number == controlInterface:
                // VC_HEADER: bInCollection at 11, then that many interface numbers.
                let n = Int(d[11])
                listed = (0..<n).compactMap { 12 + $0 < length ? Int(d[12 + $0]) : nil }
            case endpointType where length >= 7 && interface.cls == videoClass && interface.sub == videoStreaming
                    && d[2] & 0x80 != 0 && d[3] & 3 == 1:
                let alt = UsbIsoAltSetting(alternateSetting: interface.alt, endpointAddress: Int(d[2]),
                                           wMaxPacketSize: Int(d[4]) | Int(d[5]) << 8, bInterval: Int(d[6]))
                streams[interface.number, default: []].append(alt)
            case ssCompanionType where length >= 6 && interface.cls == videoClass && interface.sub == videoStreaming:
                // Follows the endpoint it qualifies.
                if var last = streams[interface.number]?.popLast() {
                    last.bytesPerIntervalSS = Int(d[4]) | Int(d[5]) << 8
                    streams[interface.number]!.append(last)
                }
            default:
                break
            }
            i += length
        }
        guard let listed, !listed.isEmpty else { return streams }
        return streams.filter { listed.contains($0.key) }
    }

    /// Each configuration's bytes (its descriptor and all that wTotalLength covers), after the device descriptor.
    static func configurations(_ bytes: [UInt8]) -> [[UInt8]] {
        var out: [[UInt8]] = []
        var i = bytes.count >= 18 && bytes[1] == 1 ? Int(bytes[0]) : 0
        while i + 4 <= bytes.count {
            let length = Int(bytes[i])
            guard length >= 2 else { break }
            guard bytes[i + 1] == configurationType, length >= 9, i + length <= bytes.count else { i += length; continue }
            let total = Int(bytes[i + 2]) | Int(bytes[i + 3]) << 8
            let end = min(bytes.count, i + max(total, length))
            out.append(Array(bytes[i..<end]))
            i = end
        }
        return out
    }
}
