import Foundation
import NIOCore

/// Who may use the console (CONTRACT §6b), decided from a request's head alone, before any route sees it: the Host
/// must be an address the console listens on (no DNS rebinding), a state change or a WebSocket must come from the
/// console's own origin (no other web page drives it), every request must carry the token, and a POST/PUT must be
/// JSON (no "simple" cross-site form or text/plain request). Pure: the shell passes the head and the machine's
/// interface addresses, and carries out the verdict.
public struct ConsoleGate: Sendable {
    public enum Verdict: Equatable, Sendable {
        case allow
        /// 303 to `location`, setting the session cookie (the first visit with `?token=`).
        case redirect(location: String, setCookie: String)
        case refuse(status: Int, sentence: String)
    }

    /// A request's head as the gate reads it; header names in any case.
    public struct Head: Sendable {
        public var method: String
        public var uri: String
        public var headers: [(name: String, value: String)]
        public init(method: String, uri: String, headers: [(name: String, value: String)]) {
            self.method = method.uppercased(); self.uri = uri; self.headers = headers
        }
        func values(_ name: String) -> [String] {
            headers.filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.map(\.value)
        }
    }

    public var token: String
    /// "http", or "https" with --tls-cert.
    public var scheme: String
    /// The port the console listens on (the one bound, when 0 was asked for).
    public var port: Int
    /// The host given to --listen: an IP address, a wildcard (0.0.0.0, ::) or a name.
    public var listenHost: String
    /// The address the socket is bound to (normalized), when known.
    public var boundAddress: String?
    /// Names the operator allows besides the listening address (--allow-host).
    public var allowedNames: [String]

    public init(token: String, scheme: String = "http", port: Int, listenHost: String, boundAddress: String? = nil, allowedNames: [String] = []) {
        self.token = token; self.scheme = scheme; self.port = port; self.listenHost = listenHost
        self.boundAddress = boundAddress.flatMap { Self.ipLiteral($0) }
        self.allowedNames = allowedNames.map { Self.canonicalName($0) }
    }

    /// The session cookie's name: one per port, so two consoles on one machine keep their own.
    public var cookieName: String { "coord_console_\(port)" }

    var listensOnWildcard: Bool { ["0.0.0.0", "::", "*", ""].contains(Self.canonicalName(listenHost)) }
    var listensOnLoopback: Bool {
        guard let ip = boundAddress ?? Self.ipLiteral(listenHost) else { return listenHost.lowercased() == "localhost" }
        return ip.hasPrefix("127.") || ip == "::1"
    }

