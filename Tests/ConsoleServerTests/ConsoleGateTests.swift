@testable import ConsoleServer
import Testing

/// ConsoleGate's decisions (CONTRACT §6b), one request head at a time.
@Suite("Console gate")
struct ConsoleGateTests {
    let token = "0123456789abcdef0123456789abcdef"
    var loopback: ConsoleGate { ConsoleGate(token: token, port: 8080, listenHost: "127.0.0.1", boundAddress: "127.0.0.1") }
    let noInterfaces: () -> [String] = { [] }

    func head(_ method: String = "GET", _ uri: String = "/api/rig", host: String? = "127.0.0.1:8080", auth: Bool = true,
              _ more: [(String, String)] = []) -> ConsoleGate.Head {
        var headers: [(name: String, value: String)] = []
        if let host { headers.append(("Host", host)) }
        if auth { headers.append(("Authorization", "Bearer \(token)")) }
        headers += more.map { (name: $0.0, value: $0.1) }
        return ConsoleGate.Head(method: method, uri: uri, headers: headers)
    }

    func status(_ verdict: ConsoleGate.Verdict) -> Int {
        switch verdict {
        case .allow: 200
        case .redirect: 303
        case .refuse(let status, _): status
        }
    }

    @Test func theTokenInAnyOfItsThreePlacesLetsARequestIn() {
        let gate = loopback
        #expect(gate.decide(head(), interfaceAddresses: noInterfaces) == .allow)
        #expect(status(gate.decide(head(auth: false, [("Cookie", "other=1; coord_console_8080=\(token)")]), interfaceAddresses: noInterfaces)) == 200)
        #expect(status(gate.decide(head("GET", "/api/rig?token=\(token)", auth: false), interfaceAddresses: noInterfaces)) == 200)
    }

    @Test func noTokenOrAWrongOneIs401() {
        let gate = loopback
        #expect(status(gate.decide(head(auth: false), interfaceAddresses: noInterfaces)) == 401)
        #expect(status(gate.decide(head("GET", "/?token=\(token.dropLast())x", auth: false), interfaceAddresses: noInterfaces)) == 401)
        #expect(status(gate.decide(head(auth: false, [("Authorization", "Bearer \(token)x")]), interfaceAddresses: noInterfaces)) == 401)
        // Another console's cookie (another port) is not this one's.
        #expect(status(gate.decide(head(auth: false, [("Cookie", "coord_console_8081=\(token)")]), interfaceAddresses: noInterfaces)) == 401)
        #expect(!ConsoleGate.sameToken("", token))
        #expect(!ConsoleGate.sameToken(token + "0", token))
        #expect(ConsoleGate.sameToken(token, token))
    }

    @Test func theFirstVisitSetsAStrictHttpOnlyCookieAndLeavesTheTokenOutOfTheAddressBar() {
        let verdict = loopback.decide(head("GET", "/?token=\(token)", auth: false), interfaceAddresses: noInterfaces)
        guard case .redirect(let location, let cookie) = verdict else { Issue.record("not a redirect: \(verdict)"); return }
        #expect(location == "/")
        #expect(cookie.hasPrefix("coord_console_8080=\(token);"))
        #expect(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict") && !cookie.contains("Secure"))
        var tls = loopback
        tls.scheme = "https"
        guard case .redirect(_, let secure) = tls.decide(head("GET", "/?token=\(token)", host: "127.0.0.1:8080", auth: false), interfaceAddresses: noInterfaces) else {
            Issue.record("not a redirect"); return
        }
        #expect(secure.contains("Secure"))
    }

