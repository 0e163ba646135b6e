import Foundation
import Capture
import Platform

#if canImport(Glibc)
import Glibc
#endif

/// What a GigE Vision camera says of itself in its answer to discovery (GVCP DISCOVERY_ACK: the bootstrap
/// registers' first 248 bytes). Pure: `parse` reads a packet, `answers(to:)` matches the ids Aravis accepts.
public struct GigEVisionAnnouncement: Equatable, Sendable {
    public var vendor: String
    public var model: String
    public var serial: String
    /// The camera's user-defined name (DeviceUserID), empty when none is set.
    public var userName: String
    /// "00:11:22:33:44:55".
    public var mac: String
    /// Its IPv4 address as it says it (current IP).
    public var address: String

    public init(vendor: String, model: String, serial: String, userName: String, mac: String, address: String) {
        self.vendor = vendor; self.model = model; self.serial = serial; self.userName = userName; self.mac = mac
        self.address = address
    }

    /// The id Aravis 0.8 gives it, `VENDOR-MODEL-SERIAL` (the serial is the MAC when the camera has none), control
    /// characters removed: what `coord-node --list-cameras` prints and `--genicam NAME=DEVICE_ID` takes.
    public var deviceID: String { Self.stripped("\(vendor)-\(model)-\(serialOrMAC)") }

    var serialOrMAC: String { serial.isEmpty ? mac : serial }

    /// Whether `id` names this camera, as Aravis' GigE Vision interface matches one: its device id, its user-defined
    /// name, `VENDOR-SERIAL`, its MAC address or its IP address.
    public func answers(to id: String) -> Bool {
        guard !id.isEmpty else { return false }
        return id == deviceID || (!userName.isEmpty && id == userName) || id == Self.stripped("\(vendor)-\(serialOrMAC)")
            || id.lowercased() == mac || id == address
    }

    /// GVCP's discovery command: a CMD packet (0x42) asking for an acknowledge (flag 0x01), command 0x0002
    /// (DISCOVERY_CMD), no payload, request id 0xffff.
    public static let discoveryCommand: [UInt8] = [0x42, 0x01, 0x00, 0x02, 0x00, 0x00, 0xff, 0xff]
    /// GVCP's UDP port.
    public static let port: UInt16 = 3956
    static let bootstrapSize = 0xf8

    /// The announcement in a DISCOVERY_ACK packet, nil for anything else (another command, a short packet, an
    /// error status).
    public static func parse(_ packet: [UInt8]) -> GigEVisionAnnouncement? {
        guard packet.count >= 8 + bootstrapSize else { return nil }
        func u16(_ at: Int) -> Int { Int(packet[at]) << 8 | Int(packet[at + 1]) }
        // Header: status, acknowledge (0x0003 = DISCOVERY_ACK), length, request id.
        guard u16(0) == 0, u16(2) == 0x0003, u16(4) >= bootstrapSize, u16(6) == 0xffff else { return nil }
        let data = Array(packet[8..<(8 + bootstrapSize)])
        func string(_ offset: Int, _ size: Int) -> String {
            let bytes = data[offset..<(offset + size)].prefix { $0 != 0 }
            return String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespaces)
        }
        // MAC: the low two bytes of register 0x08 and the four of 0x0c; current IP at 0x24.
        let mac = data[0x0a..<0x10].map { String(format: "%02x", $0) }.joined(separator: ":")
        let ip = data[0x24..<0x28].map { String($0) }.joined(separator: ".")
        return GigEVisionAnnouncement(vendor: string(0x48, 32), model: string(0x68, 32), serial: string(0xd8, 16),
                                      userName: string(0xe8, 16), mac: mac, address: ip)
    }

    /// Aravis' ARV_DEVICE_NAME_ILLEGAL_CHARACTERS (0x01…0x1f but 0x10) removed.
    static func stripped(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.filter { !(1...0x1f).contains($0.value) || $0.value == 0x10 }))
    }
}

/// A GigE Vision camera discovery found: what it said, and the host's interface and address it answered on.
public struct GigEVisionCameraFound: Equatable, Sendable {
    public var announcement: GigEVisionAnnouncement
    public var interface: String
    /// The host's IPv4 address on `interface`: GVCP and the stream are talked from it.
    public var interfaceAddress: String
}

/// GigE Vision discovery on the network interfaces a node names (`coord-node --genicam-interface IFACE`, node file
/// `genicam_interfaces:`) and nowhere else: Aravis' own discovery broadcasts on every interface of the host, so it
/// is never used (CAravis keeps it off). One UDP socket per interface, bound to the host's address there (and to
/// the device where allowed), sends one broadcast DISCOVERY_CMD on that link only and reads the acknowledges.
public enum GigEVisionDiscovery {
    /// How long discovery waits for answers, as Aravis does (ARV_GV_INTERFACE_DISCOVERY_TIMEOUT_MS).
    public static let answerWindowMicroseconds = 1_000_000