    /// The verdict on one request; `interfaceAddresses` (this machine's addresses, normalized) is asked only for a
    /// console on a wildcard address whose Host is an IP literal.
    public func decide(_ head: Head, interfaceAddresses: () -> [String]) -> Verdict {
        // 1. Host: an address this console listens on, or a name the operator allowed.
        let hosts = head.values("Host")
        guard hosts.count == 1, let host = Self.authority(hosts[0], scheme: scheme) else {
            return .refuse(status: 403, sentence: hosts.isEmpty
                ? "the request has no Host header: the console answers only requests addressed to it."
                : "the Host header \(Self.quote(hosts.joined(separator: ", "))) is not one address: the console answers only requests addressed to it.")
        }
        guard hostIsOurs(host, interfaceAddresses: interfaceAddresses) else {
            return .refuse(status: 403, sentence: "the Host header \(Self.quote(hosts[0])) is not an address this console listens on (port \(port)); name it with --allow-host if it is this machine.")
        }
        let own = "\(scheme)://\(host.text)"
        // 2. Origin: a state change with a foreign Origin, or a WebSocket without the console's own, is another page's.
        let origins = head.values("Origin")
        let upgrade = head.values("Upgrade").contains { $0.lowercased().contains("websocket") }
        if upgrade || ["POST", "PUT", "DELETE", "PATCH"].contains(head.method) {
            let origin = origins.first.flatMap { Self.origin($0) }
            let present = !origins.isEmpty
            if (upgrade || present) && (origins.count != 1 || origin != host.key(scheme: scheme)) {
                let shown = present ? Self.quote(origins.joined(separator: ", ")) : "none"
                return .refuse(status: 403, sentence: upgrade
                    ? "a WebSocket from origin \(shown) is refused: only the console's own page (\(own)) may open one."
                    : "\(head.method) from origin \(shown) is refused: only the console's own page (\(own)) may change the rig.")
            }
        }
        // 3. The token: in the URL, as a bearer token or in the session cookie.
        let (path, query) = Self.split(head.uri)
        let queryToken = Self.queryValue("token", in: query)
        let bearer = head.values("Authorization").compactMap { value -> String? in
            let parts = value.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
            return parts.count == 2 && parts[0].lowercased() == "bearer" ? parts[1].trimmingCharacters(in: .whitespaces) : nil
        }
        let cookies = head.values("Cookie").flatMap { $0.split(separator: ";") }.compactMap { pair -> String? in
            let kv = pair.split(separator: "=", maxSplits: 1)
            guard kv.count == 2, kv[0].trimmingCharacters(in: .whitespaces) == cookieName else { return nil }
            return kv[1].trimmingCharacters(in: .whitespaces)
        }
        let queryMatches = queryToken.map { Self.sameToken($0, token) } ?? false
        guard queryMatches || (bearer + cookies).contains(where: { Self.sameToken($0, token) }) else {
            return .refuse(status: 401, sentence: "this console needs its token: open the CONSOLE address it printed (\(own)/?token=…) or send Authorization: Bearer TOKEN.")
        }
        // 4. State changes are JSON only: a form or text/plain body is what a foreign page can send without asking.
        if ["POST", "PUT", "PATCH"].contains(head.method) {
            let types = head.values("Content-Type")
            let media = types.first.map { $0.split(separator: ";").first.map(String.init) ?? "" }?
                .trimmingCharacters(in: .whitespaces).lowercased()
            guard types.count == 1, media == "application/json" else {
                return .refuse(status: 415, sentence: "\(head.method) \(Self.quote(path)) takes only Content-Type: application/json (got \(types.isEmpty ? "none" : Self.quote(types.joined(separator: ", ")))).")
            }
        }
        // The first visit with the token: keep it in a cookie the page's own requests carry, and take it out of the
        // address bar.
        if queryMatches, path == "/", head.method == "GET" || head.method == "HEAD" {
            return .redirect(location: "/", setCookie: "\(cookieName)=\(token); Path=/; HttpOnly; SameSite=Strict\(scheme == "https" ? "; Secure" : "")")
        }
        return .allow
    }

    /// A Host header or an origin's authority, taken apart: the host (lower case, an IPv6 address without its
    /// brackets) and the port (the scheme's default when absent).
    struct Authority: Equatable {
        var host: String
        var port: Int
        /// As written back in a URL.
        var text: String
        func key(scheme: String) -> String { "\(scheme)|\(host)|\(port)" }
    }

    static func authority(_ raw: String, scheme: String) -> Authority? {
        let value = raw.trimmingCharacters(in: .whitespaces)
        guard !value.isEmpty, !value.contains(where: { $0 == "/" || $0 == "@" || $0 == " " }) else { return nil }
        var host: Substring, portText: Substring?
        if value.hasPrefix("[") {
            guard let close = value.firstIndex(of: "]") else { return nil }
            host = value[value.index(after: value.startIndex)..<close]
            let rest = value[value.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { return nil }
                portText = rest.dropFirst()
            }
            guard ipLiteral(String(host))?.contains(":") == true else { return nil }
        } else {
            let parts = value.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count <= 2 else { return nil }
            host = parts[0]
            portText = parts.count == 2 ? parts[1] : nil
        }
        let port: Int
        if let portText {
            guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy(\.isASCII), let p = Int(portText), (1...65535).contains(p) else { return nil }
            port = p
        } else {
            port = scheme == "https" ? 443 : 80
        }
        let name = canonicalName(String(host))
        guard !name.isEmpty else { return nil }
        let normalized = ipLiteral(name) ?? name
        let shown = normalized.contains(":") ? "[\(normalized)]" : normalized
        return Authority(host: normalized, port: port, text: "\(shown):\(port)")
    }

