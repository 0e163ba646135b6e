import CoordCore
import Testing

@Suite("Discovery announcements")
struct DiscoveryTests {
    let key = String(repeating: "a", count: 40)
    func check(name: String = "box-1", endpoint: String = "tcp://0.0.0.0:5710", cameras: [String] = ["cam0"],
               version: String = "0.1.0", publicKey: String = "") -> (node: DiscoveredNode?, problem: String?) {
        DiscoveredNode.checked(name: name, endpoint: endpoint, cameras: cameras, version: version, publicKey: publicKey,
                               from: "10.0.0.7", isKey: { $0.count == 40 })
    }

    @Test func aWildcardHostBecomesTheSendersAddress() {
        #expect(check().node?.endpoint == "tcp://10.0.0.7:5710")
        #expect(check(endpoint: "tcp://*:6000").node?.endpoint == "tcp://10.0.0.7:6000")
        #expect(check(endpoint: "tcp://10.1.1.1:5710").node?.endpoint == "tcp://10.1.1.1:5710")
        #expect(check(publicKey: key).node?.publicKey == key)
        #expect(check().node?.publicKey == nil)
    }

    @Test func whatANodeWouldNotSendIsSetAsideWithTheReason() {
        #expect(check(name: "bad name").problem?.contains("not allowed") == true)
        #expect(check(name: String(repeating: "x", count: 65)).node == nil)
        #expect(check(endpoint: "ipc:///tmp/x").problem?.contains("not tcp://HOST:PORT") == true)
        #expect(check(endpoint: "tcp://h:99999").node == nil)
        #expect(check(cameras: ["a/b"]).node == nil)
        #expect(check(cameras: (0..<65).map { "c\($0)" }).node == nil)
        #expect(check(version: "1 0").node == nil)
        #expect(check(publicKey: "short").problem?.contains("Z85") == true)
    }

    @Test func theRigFilePinsKeyedNodesAndNamesTheCoordinatorsPair() {
        let nodes = [DiscoveredNode(name: "a", endpoint: "tcp://10.0.0.7:5710", cameras: ["cam0"], version: "0.1.0", publicKey: key),
                     DiscoveredNode(name: "b", endpoint: "tcp://10.0.0.8:5710", cameras: [], version: "0.1.0", publicKey: nil)]
        let text = DiscoveredNode.rigFile(nodes, coordinatorCert: "keys/me.key_secret")
        #expect(text.contains("version: 1\nsecurity:\n  cert: \"keys/me.key_secret\""))
        #expect(text.contains("  - name: a\n    endpoint: \"tcp://10.0.0.7:5710\"\n    public_key: \"\(key)\"\n    cameras: [cam0]\n"))
        #expect(text.contains("  - name: b\n    endpoint: \"tcp://10.0.0.8:5710\"\n"))
        #expect(!DiscoveredNode.rigFile([nodes[1]], coordinatorCert: nil).contains("security"))
    }
}
