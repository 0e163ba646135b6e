/// The links machine-vision cameras stream over, as buses in the cost model (CONTRACT §12): every GenICam camera
/// reached through one network interface shares that interface's GigE link; a USB3 Vision camera its USB link.
extension Bus {
    /// Of a GigE link's bit rate, what GigE Vision streams can use: at a 1500-byte MTU each 1538 bytes on the wire
    /// (preamble, gap, Ethernet, IP, UDP and GVSP headers) carry about 1444 of image (94 %); 90 % leaves room for
    /// control traffic and resends.
    public static let gigEVisionUsableShare = 0.9

    /// The GigE link of network interface `interface` at `megabitsPerSecond` (1000 when the interface does not say,
    /// as a loopback or virtual one does not).
    public static func gigE(interface: String, megabitsPerSecond: Double?) -> Bus {
        let rate = (megabitsPerSecond ?? 0) > 0 ? megabitsPerSecond! : 1000
        return Bus(id: "gige-\(interface)", kind: rate >= 10_000 ? "10gige" : "gige",
                   bandwidthBytesPerSecond: rate * 1e6 / 8 * gigEVisionUsableShare)
    }

    /// A USB3 Vision camera's link: SuperSpeed's 5 Gbit/s is 500 MB/s after 8b/10b coding, of which bulk transfers
    /// reach about 400 MB/s in practice.
    public static func usb3Vision(id: String) -> Bus {
        Bus(id: "u3v-\(id)", kind: "usb3", bandwidthBytesPerSecond: 400e6)
    }
}

extension PixelFormats {
    /// Bytes per pixel of a GenICam (PFNC) pixel format on its link, nil for a name that is not one.
    public static func genicamBytesPerPixel(_ pixelFormat: String) -> Double? {
        switch pixelFormat.lowercased() {
        case "mono8", "bayerrg8", "bayergr8", "bayergb8", "bayerbg8": return 1
        case "mono16", "mono12", "mono10": return 2
        case "rgb8", "rgb8packed", "bgr8": return 3
        default: return nil
        }
    }
}
