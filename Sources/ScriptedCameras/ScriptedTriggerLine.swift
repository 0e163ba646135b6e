import CoordCore
import Foundation
import Platform
import Synchronization

/// A trigger output with no GPIO chip behind it (`coord-node-scripted --trigger-log FILE`, tests only): it records
/// each rise on CLOCK_MONOTONIC and, when the take's train ends, appends one line per pulse to the log,
/// `OUTPUT RISE_US`, so a test counts the pulses a real coord-node process emitted. A line at offset 1000 or more
/// answers as a line held by another consumer does, so a refused arm can be tested too.
public final class ScriptedTriggerLine: TriggerLine {
    let output: TriggerOutput
    let log: URL
    private let rises = Mutex<[Int64]>([])

    public init(output: TriggerOutput, log: URL) throws(GPIOFailure) {
        if output.line >= 1000 {
            throw GPIOFailure("line \(output.line) of \(output.chip) is held by another consumer (\"scripted\"); free it before using it as a trigger output.")
        }
        self.output = output
        self.log = log
    }

    public func set(_ active: Bool) throws(GPIOFailure) {
        if active { rises.withLock { $0.append(MonotonicClock.now()) } }
    }

    public func close() {
        let taken = rises.withLock { r -> [Int64] in defer { r.removeAll() }; return r }
        guard !taken.isEmpty else { return }
        let text = taken.map { "\(output.name) \($0)\n" }.joined()
        if let handle = FileHandle(forWritingAtPath: log.path) ?? {
            FileManager.default.createFile(atPath: log.path, contents: nil)
            return FileHandle(forWritingAtPath: log.path)
        }() {
            handle.seekToEndOfFile()
            handle.write(Data(text.utf8))
            try? handle.close()
        }
    }
}
