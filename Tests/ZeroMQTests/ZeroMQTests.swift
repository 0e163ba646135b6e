// The libzmq funnel against real sockets on loopback TCP and inproc.
import Foundation
import Synchronization
import Platform
import Testing
import ZeroMQ

#if canImport(Glibc)
import Glibc
#endif

private func options(receiveTimeoutMs: Int32 = 2_000, maxMessageBytes: Int64 = -1, lingerMs: Int32 = 0) -> ZMQSocket.Options {
    var o = ZMQSocket.Options()
    o.receiveTimeoutMs = receiveTimeoutMs
    o.sendTimeoutMs = 2_000
    o.maxMessageBytes = maxMessageBytes
    o.lingerMs = lingerMs
    return o
}

private func bindError(_ endpoint: String, on socket: ZMQSocket) -> ZMQError? {
    do {
        try socket.bind(endpoint)
        return nil
    } catch {
        return error
    }
}

/// Runs `body` on its own thread and waits at most `seconds` for it: true if it finished in time. A hang fails
/// the test instead of hanging the run.
private func completes(within seconds: Double, _ body: @escaping @Sendable () -> Void) -> Bool {
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        body()
        done.signal()
    }
    thread.start()
    return done.wait(timeout: .now() + seconds) == .success
}

/// Keeps the context alive until every socket made in `body` is closed (terminating a context with an open
/// socket would block).
private func withContext<R>(_ body: (ZMQContext) throws -> R) rethrows -> R {
    let context = ZMQContext()
    return try withExtendedLifetime(context) { try body(context) }
}