    /// The host's IPv4 address on `interface`, or one sentence saying why it has none to discover from.
    public static func address(of interface: String) -> Result<String, CameraSourceError> {
        var list: UnsafeMutablePointer<ifaddrs>?
        do { try POSIX.retryingEINTR("getifaddrs") { getifaddrs(&list) } } catch {
            return .failure(CameraSourceError("cannot list this host's network interfaces to find \(interface): \(error.reason)"))
        }
        guard let first = list else {
            return .failure(CameraSourceError("cannot list this host's network interfaces to find \(interface): it has none"))
        }
        defer { freeifaddrs(list) }
        var exists = false, up = false
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            guard String(cString: entry.pointee.ifa_name) == interface else { continue }
            exists = true
            if entry.pointee.ifa_flags & UInt32(IFF_UP) != 0 { up = true }
            guard let addr = entry.pointee.ifa_addr, addr.pointee.sa_family == sa_family_t(AF_INET) else { continue }
            var sin = addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee }
            var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
            guard inet_ntop(AF_INET, &sin.sin_addr, &text, socklen_t(text.count)) != nil else { continue }
            if up { return .success(String(cString: text)) }
        }
        if !exists {
            return .failure(CameraSourceError("GenICam interface \(interface) is not a network interface of this host (see ip link)"))
        }
        if !up { return .failure(CameraSourceError("GenICam interface \(interface) is down, so no GigE Vision camera can be found on it")) }
        return .failure(CameraSourceError("GenICam interface \(interface) has no IPv4 address, so no GigE Vision camera can be found on it"))
    }

    /// Every GigE Vision camera that answers on `interfaces` within the answer window (or, with `looking`, as soon as
    /// the camera with that id answers). Throws one sentence when an interface cannot be used.
    public static func discover(on interfaces: [String], looking id: String? = nil) throws -> [GigEVisionCameraFound] {
        var sockets: [(fd: Int32, interface: String, address: String)] = []
        defer { for s in sockets { close(s.fd) } }
        for interface in interfaces {
            let address = try Self.address(of: interface).get()
            let fd = try socket(bound: address, device: interface)
            sockets.append((fd, interface, address))
            var to = sockaddr_in()
            to.sin_family = sa_family_t(AF_INET)
            to.sin_port = GigEVisionAnnouncement.port.bigEndian
            to.sin_addr.s_addr = INADDR_BROADCAST
            do {
                try POSIX.retryingEINTR("sendto") {
                    GigEVisionAnnouncement.discoveryCommand.withUnsafeBytes { bytes in
                        withUnsafePointer(to: &to) { p in
                            p.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                                sendto(fd, bytes.baseAddress, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                            }
                        }
                    }
                }
            } catch {
                throw CameraSourceError("GigE Vision discovery on \(interface) (\(address)) could not be sent: \(error.reason)")
            }
        }
        var found: [GigEVisionCameraFound] = []
        let deadline = Date().addingTimeInterval(Double(answerWindowMicroseconds) / 1e6)
        var fds = sockets.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
        while !fds.isEmpty {
            let left = Int32(max(0, deadline.timeIntervalSinceNow * 1000).rounded(.up))
            guard left > 0 else { break }
            // Not through POSIX.retryingEINTR: an interrupted wait goes round to wait only what is left of the window.
            let ready = poll(&fds, nfds_t(fds.count), left)
            if ready < 0 && POSIX.lastErrno == EINTR { continue }
            guard ready > 0 else { break }
            for (i, entry) in fds.enumerated() where entry.revents & Int16(POLLIN) != 0 {
                var buffer = [UInt8](repeating: 0, count: 1024)
                while true {
                    guard let n = try? POSIX.retryingEINTR("recv", nil, { recv(entry.fd, &buffer, buffer.count, Int32(MSG_DONTWAIT)) }),
                          n > 0 else { break }
                    guard let announcement = GigEVisionAnnouncement.parse(Array(buffer[0..<n])) else { continue }
                    let camera = GigEVisionCameraFound(announcement: announcement, interface: sockets[i].interface,
                                                       interfaceAddress: sockets[i].address)
                    if !found.contains(camera) { found.append(camera) }
                    if let id, announcement.answers(to: id) { return [camera] }
                }
                fds[i].revents = 0
            }
        }
        return id.map { id in found.filter { $0.announcement.answers(to: id) } } ?? found
    }

    /// A UDP socket bound to `address` (so a limited broadcast leaves by the interface holding it) and, where the
    /// kernel allows it, to `device` too; broadcasts allowed.
    private static func socket(bound address: String, device: String) throws -> Int32 {
        let fd: Int32
        do { fd = try POSIX.retryingEINTR("socket") { Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) } } catch {
            throw CameraSourceError("GigE Vision discovery could not open a socket: \(error.reason)")
        }
        var on: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &on, socklen_t(MemoryLayout<Int32>.size))
        // Best effort (unprivileged since Linux 5.7); the bound address already picks the interface.
        _ = device.withCString { setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, $0, socklen_t(strlen($0) + 1)) }
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        inet_pton(AF_INET, address, &local.sin_addr)
        do {
            try POSIX.retryingEINTR("bind") {
                withUnsafePointer(to: &local) { p in
                    p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
            }
        } catch {
            close(fd)
            throw CameraSourceError("GigE Vision discovery could not use \(device) (\(address)): \(error.reason)")
        }
        return fd
    }
}