    /// An Origin header's scheme and authority as a comparable key; nil for "null" or anything with a path.
    static func origin(_ raw: String) -> String? {
        let value = raw.trimmingCharacters(in: .whitespaces)
        guard let range = value.range(of: "://") else { return nil }
        let scheme = value[..<range.lowerBound].lowercased()
        guard scheme == "http" || scheme == "https",
              let authority = authority(String(value[range.upperBound...]), scheme: scheme) else { return nil }
        return authority.key(scheme: scheme)
    }

    func hostIsOurs(_ host: Authority, interfaceAddresses: () -> [String]) -> Bool {
        guard host.port == port else { return false }
        if allowedNames.contains(host.host) { return true }
        let listen = Self.ipLiteral(listenHost) ?? Self.canonicalName(listenHost)
        if host.host == listen || host.host == boundAddress, !listensOnWildcard { return true }
        // localhost cannot be rebound by a stranger's DNS: it names this machine whenever the console is on loopback.
        if host.host == "localhost" { return listensOnLoopback || listensOnWildcard }
        guard Self.ipLiteral(host.host) != nil else { return false }
        if listensOnWildcard {
            let v6 = listenHost == "::"
            return interfaceAddresses().contains { $0 == host.host && (v6 || !$0.contains(":")) }
        }
        return false
    }

    /// An IP address in its one normal text form; nil when `text` is not an IP literal.
    static func ipLiteral(_ text: String) -> String? {
        guard !text.isEmpty, text.allSatisfy({ $0.isHexDigit || $0 == "." || $0 == ":" }),
              let address = try? SocketAddress(ipAddress: text, port: 0) else { return nil }
        return address.ipAddress
    }

    static func canonicalName(_ name: String) -> String {
        var n = name.lowercased()
        if n.hasPrefix("["), n.hasSuffix("]") { n = String(n.dropFirst().dropLast()) }
        while n.hasSuffix(".") { n.removeLast() }
        return ipLiteral(n) ?? n
    }

    static func split(_ uri: String) -> (path: String, query: Substring) {
        guard let mark = uri.firstIndex(of: "?") else { return (uri, "") }
        return (String(uri[..<mark]), uri[uri.index(after: mark)...])
    }

    static func queryValue(_ name: String, in query: Substring) -> String? {
        for pair in query.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if kv[0] == name[...] {
                let raw = kv.count == 2 ? String(kv[1]) : ""
                return raw.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? raw
            }
        }
        return nil
    }

    /// Equal tokens, in time that depends only on the expected token's length (no byte-by-byte timing oracle).
    static func sameToken(_ given: String, _ expected: String) -> Bool {
        let a = Array(given.utf8), b = Array(expected.utf8)
        var difference = UInt8(a.count == b.count ? 0 : 1)
        for i in 0..<b.count {
            difference |= (i < a.count ? a[i] : 0) ^ b[i]
        }
        return difference == 0
    }

    /// A header value as a sentence shows it: quoted, short.
    static func quote(_ text: String) -> String {
        let printable = String(text.unicodeScalars.map { $0.value >= 0x20 && $0.value < 0x7F ? Character($0) : "?" })
        return "\"" + (printable.count > 80 ? String(printable.prefix(80)) + "…" : printable) + "\""
    }

    /// A new random token: 128 bits, hex.
    public static func newToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }

    /// A token read from a file is one line of URL-safe characters, 16 to 256 of them; the problem otherwise.
    public static func tokenProblem(_ token: String) -> String? {
        guard (16...256).contains(token.count) else { return "it must hold one token of 16 to 256 characters" }
        guard token.unicodeScalars.allSatisfy({ $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "-._~".unicodeScalars.contains($0)) }) else {
            return "the token may hold only letters, digits and - . _ ~"
        }
        return nil
    }
}
