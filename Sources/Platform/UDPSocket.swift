// One IPv4 UDP socket (POSIX): `coord discover`'s query and each node's announcement. Every call that could wait
// takes a timeout.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

public struct UDPError: Error, CustomStringConvertible {
    public let description: String
}

public final class UDPSocket: Sendable {
    /// An address and port, the host in dotted form.
    public struct Peer: Hashable, Sendable {
        public var host: String
        public var port: UInt16
        public init(host: String, port: UInt16) { self.host = host; self.port = port }
    }

    private let fd: Int32

    /// A socket bound to 0.0.0.0:`port` (0: any free port). `shared` lets several processes on one host bind the
    /// same port (each gets every broadcast); `broadcast` allows sending to broadcast addresses.
    public init(port: UInt16, shared: Bool = false, broadcast: Bool = false) throws(UDPError) {
        do {
            fd = try POSIX.retryingEINTR("socket") { socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
        } catch {
            throw UDPError(description: "cannot open a UDP socket: \(error.reason).")
        }
        var on: Int32 = 1
        if shared { setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size)) }
        if broadcast { setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &on, socklen_t(MemoryLayout<Int32>.size)) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = INADDR_ANY
        do {
            try POSIX.retryingEINTR("bind") {
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
            }
        } catch {
            close(fd)
            throw UDPError(description: "cannot bind UDP port \(port): \(error.reason).")
        }
    }

    deinit { close(fd) }

    /// The port actually bound.
    public var port: UInt16 {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return UInt16(bigEndian: address.sin_port)
    }

    /// Sends one datagram; false if it could not be sent (no route, a bad address).
    @discardableResult
    public func send(_ bytes: [UInt8], to peer: Peer) -> Bool {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = peer.port.bigEndian
        guard inet_pton(AF_INET, peer.host, &address.sin_addr) == 1 else { return false }
        let sent = try? POSIX.retryingEINTR("sendto") {
            withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                    bytes.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), sa, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
            }
        }
        return sent == bytes.count
    }

    /// One datagram of at most `limit` bytes (longer ones are cut), or nil when none arrives within `timeoutMilliseconds`.
    public func receive(timeoutMilliseconds: Int32, limit: Int = 2048) -> (bytes: [UInt8], from: Peer, truncated: Bool)? {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        // An interrupted wait starts again with the whole timeout.
        guard (try? POSIX.retryingEINTR("poll") { poll(&poller, 1, timeoutMilliseconds) }) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: limit + 1)
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let received = try? POSIX.retryingEINTR("recvfrom") {
            buffer.withUnsafeMutableBytes { raw in
                withUnsafeMutablePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, raw.baseAddress, raw.count, Int32(MSG_DONTWAIT), $0, &length) }
                }
            }
        }
        guard let count = received else { return nil }
        var host = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        inet_ntop(AF_INET, &address.sin_addr, &host, socklen_t(INET_ADDRSTRLEN))
        let peer = Peer(host: String(cString: host), port: UInt16(bigEndian: address.sin_port))
        return (Array(buffer.prefix(min(count, limit))), peer, count > limit)
    }

    /// One IPv4 address of an interface that is up, as the kernel lists it (host byte order).
    public struct IPv4Interface: Equatable, Sendable {
        public var name: String
        public var address: UInt32
        public var netmask: UInt32
        /// The broadcast address the interface reports; glibc reports the interface's own address when none is set.
        public var broadcast: UInt32?
        public var canBroadcast: Bool
        public init(name: String, address: UInt32, netmask: UInt32, broadcast: UInt32?, canBroadcast: Bool) {
            self.name = name; self.address = address; self.netmask = netmask; self.broadcast = broadcast
            self.canBroadcast = canBroadcast
        }

        /// Where a query reaches every host of this interface's network: its broadcast address when one is set, else
        /// the network's from its netmask; never its own address (an interface without `brd` reports that), and none
        /// for loopback, a point-to-point link or a /31–/32 network, which have no broadcast.
        public var queryTarget: UInt32? {
            guard canBroadcast, netmask != 0xFFFF_FFFF, netmask != 0xFFFF_FFFE, address >> 24 != 127 else { return nil }
            if let broadcast, broadcast != address, broadcast != 0 { return broadcast }
            return (address & netmask) | ~netmask
        }

        public static func dotted(_ value: UInt32) -> String {
            "\(value >> 24).\((value >> 16) & 0xFF).\((value >> 8) & 0xFF).\(value & 0xFF)"
        }
    }

    /// Every IPv4 address of every interface that is up.
    public static func ipv4Interfaces() -> [IPv4Interface] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(list) }
        func ipv4(_ address: UnsafeMutablePointer<sockaddr>?) -> UInt32? {
            guard let address, address.pointee.sa_family == sa_family_t(AF_INET) else { return nil }
            return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt32(bigEndian: $0.pointee.sin_addr.s_addr) }
        }
        var found: [IPv4Interface] = []
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            let flags = entry.pointee.ifa_flags
            guard flags & UInt32(IFF_UP) != 0, let address = ipv4(entry.pointee.ifa_addr) else { continue }
            let canBroadcast = flags & UInt32(IFF_BROADCAST) != 0 && flags & UInt32(IFF_LOOPBACK) == 0
            found.append(IPv4Interface(name: String(cString: entry.pointee.ifa_name), address: address,
                                       netmask: ipv4(entry.pointee.ifa_netmask) ?? 0xFFFF_FFFF,
                                       broadcast: canBroadcast ? ipv4(entry.pointee.ifa_ifu.ifu_broadaddr) : nil,
                                       canBroadcast: canBroadcast))
        }
        return found
    }

    /// The broadcast address of every local IPv4 network that has one (see `IPv4Interface.queryTarget`).
    public static func broadcastAddresses() -> [String] {
        var found: [String] = []
        for interface in ipv4Interfaces() {
            guard let target = interface.queryTarget.map(IPv4Interface.dotted), !found.contains(target) else { continue }
            found.append(target)
        }
        return found
    }
}