    @Test func aForeignHostIsRefusedBeforeTheToken() {
        let gate = loopback
        for host in ["evil.example:8080", "evil.example", "127.0.0.1:8081", "127.0.0.1", "10.0.0.1:8080", "127.0.0.1:8080:1", "", "[::1]:8080"] {
            let verdict = gate.decide(head(host: host), interfaceAddresses: noInterfaces)
            #expect(status(verdict) == 403, "Host \(host)")
            if case .refuse(_, let sentence) = verdict { #expect(sentence.contains("Host")) }
        }
        #expect(status(gate.decide(head(host: nil), interfaceAddresses: noInterfaces)) == 403)
        #expect(status(gate.decide(head(host: nil, [("Host", "127.0.0.1:8080"), ("Host", "evil.example:8080")]), interfaceAddresses: noInterfaces)) == 403)
        // Refused even without a token: the Host is checked first.
        #expect(status(gate.decide(head(host: "evil.example:8080", auth: false), interfaceAddresses: noInterfaces)) == 403)
    }

    @Test func localhostAndItsOwnAddressesAreItsHosts() {
        let gate = loopback
        for host in ["127.0.0.1:8080", "localhost:8080", "LOCALHOST:8080", "localhost.:8080"] {
            #expect(gate.decide(head(host: host), interfaceAddresses: noInterfaces) == .allow, "Host \(host)")
        }
        let v6 = ConsoleGate(token: token, port: 8080, listenHost: "::1", boundAddress: "::1")
        #expect(v6.decide(head(host: "[::1]:8080"), interfaceAddresses: noInterfaces) == .allow)
        #expect(v6.decide(head(host: "[0:0::1]:8080"), interfaceAddresses: noInterfaces) == .allow)
        #expect(status(v6.decide(head(host: "::1:8080"), interfaceAddresses: noInterfaces)) == 403)
        // A LAN address: localhost does not reach it, so it is not its name.
        let lan = ConsoleGate(token: token, port: 8080, listenHost: "192.168.1.20", boundAddress: "192.168.1.20")
        #expect(lan.decide(head(host: "192.168.1.20:8080"), interfaceAddresses: noInterfaces) == .allow)
        #expect(status(lan.decide(head(host: "localhost:8080"), interfaceAddresses: noInterfaces)) == 403)
        // Port 80 is the default for http.
        let eighty = ConsoleGate(token: token, port: 80, listenHost: "127.0.0.1")
        #expect(eighty.decide(head(host: "127.0.0.1"), interfaceAddresses: noInterfaces) == .allow)
    }

    @Test func onAWildcardEveryInterfaceAddressIsAHostAndNothingElse() {
        let gate = ConsoleGate(token: token, port: 8080, listenHost: "0.0.0.0", boundAddress: "0.0.0.0")
        let interfaces = { ["127.0.0.1", "192.168.1.20", "::1"] }
        #expect(gate.decide(head(host: "192.168.1.20:8080"), interfaceAddresses: interfaces) == .allow)
        #expect(gate.decide(head(host: "127.0.0.1:8080"), interfaceAddresses: interfaces) == .allow)
        #expect(gate.decide(head(host: "localhost:8080"), interfaceAddresses: interfaces) == .allow)
        #expect(status(gate.decide(head(host: "0.0.0.0:8080"), interfaceAddresses: interfaces)) == 403)
        #expect(status(gate.decide(head(host: "192.168.1.21:8080"), interfaceAddresses: interfaces)) == 403)
        #expect(status(gate.decide(head(host: "rebound.example:8080"), interfaceAddresses: interfaces)) == 403)
        // An IPv4 socket is not reached through an IPv6 address.
        #expect(status(gate.decide(head(host: "[::1]:8080"), interfaceAddresses: interfaces)) == 403)
    }

    @Test func aNameGivenWithAllowHostIsAHost() {
        let gate = ConsoleGate(token: token, port: 8080, listenHost: "0.0.0.0", allowedNames: ["Coord-Laptop.local"])
        #expect(gate.decide(head(host: "coord-laptop.local:8080"), interfaceAddresses: noInterfaces) == .allow)
        #expect(status(gate.decide(head(host: "coord-laptop.local:9090"), interfaceAddresses: noInterfaces)) == 403)
        let named = ConsoleGate(token: token, port: 8080, listenHost: "studio-pc", boundAddress: "10.1.2.3")
        #expect(named.decide(head(host: "studio-pc:8080"), interfaceAddresses: noInterfaces) == .allow)
        #expect(named.decide(head(host: "10.1.2.3:8080"), interfaceAddresses: noInterfaces) == .allow)
    }

    @Test func aStateChangeFromAnotherOriginIsRefused() {
        let gate = loopback
        let json = ("Content-Type", "application/json")
        #expect(gate.decide(head("POST", "/api/takes", [json, ("Origin", "http://127.0.0.1:8080")]), interfaceAddresses: noInterfaces) == .allow)
        // No Origin: not a browser's cross-site request (curl, scripts).
        #expect(gate.decide(head("POST", "/api/takes", [json]), interfaceAddresses: noInterfaces) == .allow)
        for origin in ["http://evil.example", "http://127.0.0.1:8081", "https://127.0.0.1:8080", "null", "http://localhost:8080", "http://127.0.0.1:8080/x"] {
            for method in ["POST", "PUT", "DELETE"] {
                let verdict = gate.decide(head(method, "/api/takes", [json, ("Origin", origin)]), interfaceAddresses: noInterfaces)
                #expect(status(verdict) == 403, "\(method) from \(origin)")
            }
        }
        // A GET is not a state change: its Origin does not matter.
        #expect(gate.decide(head("GET", "/api/rig", [("Origin", "http://evil.example")]), interfaceAddresses: noInterfaces) == .allow)
        // The page on localhost sends its own origin.
        #expect(gate.decide(head("POST", "/api/takes/stop", host: "localhost:8080", [json, ("Origin", "http://localhost:8080")]), interfaceAddresses: noInterfaces) == .allow)
    }

    @Test func aWebSocketOnlyForTheConsolesOwnOrigin() {
        let gate = loopback
        let upgrade = [("Upgrade", "websocket"), ("Connection", "Upgrade")]
        #expect(gate.decide(head("GET", "/ws", upgrade + [("Origin", "http://127.0.0.1:8080")]), interfaceAddresses: noInterfaces) == .allow)
        #expect(status(gate.decide(head("GET", "/ws", upgrade + [("Origin", "http://evil.example")]), interfaceAddresses: noInterfaces)) == 403)
        #expect(status(gate.decide(head("GET", "/ws", upgrade), interfaceAddresses: noInterfaces)) == 403)
        #expect(status(gate.decide(head("GET", "/ws", [("Upgrade", "WebSocket"), ("Origin", "null")]), interfaceAddresses: noInterfaces)) == 403)
        #expect(status(gate.decide(head("GET", "/ws", auth: false, upgrade + [("Origin", "http://127.0.0.1:8080")]), interfaceAddresses: noInterfaces)) == 401)
    }

    @Test func aPostOrPutThatIsNotJSONIs415() {
        let gate = loopback
        for type in [nil, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx", "text/plain; application/json"] {
            let headers = type.map { [("Content-Type", $0)] } ?? []
            for (method, path) in [("POST", "/api/takes"), ("POST", "/api/takes/stop"), ("PUT", "/api/controls")] {
                let verdict = gate.decide(head(method, path, headers), interfaceAddresses: noInterfaces)
                #expect(status(verdict) == 415, "\(method) \(path) as \(type ?? "none")")
                if case .refuse(_, let sentence) = verdict { #expect(sentence.contains("application/json")) }
            }
        }
        for type in ["application/json", "Application/JSON; charset=utf-8"] {
            #expect(gate.decide(head("POST", "/api/takes", [("Content-Type", type)]), interfaceAddresses: noInterfaces) == .allow)
        }
    }

    @Test func aTokenFileHoldsOneURLSafeToken() {
        #expect(ConsoleGate.tokenProblem(ConsoleGate.newToken()) == nil)
        #expect(ConsoleGate.newToken() != ConsoleGate.newToken())
        #expect(ConsoleGate.tokenProblem("short") != nil)
        #expect(ConsoleGate.tokenProblem("0123456789abcdef 0123456789abcdef") != nil)
        #expect(ConsoleGate.tokenProblem("0123456789abcdef&x=1") != nil)
    }
}
