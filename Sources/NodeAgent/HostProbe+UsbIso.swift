// A USB webcam's isochronous alternate settings and the one in force, from sysfs (issue 36 item 4): what the node
// expects the host controller to reserve for the camera's stream, reported beside its bus.
import CoordCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

extension HostProbe {
    /// What sysfs says of a V4L2 device's USB video streaming: the device's speed, every isochronous alternate
    /// setting of the streaming interface its control interface lists, and the setting in force now (0 while it
    /// does not stream); nil for a device not on USB or whose descriptors list no isochronous streaming endpoint
    /// (a bulk camera reserves nothing).
    public func usbIsoStream(forVideoDevice path: String) -> (stream: UsbIsoStream, interface: Int, inForce: Int?)? {
        let name = (path as NSString).lastPathComponent
        guard !name.isEmpty, name != ".", name != ".." else { return nil }
        // The video node hangs off the UVC control interface (`1-1:1.0`); its parent is the USB device.
        guard var dir = resolve("sys/class/video4linux/\(name)/device"), dir.count >= 2,
              let control = read(dir.joined(separator: "/") + "/bInterfaceNumber").flatMap({ Int($0, radix: 16) })
        else { return nil }
        let interfaceDir = dir.removeLast()
        let device = dir.joined(separator: "/")
        guard let speed = read("\(device)/speed").flatMap(Double.init).flatMap(UsbSpeed.init(megabitsPerSecond:)),
              let bytes = binaryFile("\(device)/descriptors") else { return nil }
        let configuration = read("\(device)/bConfigurationValue").flatMap { Int($0) }
        let streams = UsbDescriptors.uvcStreams(bytes, configuration: configuration, controlInterface: control)
        // One streaming interface per video node is the rule; with more, the first (uvcvideo's first stream).
        guard let number = streams.keys.min(), let alts = streams[number], !alts.isEmpty else { return nil }
        // The streaming interface's directory: the control one's name with its number replaced (`1-1:1.1`).
        let prefix = interfaceDir.split(separator: ".").dropLast().joined(separator: ".")
        let inForce = read("\(device)/\(prefix).\(number)/bAlternateSetting").flatMap { Int($0) }
        return (UsbIsoStream(speed: speed, altSettings: alts), number, inForce)
    }

    /// A binary sysfs file's bytes (at most 64 KiB: a configuration's wTotalLength is 16 bits); nil if unreadable.
    func binaryFile(_ relative: String) -> [UInt8]? {
        guard let parts = resolve(relative) else { return nil }
        var base = root.path
        while base.hasSuffix("/") { base.removeLast() }
        let path = base + "/" + parts.joined(separator: "/")
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 1 << 17 {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { return bytes }
            bytes += chunk[0..<n]
        }
        return bytes
    }
}

extension CameraListing {
    /// `  usb isochronous: interface 1 (high speed), alt 1 3072 B per 125 µs = 24.6 MB/s; reserves up to 24.6 MB/s of
    /// the 48.0 MB/s the bus leaves to periodic transfers; in force: alt 0`.
    static func isochronousLine(_ iso: (stream: UsbIsoStream, interface: Int, inForce: Int?)) -> String {
        let speed = iso.stream.speed
        let mb = { (x: Double) in String(format: "%.1f MB/s", x / 1e6) }
        let alts = iso.stream.altSettings.map { alt in
            let interval = alt.intervalSeconds(speed) * 1e6
            let per = interval >= 1000 ? String(format: "%g ms", interval / 1000) : String(format: "%g µs", interval)
            return "alt \(alt.alternateSetting) \(alt.bytesPerInterval(speed)) B per \(per) = \(mb(alt.bytesPerSecond(speed)))"
        }
        return "  usb isochronous: interface \(iso.interface) (\(speed.rawValue) speed), \(alts.joined(separator: ", "))"
            + "; reserves up to \(mb(iso.stream.reservedBytesPerSecond)) of the \(mb(speed.periodicBytesPerSecond)) the bus"
            + " leaves to periodic transfers; in force: " + (iso.inForce.map { "alt \($0)" } ?? "unknown")
    }
}
