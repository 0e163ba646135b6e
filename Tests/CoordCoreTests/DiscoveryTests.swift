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

    @Test func theTakeSectionIsWhatEveryCameraOffers() {
        typealias F = CameraOffer.Format
        let usb = CameraOffer(formats: [F(width: 1920, height: 1080, minFramePeriodMicroseconds: 200_000),
                                        F(width: 1280, height: 720, minFramePeriodMicroseconds: 33_333),
                                        F(width: 640, height: 480, minFramePeriodMicroseconds: 16_666)], codecs: [.mjpeg, .ffv1, .h264])
        let pi = CameraOffer(formats: [F(width: 1280, height: 720, minFramePeriodMicroseconds: 40_000),
                                       F(width: 640, height: 480, minFramePeriodMicroseconds: 33_333)], codecs: [.h264, .ffv1])
        // 1920x1080 is not offered by both; at 1280x720 the slower camera reaches 25 fps; only the pi lacks mjpeg.
        #expect(DiscoveredNode.commonTake([usb, pi]) == TakeOffer(size: "1280x720", fps: 25, codec: .h264))
        #expect(DiscoveredNode.commonTake([usb]) == TakeOffer(size: "1920x1080", fps: 5, codec: .mjpeg))
        #expect(DiscoveredNode.commonTake([usb, CameraOffer(formats: [F(width: 320, height: 240, minFramePeriodMicroseconds: 1)], codecs: [.mjpeg])]) == nil)
        #expect(DiscoveredNode.commonTake([]) == nil)
        let nodes = [DiscoveredNode(name: "a", endpoint: "tcp://10.0.0.7:5710", cameras: ["cam0"], version: "0.1.0", publicKey: nil)]
        let asked = DiscoveredNode.rigFile(nodes, coordinatorCert: nil, take: TakeOffer(size: "1280x720", fps: 25, codec: .h264))
        #expect(asked.contains("\ntake:"), "\(asked)")
        #expect(asked.contains("\n  size: 1280x720 ") && asked.contains("\n  fps: 25 ") && asked.contains("\n  codec: h264 "))
        #expect(asked.contains("# seconds:"))
        let unasked = DiscoveredNode.rigFile(nodes, coordinatorCert: nil, notAsked: "node a did not answer the handshake")
        #expect(unasked.contains("not asked what their cameras offer (node a did not answer the handshake)"))
        #expect(unasked.contains("\n  size: 640x480 "))
    }

    @Test func aNameAnsweredUnderTwoKeysIsOneSentenceNamingBoth() {
        let other = String(repeating: "b", count: 40)
        let nodes = [DiscoveredNode(name: "box-1", endpoint: "tcp://10.0.0.7:5710", cameras: [], version: "1", publicKey: key),
                     DiscoveredNode(name: "box-1", endpoint: "tcp://10.0.0.9:5710", cameras: [], version: "1", publicKey: other),
                     DiscoveredNode(name: "box-2", endpoint: "tcp://10.0.0.8:5710", cameras: [], version: "1", publicKey: key)]
        let sentences = DiscoveredNode.keyConflicts(nodes)
        #expect(sentences == ["node box-1 answered with 2 different keys, aaaaaaaa… (tcp://10.0.0.7:5710) and bbbbbbbb… (tcp://10.0.0.9:5710): one of them is not the node's own."])
        // One name at two endpoints under one key is not a key conflict.
        #expect(DiscoveredNode.keyConflicts([nodes[0], DiscoveredNode(name: "box-1", endpoint: "tcp://10.0.0.9:5710", cameras: [], version: "1", publicKey: key)]).isEmpty)
        // A keyless answer beside a keyed one is a conflict too (an impostor without keys).
        #expect(DiscoveredNode.keyConflicts([nodes[0], DiscoveredNode(name: "box-1", endpoint: "tcp://10.0.0.7:5710", cameras: [], version: "1", publicKey: nil)]).count == 1)
    }

    @Test func oneFloodingSenderSpendsOnlyItsOwnBudget() {
        var budget = DiscoveryBudget(now: 0)
        var flooderAnswered = 0, otherAnswered = 0
        // 200 queries a second from one sender for 10 s; another sender asks 3 times in each second.
        for tick in 0..<2000 {
            let now = Int64(tick) * 5_000
            if budget.admit(sender: "10.0.0.66", now: now) == .answer { flooderAnswered += 1 }
            if tick % 200 < 3, budget.admit(sender: "10.0.0.7", now: now) == .answer { otherAnswered += 1 }
        }
        #expect(otherAnswered == 30)
        // Its burst, then its rate.
        #expect(flooderAnswered <= 6 + 3 * 10 + 1, "\(flooderAnswered)")
        #expect(flooderAnswered >= 30)
    }

    @Test func forgedSourcesMeetTheNodesBudgetAndCannotGrowTheTable() {
        var limits = DiscoveryBudget.Limits()
        limits.senders = 64
        var budget = DiscoveryBudget(limits: limits, now: 0)
        var answered = 0, largestTable = 0
        // 20 000 queries in one second, each from a new address.
        for i in 0..<20_000 {
            if budget.admit(sender: "10.\(i >> 16).\((i >> 8) & 255).\(i & 255)", now: Int64(i) * 50) == .answer { answered += 1 }
            largestTable = max(largestTable, budget.sendersRemembered)
        }
        #expect(largestTable == 64)
        #expect(answered <= Int(limits.totalBurst + limits.totalPerSecond) + 1, "\(answered)")
    }

    @Test func anAnswerIsAtMostFourKiBOrFourTimesItsQuery() {
        #expect(DiscoveryAnswerSize.allows(answer: 4096, query: 20))
        #expect(!DiscoveryAnswerSize.allows(answer: 4097, query: 20))
        #expect(DiscoveryAnswerSize.allows(answer: 8192, query: 2048))
        #expect(!DiscoveryAnswerSize.allows(answer: 8193, query: 2048))
        let query: [UInt8] = [0x08, 0x01, 0x12, 0x12, 0x0A, 0x10] + [UInt8](repeating: 7, count: 16)
        let padded = DiscoveryAnswerSize.paddedQuery(query)
        #expect(padded.count == DiscoveryAnswerSize.paddedQuerySize)
        #expect(Array(padded.prefix(query.count)) == query)
        // Field 15, length-delimited, with a varint length that covers the rest exactly.
        let length = Int(padded[query.count + 1] & 0x7F) | Int(padded[query.count + 2]) << 7
        #expect(padded[query.count] == 0x7A && query.count + 3 + length == padded.count)
    }
}
