import Foundation
import Testing
@testable import NodeAgent

/// What a node reports about its clock discipline, read from a fake /proc tree.
@Suite struct TimeServiceTests {
    func fakeProc(_ processes: [String: String]) throws -> URL {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("proc-\(UInt32.random(in: 0...UInt32.max))")
        for (pid, comm) in processes {
            let dir = root.appendingPathComponent(pid)
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            try (comm + "\n").write(to: dir.appendingPathComponent("comm"), atomically: true, encoding: .utf8)
        }
        // Not a process: ignored.
        try FileManager.default.createDirectory(at: root.appendingPathComponent("sys"), withIntermediateDirectories: true)
        return root
    }

    @Test func noServiceIsSaidPlainly() throws {
        let root = try fakeProc(["1": "systemd", "42": "sshd"])
        defer { try? FileManager.default.removeItem(at: root) }
        #expect(TimeService.describe(proc: root.path) == "none found")
    }

    @Test func runningServicesAreNamedInAFixedOrder() throws {
        let root = try fakeProc(["7": "phc2sys", "9": "systemd-timesyn", "12": "ptp4l", "30": "bash"])
        defer { try? FileManager.default.removeItem(at: root) }
        #expect(TimeService.describe(proc: root.path) == "systemd-timesyncd, ptp4l, phc2sys running")
    }

    @Test func anUnreadableProcTreeFindsNothing() {
        #expect(TimeService.describe(proc: "/nonexistent-proc") == "none found")
    }
}
