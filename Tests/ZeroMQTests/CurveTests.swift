// CURVE and ZAP against real sockets on loopback TCP: who gets an answer, and the certificate files.
import Foundation
import Synchronization
import Testing
import ZeroMQ

@Suite struct CurveTests {
    /// A ROUTER with CURVE guarded by a ZAP handler that admits `admitted`, echoing what it receives; returns
    /// its endpoint, and whether `client` got its echo within 1 s.
    func exchange(admitted: String, client curve: ZMQSocket.Curve?, server pair: CurveKeyPair) throws -> (answered: Bool, asked: [String]) {
        let context = ZMQContext()
        let asked = Mutex<[String]>([])
        let zap = try ZAPHandler(context: context) { request in
            asked.withLock { $0.append("\(request.mechanism) \(request.publicKey ?? "-")") }
            return request.publicKey == admitted
        }
        defer { zap.stop() }
        var serverOptions = ZMQSocket.Options()
        serverOptions.curve = .server(secretKey: pair.secretKey)
        serverOptions.lingerMs = 0
        let server = try context.makeSocket(.router, options: serverOptions)
        defer { server.close() }
        let endpoint = try server.bind("tcp://127.0.0.1:*")
        var clientOptions = ZMQSocket.Options()
        clientOptions.curve = curve
        clientOptions.lingerMs = 0
        clientOptions.sendTimeoutMs = 1000
        clientOptions.receiveTimeoutMs = 1000
        let client = try context.makeSocket(.dealer, options: clientOptions)
        defer { client.close() }
        try client.connect(endpoint)
        guard try client.send([Array("ping".utf8)]) else { return (false, asked.withLock { $0 }) }
        if try server.poll(timeoutMs: 1000).socket, let frames = try server.receive() {
            try server.send(frames)
        }
        let answered = (try client.receive()) == [Array("ping".utf8)]
        return (answered, asked.withLock { $0 })
    }

    @Test func onlyTheAdmittedKeyIsAnswered() throws {
        let server = try CurveKeyPair.generate(), friend = try CurveKeyPair.generate(), stranger = try CurveKeyPair.generate()
        let ok = try exchange(admitted: friend.publicKey, client: .client(serverKey: server.publicKey, publicKey: friend.publicKey,
                                                                           secretKey: friend.secretKey), server: server)
        #expect(ok.answered)
        #expect(ok.asked == ["CURVE \(friend.publicKey)"])
        let unlisted = try exchange(admitted: friend.publicKey, client: .client(serverKey: server.publicKey, publicKey: stranger.publicKey,
                                                                                 secretKey: stranger.secretKey), server: server)
        #expect(!unlisted.answered)
        #expect(unlisted.asked == ["CURVE \(stranger.publicKey)"])
        // No CURVE at all, or the wrong server key: the handshake fails before ZAP is even asked.
        let plain = try exchange(admitted: friend.publicKey, client: nil, server: server)
        #expect(!plain.answered && plain.asked.isEmpty)
        let forged = try exchange(admitted: friend.publicKey, client: .client(serverKey: stranger.publicKey, publicKey: friend.publicKey,
                                                                               secretKey: friend.secretKey), server: server)
        #expect(!forged.answered && forged.asked.isEmpty)
    }

    @Test("every message names the key its connection was admitted under (User-Id), so a revoked key can be refused per message")
    func eachMessageCarriesItsClientsKey() throws {
        let server = try CurveKeyPair.generate(), friend = try CurveKeyPair.generate()
        let context = ZMQContext()
        let zap = try ZAPHandler(context: context) { $0.publicKey == friend.publicKey }
        defer { zap.stop() }
        var serverOptions = ZMQSocket.Options()
        serverOptions.curve = .server(secretKey: server.secretKey)
        serverOptions.lingerMs = 0
        let router = try context.makeSocket(.router, options: serverOptions)
        defer { router.close() }
        let endpoint = try router.bind("tcp://127.0.0.1:*")
        var clientOptions = ZMQSocket.Options()
        clientOptions.curve = .client(serverKey: server.publicKey, publicKey: friend.publicKey, secretKey: friend.secretKey)
        clientOptions.lingerMs = 0
        let client = try context.makeSocket(.dealer, options: clientOptions)
        defer { client.close() }
        try client.connect(endpoint)
        for n in 0..<3 {
            #expect(try client.send([Array("ping \(n)".utf8)]))
            #expect(try router.poll(timeoutMs: 2000).socket)
            var userID: String?
            let frames = try router.receive(userID: &userID)
            #expect(frames?.last == Array("ping \(n)".utf8))
            #expect(userID == friend.publicKey)
        }
    }

    @Test func certificatesRoundTripAndReadPyzmqsLayout() throws {
        let pair = try CurveKeyPair.generate()
        let secret = CurveCertificate(publicKey: pair.publicKey, secretKey: pair.secretKey)
        #expect(try CurveCertificate.parse(secret.text(), path: "x") == secret)
        #expect(try CurveCertificate.parse(CurveCertificate(publicKey: pair.publicKey).text(), path: "x").secretKey == nil)
        // As zmq.auth.create_certificates writes it (with a metadata entry).
        let pyzmq = """
        #   ****  Generated on 2026-11-25 05:00:00.000000 by pyzmq  ****
        #   ZeroMQ CURVE **Secret** Certificate
        #   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.

        metadata
            name = "studio"
        curve
            public-key = "\(pair.publicKey)"
            secret-key = "\(pair.secretKey)"
        """
        #expect(try CurveCertificate.parse(pyzmq, path: "x") == secret)
        #expect(CurveKeyPair.publicKey(forSecret: pair.secretKey) == pair.publicKey)
    }

    @Test func badCertificatesAreOneSentenceNamingTheFile() throws {
        let a = try CurveKeyPair.generate(), b = try CurveKeyPair.generate()
        let cases: [(String, String)] = [
            ("hello\n", "no public-key line"),
            ("curve\n    public-key = \"short\"\n", "40 Z85 characters"),
            ("curve\n    public-key = \"\(a.publicKey)\"\n    secret-key = \"\(b.secretKey)\"\n", "does not belong"),
        ]
        for (text, needle) in cases {
            #expect {
                _ = try CurveCertificate.parse(text, path: "node.key_secret")
            } throws: { error in
                "\(error)".contains(needle) && "\(error)".contains("node.key_secret")
            }
        }
    }
}