private final class Counter: Sendable {
    private let count = Mutex(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

private func uniqueInproc() -> String { "inproc://zmq-tests-\(UUID().uuidString)" }

@Suite struct ZeroMQSocketTests {
    @Test func versionIsFour() {
        #expect(zmqVersion.hasPrefix("4."))
    }

    @Test func tcpWildcardBindReturnsTheResolvedPort() throws {
        try withContext { context in
            let router = try context.makeSocket(.router, options: options())
            defer { router.close() }
            let bound = try router.bind("tcp://127.0.0.1:*")
            #expect(bound.hasPrefix("tcp://127.0.0.1:"))
            let port = try #require(Int(bound.dropFirst("tcp://127.0.0.1:".count)), "\(bound)")
            #expect((1...65_535).contains(port))
            // The returned endpoint is the real one: a peer can connect to it.
            let dealer = try context.makeSocket(.dealer, options: options())
            defer { dealer.close() }
            try dealer.connect(bound)
            #expect(try dealer.send([Array("hi".utf8)]))
            let got = try #require(try router.receive())
            #expect(got.last == Array("hi".utf8))
        }
    }

    @Test func inprocBindReturnsItsName() throws {
        try withContext { context in
            let router = try context.makeSocket(.router, options: options())
            defer { router.close() }
            let name = uniqueInproc()
            #expect(try router.bind(name) == name)
        }
    }

    @Test(arguments: ["tcp", "inproc"])
    func dealerRouterMultipartRoundTrip(transport: String) throws {
        try withContext { context in
            let router = try context.makeSocket(.router, options: options())
            let dealer = try context.makeSocket(.dealer, options: options())
            defer { dealer.close(); router.close() }
            let endpoint = try router.bind(transport == "tcp" ? "tcp://127.0.0.1:*" : uniqueInproc())
            try dealer.connect(endpoint)

            var rng = SystemRandomNumberGenerator()
            let big = (0..<200_000).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let request: [[UInt8]] = [Array("first".utf8), [], [0, 255, 0], big]
            #expect(try dealer.send(request))
            let received = try #require(try router.receive())
            // ROUTER prefixes the peer's routing id.
            #expect(received.count == request.count + 1)
            let identity = try #require(received.first)
            #expect(!identity.isEmpty)
            #expect(Array(received.dropFirst()) == request)

            #expect(try router.send([identity, Array("reply".utf8), []]))
            #expect(try dealer.receive() == [Array("reply".utf8), []])

            // Messages stay whole and in order.
            for i in 0..<50 { #expect(try dealer.send([[UInt8(i)], [UInt8(i), 1]])) }
            for i in 0..<50 { #expect(try router.receive().map { Array($0.dropFirst()) } == [[UInt8(i)], [UInt8(i), 1]]) }
        }
    }

    @Test func receiveReturnsNilAfterTheTimeoutWhenNothingArrives() throws {
        try withContext { context in
            let router = try context.makeSocket(.router, options: options(receiveTimeoutMs: 150))
            defer { router.close() }
            try router.bind("tcp://127.0.0.1:*")
            let clock = ContinuousClock()
            let start = clock.now
            let got = try router.receive()
            let elapsed = clock.now - start
            #expect(got == nil)
            #expect(elapsed >= .milliseconds(140), "returned after \(elapsed), before the 150 ms timeout")
            #expect(elapsed < .seconds(3), "took \(elapsed)")
        }
    }

    @Test(arguments: ["tcp://256.1.1.1:1", "bogus://x", "tcp://127.0.0.1:notaport"])
    func badEndpointThrowsNamingTheEndpointAndErrno(endpoint: String) throws {
        try withContext { context in
            let router = try context.makeSocket(.router, options: options())
            defer { router.close() }
            let error = try #require(bindError(endpoint, on: router), "bind to \(endpoint) succeeded")
            #expect(error.code != 0)
            #expect(error.endpoint == endpoint)
            #expect(error.description.contains(endpoint), "\(error)")
            #expect(error.description.contains("errno \(error.code)"), "\(error)")
            #expect(error.description.contains("zmq_bind"), "\(error)")
            if endpoint.hasPrefix("bogus") { #expect(error.code == EPROTONOSUPPORT, "\(error)") }
        }
    }

    @Test func secondBindToTheSamePortIsAddressInUse() throws {
        try withContext { context in
            let first = try context.makeSocket(.router, options: options())
            let second = try context.makeSocket(.router, options: options())
            defer { second.close(); first.close() }
            let endpoint = try first.bind("tcp://127.0.0.1:*")
            let error = try #require(bindError(endpoint, on: second))
            #expect(error.code == EADDRINUSE)
            #expect(error.description.contains("errno \(EADDRINUSE)"), "\(error)")
            #expect(error.description.contains(String(cString: strerror(EADDRINUSE))), "\(error)")
            #expect(error.description.contains(endpoint), "\(error)")
        }
    }

    @Test func closingWithUnsentMessagesToAnAbsentPeerReturnsPromptly() throws {
        // A port with nothing behind it: bind, note the port, close.
        let endpoint = try withContext { context in
            let probe = try context.makeSocket(.router, options: options())
            defer { probe.close() }
            return try probe.bind("tcp://127.0.0.1:*")
        }

        let queued = Counter()
        let clock = ContinuousClock()
        let start = clock.now
        let finished = completes(within: 10) {
            do {
                var o = ZMQSocket.Options()  // coord's defaults, including its bounded linger
                o.sendTimeoutMs = 50
                let context = ZMQContext()
                try withExtendedLifetime(context) {
                    let dealer = try context.makeSocket(.dealer, options: o)
                    try dealer.connect(endpoint)
                    for _ in 0..<20 {
                        if try dealer.send([Array(repeating: 7, count: 1_000)]) { queued.increment() }
                    }
                    dealer.close()
                }
                // Leaving this scope releases the context: its termination waits at most the linger.
            } catch {
                Issue.record("\(error)")
            }
        }
        #expect(finished, "close + context termination did not return within 10 s")
        #expect(queued.value == 20, "the messages were not queued, so nothing was pending at close")
        #expect(clock.now - start < .seconds(3), "took \(clock.now - start)")
    }

    @Test func pollWakesWhenSignalledFromAnotherThread() throws {
        try withContext { context in
            let router = try context.makeSocket(.router, options: options())
            defer { router.close() }
            try router.bind(uniqueInproc())
            let wake = WakeSignal()

            let idle = try router.poll(timeoutMs: 0, wakeFD: wake.fd)
            #expect(!idle.socket && !idle.wake)
            let clock = ContinuousClock()
            let start = clock.now
            Thread { wake.signal() }.start()
            let result = try router.poll(timeoutMs: 10_000, wakeFD: wake.fd)
            #expect(result.wake && !result.socket)
            #expect(clock.now - start < .seconds(5), "poll waited \(clock.now - start)")
            wake.drain()
            let drained = try router.poll(timeoutMs: 0, wakeFD: wake.fd)
            #expect(!drained.socket && !drained.wake)
        }
    }

    @Test func pollReportsAReadableSocket() throws {
        try withContext { context in
            let router = try context.makeSocket(.router, options: options())
            let dealer = try context.makeSocket(.dealer, options: options())
            defer { dealer.close(); router.close() }
            let endpoint = try router.bind("tcp://127.0.0.1:*")
            try dealer.connect(endpoint)
            let wake = WakeSignal()
            #expect(try dealer.send([[1]]))
            let ready = try router.poll(timeoutMs: 5_000, wakeFD: wake.fd)
            #expect(ready.socket && !ready.wake)
            #expect(try router.receive()?.last == [1])
            let clock = ContinuousClock()
            let start = clock.now
            let quiet = try router.poll(timeoutMs: 100)
            #expect(!quiet.socket && !quiet.wake)
            #expect(clock.now - start >= .milliseconds(90))
        }
    }

    @Test func oversizedMessageIsDroppedAndANewPeerIsStillServed() throws {
        try withContext { context in
            let router = try context.makeSocket(.router, options: options(receiveTimeoutMs: 2_000, maxMessageBytes: 1_024))
            defer { router.close() }
            let endpoint = try router.bind("tcp://127.0.0.1:*")

            // At the limit is fine.
            let fits = try context.makeSocket(.dealer, options: options())
            defer { fits.close() }
            try fits.connect(endpoint)
            #expect(try fits.send([Array(repeating: 1, count: 1_024)]))
            #expect(try router.receive()?.last == Array(repeating: 1, count: 1_024))

            // Over it: the router drops the message (and the connection).
            let offender = try context.makeSocket(.dealer, options: options())
            defer { offender.close() }
            try offender.connect(endpoint)
            #expect(try offender.send([Array(repeating: 2, count: 4_096)]))

            let newcomer = try context.makeSocket(.dealer, options: options())
            defer { newcomer.close() }
            try newcomer.connect(endpoint)
            #expect(try newcomer.send([Array("small".utf8)]))

            let first = try #require(try router.receive(), "the new peer's message was not served")
            #expect(first.last == Array("small".utf8), "got \(first.last?.count ?? 0) bytes")
            // Nothing else arrives: the oversized message is never delivered.
            #expect(try router.poll(timeoutMs: 300).socket == false)
        }
    }
}
