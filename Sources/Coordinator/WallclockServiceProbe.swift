import CoordCore
import Foundation

/// Asks chrony how far this host's wall clock is from its time service, for the manifest (best-effort: absent or
/// silent, the answer is "unknown", never a failure).
enum WallclockServiceProbe {
    static func read(chronyc: String = "/usr/bin/chronyc") -> TakeManifest.WallclockService {
        guard FileManager.default.isExecutableFile(atPath: chronyc) else {
            return .init(source: "unknown", detail: "chronyc is not installed on the coordinator")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: chronyc)
        process.arguments = ["-n", "tracking"]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return .init(source: "unknown", detail: "chronyc could not be run") }
        // chronyc answers at once or not at all; a second is its own timeout's scale.
        let deadline = Date().addingTimeInterval(1)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning {
            process.terminate()
            return .init(source: "unknown", detail: "chronyc did not answer within a second")
        }
        let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        guard process.terminationStatus == 0 else { return .init(source: "unknown", detail: "chronyd is not answering") }
        return ChronyTracking.parse(text)
    }
}
