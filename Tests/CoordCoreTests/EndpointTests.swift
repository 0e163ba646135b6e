import Testing
@testable import CoordCore

@Suite struct EndpointTests {
    @Test func splitsAtTheLastColon() throws {
        let e = try #require(Endpoint("tcp://10.0.0.7:5710"))
        #expect(e.host == "10.0.0.7" && e.port == "5710" && e.portNumber == 5710)
        let v6 = try #require(Endpoint("tcp://[fe80::1]:6000"))
        #expect(v6.host == "[fe80::1]" && v6.portNumber == 6000)
        #expect(Endpoint("tcp://0.0.0.0:*")?.port == "*")
        #expect(Endpoint("tcp://0.0.0.0:*")?.portNumber == nil)
        #expect(Endpoint("tcp://h:0")?.portNumber == nil && Endpoint("tcp://h:65536")?.portNumber == nil)
        #expect(Endpoint("tcp://h:5710")?.description == "tcp://h:5710")
    }

    @Test(arguments: ["", "tcp://", "tcp://h", "udp://h:1", "h:1", "ipc:///tmp/x", "inproc://x"])
    func notATCPEndpoint(_ text: String) {
        #expect(Endpoint(text) == nil)
    }

    @Test func wildcardHostsAndLoopback() {
        for text in ["tcp://*:1", "tcp://0.0.0.0:1", "tcp://[::]:1", "tcp://:1"] { #expect(Endpoint(text)!.hasWildcardHost, "\(text)") }
        #expect(!Endpoint("tcp://10.0.0.1:1")!.hasWildcardHost)
        for text in ["tcp://127.0.0.1:1", "tcp://127.1.2.3:5", "tcp://LOCALHOST:1", "tcp://[::1]:1"] { #expect(Endpoint(text)!.isLoopback, "\(text)") }
        for text in ["tcp://10.0.0.1:1", "tcp://127.0.0.256:1", "tcp://127.0.0:1", "tcp://0.0.0.0:1", "tcp://localhost.evil:1"] {
            #expect(!Endpoint(text)!.isLoopback, "\(text)")
        }
    }

    @Test func anotherHostOrPort() {
        let e = Endpoint("tcp://0.0.0.0:6000")!
        #expect(e.with(host: "10.0.0.7").description == "tcp://10.0.0.7:6000")
        #expect(e.with(port: "*").description == "tcp://0.0.0.0:*")
    }

    @Test func problemsAreTheEndOfOneSentence() {
        #expect(Endpoint.problem("tcp://h:1") == nil)
        #expect(Endpoint.problem("http://h:1") == "must look like tcp://host:port")
        #expect(Endpoint.problem("tcp://h") == "must look like tcp://host:port: the port is missing")
        #expect(Endpoint.problem("tcp://*:1") == "must look like tcp://host:port: the host is missing")
        #expect(Endpoint.problem("tcp://[::1:1") == "must look like tcp://host:port: the host has an unclosed [")
        #expect(Endpoint.problem("tcp://a b:1") == "must look like tcp://host:port: the host holds a character a host name cannot")
        #expect(Endpoint.problem("tcp://h:+1") == "must look like tcp://host:port with a port between 1 and 65535")
        #expect(Endpoint.problem("tcp://h:65536") == "must look like tcp://host:port with a port between 1 and 65535")
    }
}
