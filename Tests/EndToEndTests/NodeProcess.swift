@testable import Coordinator
import Foundation
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Where things are: the package root (from this file) and the `coord-node` binary of the same build as this
/// test bundle.
enum E2E {
    /// `<root>/Tests/EndToEndTests/NodeProcess.swift` → `<root>`.
    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// `$COORD_NODE`; else `coord-node` in the `debug` directory this test bundle was built into (so
    /// `--scratch-path X` tests X's node); else `<root>/.build/debug/coord-node`.
    static let nodeBinary: String = {
        if let override = ProcessInfo.processInfo.environment["COORD_NODE"], !override.isEmpty { return override }
        var starts: [URL] = []
        if let exe = Bundle.main.executableURL { starts.append(exe) }
        starts.append(Bundle.main.bundleURL)
        if let arg0 = CommandLine.arguments.first, !arg0.isEmpty { starts.append(URL(fileURLWithPath: arg0)) }
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            starts.append(URL(fileURLWithPath: exe))
        }
        for start in starts {
            var dir = start.resolvingSymlinksInPath()
            while dir.path != "/" && !dir.path.isEmpty {
                if dir.lastPathComponent == "debug" {
                    let candidate = dir.appendingPathComponent("coord-node").path
                    if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
                }
                dir = dir.deletingLastPathComponent()
            }
        }
        return packageRoot.appendingPathComponent(".build/debug/coord-node").path
    }()

    /// A new, empty directory for one test.
    static func makeScratch() throws -> URL {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("coord-e2e-\(getpid())-\(UInt32.random(in: 0...UInt32.max))", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Names in a directory (hidden ones too); empty if the directory does not exist.
    static func contents(_ url: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []).sorted()
    }

    /// Every regular file below `url`, as paths relative to it (hidden ones too).
    static func regularFiles(under url: URL) -> [String] {
        guard let walker = FileManager.default.enumerator(at: url, includingPropertiesForKeys: [.isRegularFileKey]) else { return [] }
        var found: [String] = []
        for case let file as URL in walker where (try? file.resourceValues(forKeys: [.isRegularFileKey]))?.isRegularFile == true {
            found.append(String(file.resolvingSymlinksInPath().path.dropFirst(url.resolvingSymlinksInPath().path.count + 1)))
        }
        return found.sorted()
    }

    /// A TCP port on 127.0.0.1 that was free a moment ago: bound with port 0, read back, closed.
    static func freeLoopbackPort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket() failed: errno \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw TestFailure("bind() failed: errno \(errno)") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw TestFailure("getsockname() failed: errno \(errno)") }
        return UInt16(bigEndian: address.sin_port)
    }

    /// Lower-case hex SHA-256 of a file, by `/usr/bin/sha256sum` (independent of the code under test).
    static func sha256sum(_ url: URL) throws -> String {
        let run = try ToolRun.run("/usr/bin/sha256sum", [url.path], timeout: 60)
        guard run.status == 0, let digest = run.stdout.split(separator: " ").first, digest.count == 64 else {
            throw TestFailure("sha256sum \(url.path) failed (status \(run.status)): \(run.stderr)")
        }
        return String(digest)
    }

    /// Runs blocking work (process waits) off the cooperative thread pool.
    static func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
        }
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// One finished run of a short-lived program.
struct ToolRun: Sendable {
    var status: Int32
    var stdout: String
    var stderr: String

    /// Runs `executable` to completion; SIGKILLs it (and records an issue) after `timeout` seconds.
    static func run(_ executable: String, _ arguments: [String], timeout: TimeInterval) throws -> ToolRun {
        let (process, out, err, exited) = prepare(executable, arguments)
        // Drain both pipes concurrently so a chatty program cannot block on a full pipe.
        let outData = PipeDrain(out.fileHandleForReading), errData = PipeDrain(err.fileHandleForReading)
        try process.run()
        if exited.wait(timeout: .now() + timeout) == .timedOut {
            kill(process.processIdentifier, SIGKILL)
            exited.wait()
            throw TestFailure("\(executable) \(arguments.joined(separator: " ")) did not exit within \(timeout) s")
        }
        return ToolRun(status: process.terminationStatus, stdout: outData.wait(), stderr: errData.wait())
    }
}

/// A process for `executable` with stdin closed, stdout and stderr piped, and a semaphore signalled when it
/// exits; the caller starts reading the pipes, then runs it.
func prepare(_ executable: String, _ arguments: [String]) -> (Process, stdout: Pipe, stderr: Pipe, exited: DispatchSemaphore) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.standardInput = FileHandle.nullDevice
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    let exited = DispatchSemaphore(value: 0)
    process.terminationHandler = { _ in exited.signal() }
    return (process, out, err, exited)
}

/// Reads a pipe to its end on a thread of its own.
final class PipeDrain: Sendable {
    private let data = Mutex(Data())
    private let done = DispatchSemaphore(value: 0)

    init(_ handle: FileHandle) {
        Thread { [self] in
            let all = handle.readDataToEndOfFile()
            data.withLock { $0 = all }
            done.signal()
        }.start()
    }

    func wait() -> String {
        done.wait()
        return String(decoding: data.withLock { $0 }, as: UTF8.self)
    }
}

/// A running `coord-node` on loopback with one synthetic camera, started the way the demo starts one.
final class NodeProcess: Sendable {
    let name: String
    let staging: URL
    let log: URL
    let endpoint: String
    private let process: Process
    private let exited: DispatchSemaphore
    private let stopped = Mutex(false)

    private init(name: String, staging: URL, log: URL, endpoint: String, process: Process, exited: DispatchSemaphore) {
        self.name = name; self.staging = staging; self.log = log; self.endpoint = endpoint
        self.process = process; self.exited = exited
    }

    /// Starts the node and waits (at most `readyTimeout`) for its one stdout line `READY <endpoint>`.
    static func start(name: String, staging: URL, log: URL, cameras: [String] = ["cam0"],
                      readyTimeout: TimeInterval = 20) throws -> NodeProcess {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: E2E.nodeBinary)
        process.arguments = [
            "--name", name, "--endpoint", "tcp://127.0.0.1:*", "--staging", staging.path,
            "--synthetic", cameras.joined(separator: ","), "--parent-pid", "\(getpid())",
        ]
        process.standardInput = FileHandle.nullDevice
        let out = Pipe()
        process.standardOutput = out
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        process.standardError = try FileHandle(forWritingTo: log)
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        let ready = ReadyLine(out.fileHandleForReading)
        do {
            try process.run()
        } catch {
            throw TestFailure("cannot start \(E2E.nodeBinary): \(error)")
        }
        guard let endpoint = ready.wait(until: Date().addingTimeInterval(readyTimeout)) else {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            exited.wait()
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            throw TestFailure("\(E2E.nodeBinary) --name \(name) gave no READY line within \(readyTimeout) s "
                              + "(exit status \(process.terminationStatus); stderr: \(text.suffix(2000)))")
        }
        return NodeProcess(name: name, staging: staging, log: log, endpoint: endpoint, process: process, exited: exited)
    }

    /// SIGTERM and wait up to 10 s for a graceful exit, then SIGKILL. False if it had to be killed.
    @discardableResult
    func stop() -> Bool {
        let already = stopped.withLock { s in
            defer { s = true }
            return s
        }
        if already { return true }
        kill(process.processIdentifier, SIGTERM)
        if exited.wait(timeout: .now() + 10) == .timedOut {
            kill(process.processIdentifier, SIGKILL)
            exited.wait()
            return false
        }
        return true
    }

    var logText: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }
}

