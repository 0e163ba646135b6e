import CoordCore
import Foundation
import Logging
import LibAV

extension NodeAgent {
    /// Repairs every take a killed predecessor was recording (before this node serves anyone, so nothing lists or
    /// fetches a file half-repaired): each .mkv is finalized with every whole frame, and its frames.csv made to
    /// match the frames really there, rows lost with the crash rebuilt and flagged `recovered`.
    func recoverInterruptedTakes() {
        for (takeID, marker) in store.interruptedTakes() {
            let directory = store.takeDirectory(takeID).appendingPathComponent(configuration.name, isDirectory: true)
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
            for name in names.sorted() where name.hasSuffix(".mkv") {
                let camera = String(name.dropLast(4))
                let mkv = directory.appendingPathComponent(name)
                let csv = directory.appendingPathComponent("\(camera).frames.csv")
                do {
                    let outcome = try MatroskaRepair.repair(path: mkv.path)
                    let text = (try? String(contentsOf: csv, encoding: .utf8)) ?? ""
                    let rows = FramesTable.parseWholeRows(text)
                    let fixed = FramesTable.reconcile(rows, frames: outcome.frames, startGroup: marker.startGroup,
                                                      periodMicroseconds: marker.periodMicroseconds, t0: marker.t0)
                    let table = ([FramesTable.header] + fixed.map(FramesTable.line)).joined(separator: "\n") + "\n"
                    try Data(table.utf8).write(to: csv, options: .atomic)
                    let rebuilt = fixed.filter(\.isRecovered).count
                    logger.warning("recovered a take interrupted by a crash", metadata: [
                        "take": "\(takeID)", "camera": "\(camera)", "frames": "\(outcome.frames)", "rows_rebuilt": "\(rebuilt)",
                        "rows_dropped": "\(max(0, rows.count - outcome.frames))", "cut_frame_dropped": "\(outcome.droppedTail)"])
                } catch {
                    logger.error("take \(takeID): camera \(camera) could not be repaired after the crash: \(error)")
                }
            }
            store.clearRecordingMark(takeID)
            // The newest such take is this node's take again, finished: its coordinator, still polling, collects it.
            report(.recovered(takeID: takeID))
        }
        // A take the previous process ended when it was stopped (SIGTERM) says so again, with its events, rather
        // than the node answering with no take (which its coordinator could only blame on someone else).
        if let (takeID, note) = store.takeStopNotes().last {
            logger.notice("take ended when this node was last stopped", metadata: ["take": "\(takeID)", "detail": "\(note.detail)"])
            report(.resumedStopped(takeID: takeID, detail: note.detail, events: note.takeEvents))
        }
    }
}
