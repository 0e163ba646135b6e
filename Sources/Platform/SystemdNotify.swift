// systemd's service notification protocol (sd_notify(3)) without libsystemd: datagrams of `KEY=value` lines to the
// unix socket named by $NOTIFY_SOCKET (a leading '@' is Linux's abstract namespace). Outside systemd there is no
// socket and every call does nothing.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

public final class SystemdNotifier: Sendable {
    /// The socket path from the environment, nil when not run by systemd with Type=notify.
    public let socketPath: String?
    /// Half of $WATCHDOG_USEC (µs) when systemd watches this process (and $WATCHDOG_PID, if set, is this
    /// process); nil otherwise.
    public let watchdogInterval: Int64?

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        let path = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        socketPath = path
        if let usec = environment["WATCHDOG_USEC"].flatMap(Int64.init), usec > 0,
           environment["WATCHDOG_PID"].flatMap(Int32.init).map({ $0 == getpid() }) ?? true {
            watchdogInterval = usec / 2
        } else {
            watchdogInterval = nil
        }
    }

    /// Sends one notification (lines joined with newlines); returns false if it could not be sent.
    @discardableResult
    public func notify(_ lines: String...) -> Bool {
        guard let socketPath else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var pathBytes = Array(socketPath.utf8)
        if pathBytes.first == UInt8(ascii: "@") { pathBytes[0] = 0 }  // abstract namespace
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard pathBytes.count < capacity else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: pathBytes)
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + pathBytes.count + (pathBytes.first == 0 ? 0 : 1))
        let message = Array(lines.joined(separator: "\n").utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                message.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), sa, length) }
            }
        }
        return sent == message.count
    }
}
