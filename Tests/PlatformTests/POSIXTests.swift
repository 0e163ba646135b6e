import Platform
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite struct POSIXTests {
    @Test func anInterruptedCallIsMadeAgain() throws {
        var calls = 0
        let n = try POSIX.retryingEINTR("read") { () -> Int in
            calls += 1
            if calls < 3 { errno = EINTR; return -1 }
            return 42
        }
        #expect(n == 42)
        #expect(calls == 3)
    }

    @Test func anyOtherFailureThrowsTheCallAndItsErrno() {
        var calls = 0
        #expect(throws: POSIXFailure("write", "/srv/takes/a.mkv", errno: ENOSPC)) {
            try POSIX.retryingEINTR("write", "/srv/takes/a.mkv") { () -> Int in
                calls += 1
                errno = ENOSPC
                return -1
            }
        }
        #expect(calls == 1)
    }

    @Test func aFailureReadsAsOneSentence() {
        let failure = POSIXFailure("write", "/srv/takes/a.mkv", errno: ENOSPC)
        #expect(failure.description == "write of /srv/takes/a.mkv failed: No space left on device (errno \(ENOSPC)).")
        #expect(failure.reason == "No space left on device")
        #expect(POSIXFailure("socket", errno: EMFILE).description == "socket failed: Too many open files (errno \(EMFILE)).")
    }

    @Test func aRealCallCarriesTheKernelsErrno() {
        do {
            _ = try POSIX.retryingEINTR("open", "/nonexistent/coord") { open("/nonexistent/coord", O_RDONLY) }
            Issue.record("opening a missing path succeeded")
        } catch {
            #expect(error.errno == ENOENT)
            #expect(error.description == "open of /nonexistent/coord failed: No such file or directory (errno \(ENOENT)).")
        }
    }

    @Test func callsReturningTheirErrorNumberAreFunnelledToo() {
        var calls = 0
        #expect(throws: Never.self) { try POSIX.returningErrno("posix_fallocate") { calls += 1; return calls < 2 ? EINTR : 0 } }
        #expect(calls == 2)
        #expect(throws: POSIXFailure("posix_fallocate", errno: ENOSPC)) { try POSIX.returningErrno("posix_fallocate") { ENOSPC } }
    }

    @Test func aSuccessfulZeroOrPositiveResultIsReturned() throws {
        #expect(try POSIX.retryingEINTR("close") { Int32(0) } == 0)
        #expect(try POSIX.retryingEINTR("lseek") { off_t(1 << 40) } == off_t(1 << 40))
    }
}
