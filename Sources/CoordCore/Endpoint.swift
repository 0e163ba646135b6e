/// A ZeroMQ TCP endpoint, `tcp://host:port`, split once at its last colon: the host as written (an IPv6 address
/// keeps its brackets, a wildcard is `*` or `0.0.0.0`) and the port as written (a number, or `*` when binding to
/// any free port). Every place that reads an endpoint's parts asks this value.
public struct Endpoint: Equatable, Hashable, Sendable, CustomStringConvertible {
    public static let scheme = "tcp://"

    public var host: String
    public var port: String

    /// Nil when `text` is not `tcp://…:…` (another transport, or no colon after the host).
    public init?(_ text: String) {
        guard text.hasPrefix(Self.scheme) else { return nil }
        let rest = text.dropFirst(Self.scheme.count)
        guard let colon = rest.lastIndex(of: ":") else { return nil }
        host = String(rest[..<colon])
        port = String(rest[rest.index(after: colon)...])
    }

    public init(host: String, port: String) {
        self.host = host
        self.port = port
    }

    public var description: String { "\(Self.scheme)\(host):\(port)" }

    /// The port as a number a peer can connect to (1-65535); nil for `*`, 0 or anything else.
    public var portNumber: Int? {
        guard let number = Int(port), (1...65535).contains(number) else { return nil }
        return number
    }

    /// A host that means "every interface" when binding: it names no machine to connect to.
    public var hasWildcardHost: Bool { ["", "*", "0.0.0.0", "[::]", "::"].contains(host) }

    /// Whether only this machine can reach it: localhost, [::1] or an address in 127.0.0.0/8.
    public var isLoopback: Bool {
        let host = host.lowercased()
        if host == "localhost" || host == "[::1]" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// The same endpoint on another host (a wildcard made reachable) or port (`*`: any free one).
    public func with(host: String? = nil, port: String? = nil) -> Endpoint {
        Endpoint(host: host ?? self.host, port: port ?? self.port)
    }

    /// Why `text` is not an endpoint a coordinator can connect to (`tcp://host:port`, a named host, a port between 1
    /// and 65535), as the end of a sentence; nil if it is one.
    public static func problem(_ text: String) -> String? {
        let shape = "must look like tcp://host:port"
        guard text.hasPrefix(scheme) else { return shape }
        guard let endpoint = Endpoint(text) else { return "\(shape): the port is missing" }
        let host = endpoint.host, port = endpoint.port
        guard !host.isEmpty, host != "*" else { return "\(shape): the host is missing" }
        if host.hasPrefix("[") != host.hasSuffix("]") { return "\(shape): the host has an unclosed [" }
        guard host.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0 != "/" && $0 != "*" && $0 != "?" && $0 != "#" && $0 != "@" }) else {
            return "\(shape): the host holds a character a host name cannot"
        }
        guard !port.isEmpty, port.allSatisfy({ $0.isASCII && $0.isNumber }), endpoint.portNumber != nil else {
            return "\(shape) with a port between 1 and 65535"
        }
        return nil
    }
}
