import Foundation

/// What disciplines this host's clocks (chrony, ntpd, systemd-timesyncd, linuxptp), for the handshake.
/// coord aligns CLOCK_MONOTONIC itself and needs none of them; a service that slews the clock changes the
/// node's rate mid-take, which the coordinator's tracking follows, so the operator should know it runs.
enum TimeService {
    static let known = ["chronyd", "ntpd", "systemd-timesyn", "ptp4l", "phc2sys", "timemaster"]

    static func describe(proc: String = "/proc") -> String {
        let running = runningServices(proc: proc)
        guard !running.isEmpty else { return "none found" }
        var parts = running.map { $0 == "systemd-timesyn" ? "systemd-timesyncd" : $0 }
        if running.contains("chronyd"), let leap = chronyLeapStatus() { parts[parts.firstIndex(of: "chronyd")!] = "chronyd (\(leap))" }
        return parts.joined(separator: ", ") + " running"
    }

    static func runningServices(proc: String) -> [String] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: proc) else { return [] }
        var found = Set<String>()
        for pid in entries where pid.allSatisfy(\.isNumber) {
            guard let comm = try? String(contentsOfFile: "\(proc)/\(pid)/comm", encoding: .utf8) else { continue }
            let name = comm.trimmingCharacters(in: .whitespacesAndNewlines)
            if known.contains(name) { found.insert(name) }
        }
        return known.filter(found.contains)
    }

    /// chronyc's "Leap status" line, if chronyc answers within a second.
    static func chronyLeapStatus() -> String? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/chronyc")
        process.arguments = ["-n", "tracking"]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return nil }
        let deadline = Date().addingTimeInterval(1)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { process.terminate(); return nil }
        let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return text.split(separator: "\n").first { $0.hasPrefix("Leap status") }
            .map { $0.replacingOccurrences(of: "  ", with: "").replacingOccurrences(of: " : ", with: ": ") }
    }
}
