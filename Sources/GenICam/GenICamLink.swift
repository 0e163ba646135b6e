import CoordCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Which of the node's links a GenICam camera's stream crosses, as a bus for the cost model: the network interface
/// holding the host address Aravis talks to the camera from, at the speed sysfs gives it (GigE Vision), or the
/// camera's own USB3 link (USB3 Vision).
public enum GenICamLink {
    /// The bus of a camera described by `description`; `systemRoot` is where /sys is read (tests feed a fake tree).
    public static func bus(of description: GenICamDescription, deviceID: String, systemRoot: URL) -> Bus? {
        switch description.identity.transport {
        case "GigEVision":
            let interface = description.hostAddress.flatMap(interfaceName(holding:)) ?? "unknown"
            return .gigE(interface: interface, megabitsPerSecond: megabitsPerSecond(interface: interface, systemRoot: systemRoot))
        case "USB3Vision":
            return .usb3Vision(id: deviceID)
        default:
            return nil
        }
    }

    /// The network interface that has IPv4 address `address`, nil when none does.
    public static func interfaceName(holding address: String) -> String? {
        var wanted = in_addr()
        guard inet_pton(AF_INET, address, &wanted) == 1 else { return nil }
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return nil }
        defer { freeifaddrs(list) }
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            guard let addr = entry.pointee.ifa_addr, addr.pointee.sa_family == sa_family_t(AF_INET) else { continue }
            let ip = addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr.s_addr }
            if ip == wanted.s_addr { return String(cString: entry.pointee.ifa_name) }
        }
        return nil
    }

    /// The interface's link speed in Mbit/s from sysfs, nil when it has none (loopback, most virtual links).
    public static func megabitsPerSecond(interface: String, systemRoot: URL) -> Double? {
        let url = systemRoot.appendingPathComponent("sys/class/net/\(interface)/speed")
        guard let text = try? String(contentsOf: url, encoding: .utf8),
              let value = Double(text.trimmingCharacters(in: .whitespacesAndNewlines)), value > 0 else { return nil }
        return value
    }
}
