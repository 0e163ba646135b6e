// A camera recording's files: the .mkv written frame by frame, frames.csv's rows, the bytes on disk, and how they
// are finished, also when the staging disk fills or the .mkv cannot be finished.
import CoordCore
import Foundation
import Logging
import Capture
import LibAV
import Pixels
import Platform
#if canImport(Glibc)
import Glibc
#endif

extension CameraRecording {
    /// The staging disk has no room left for the space this camera's files hold to be finished in.
    var isShortOfSpace: Bool { writer.isShortOfSpace || csv.isShortOfSpace }

    /// The disk is full: the files end at the frame just written, every frame in the .mkv with its row, finished in
    /// the space they held; the event says which camera on which node stopped where, and that the rest is lost.
    func stopOnFullDisk(after group: Int64) {
        let why = writer.spaceReason ?? csv.spaceReason ?? "No space left on device"
        let frames = framesWritten
        let finished = finishFiles(reason: nil)
        let staging = mkvURL.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
        var message = "camera \(node)/\(settings.camera) stopped after group \(group): the staging disk of node \(node) (\(staging)) is full (\(why)); "
        if let problem = finished {
            message += "its \(frames) frames so far were written but its files could not be finished: \(problem)"
        } else {
            message += "its files end there, finalized with all \(frames) frames written; its later groups are not recorded"
        }
        logger.error("\(message)")
        shared.update { s in s.progress.error = message }
        onEvent(.writeFailed, message)
    }

    /// After the .mkv could not be finished (a write failed with no space held to finish it in): the file is cut
    /// after its last whole cluster, frames.csv is cut to the rows of the frames the file holds, and the sentence
    /// says which frames (groups) were lost.
    func reconcileWithFile() -> String {
        var cut: String?
        let frames: Int
        do {
            frames = try writer.cutToWholeFrames()
        } catch {
            cut = error.reason
            guard let counted = try? MatroskaRepair.wholeFrames(path: mkvURL.path) else {
                return "its .mkv could not be finished or read back (\(error.reason)), so which of its \(framesWritten) frames it holds is not known"
            }
            frames = counted
        }
        let text = (try? String(contentsOf: csvURL, encoding: .utf8)) ?? ""
        let rows = FramesTable.parseWholeRows(text)
        var sentence = "its .mkv could not be finished (no index)\(cut.map { " nor cut after its last whole frame (\($0))" } ?? ", so it was cut after its last whole frame"), and holds \(frames) of the \(framesWritten) frames written"
        if rows.count > frames {
            let lost = rows[frames...]
            sentence += ": frames \(frames)…\(rows.count - 1) (groups \(lost.first!.group)…\(lost.last!.group)) are lost"
            // The rows of the frames kept are a prefix of the file: cutting needs no space.
            var offset = text.utf8.count
            var newlines = 0
            for (i, byte) in text.utf8.enumerated() where byte == UInt8(ascii: "\n") {
                newlines += 1
                if newlines == frames + 1 { offset = i + 1; break }
            }
            do {
                try POSIX.retryingEINTR("truncate") { truncate(csvURL.path, off_t(offset)) }
                sentence += ", and frames.csv lists only the frames in the file"
            } catch {
                sentence += ", though frames.csv still lists them (it could not be cut: \(error.reason))"
            }
        } else if rows.count < frames {
            sentence += ": frames.csv holds rows for only \(rows.count) of them"
        }
        return sentence
    }

    /// A raw picture is encoded; a camera's JPEG is muxed as it came (MJPEG passthrough).
    func write(_ payload: CapturePayload, group: Int64) throws {
        switch payload {
        case .picture(let picture): try writer.write(picture, ptsMicroseconds: pts(group))
        case .jpeg(let bytes): try writer.writePacket(bytes, ptsMicroseconds: pts(group))
        }
    }

    /// A group's time in the file: its instant after the first group's, exact at a rational rate.
    func pts(_ group: Int64) -> Int64 {
        grid.instant(ofGroup: group) - grid.instant(ofGroup: assigner?.startGroup ?? 0)
    }

    func blankPicture() -> PlanarFrame {
        if let blank { return blank }
        let frame = PlanarFrame(width: settings.width, height: settings.height)
        frame.luma.update(repeating: 16)
        frame.cb.update(repeating: 128)
        frame.cr.update(repeating: 128)
        blank = frame
        return frame
    }

    /// `held`: a fill on purpose (cap or slow-down), counted apart from frames the sensor failed to deliver.
    func frameWritten(group: Int64, estimate: PhaseController.Estimate?, center: Int64, dup: Bool, held: Bool) {
        pendingRows.append(PendingRow(group: group, estimate: estimate, fallbackCenter: center, dup: dup, writtenAtLocal: localNow()))
        framesWritten += 1
        let every = assigner?.recordEvery(atGroup: group)
        let frames = framesWritten
        shared.update { s in
            s.progress.frames = frames
            if dup { if held { s.progress.held += 1 } else { s.progress.dropped += 1 } }
            s.progress.lastGroup = group
            if let every { s.progress.recordEvery = every }
        }
        refreshBytesWritten()
    }

    /// Keeps `Progress.bytesWritten` at the .mkv's size on disk, read at most twice a second (`force`: now), and
    /// notices files deleted under the recorder (the staging directory removed mid-take): frames written to an
    /// unlinked file are lost, so the camera must end and say so.
    func refreshBytesWritten(force: Bool = false) {
        let now = MonotonicClock.now()
        guard force || bytesCheckedAt.map({ now - $0 >= 500_000 }) ?? true else { return }
        bytesCheckedAt = now
        var csvStat = stat()
        let unlinked = fstat(csv.descriptor, &csvStat) == 0 && csvStat.st_nlink == 0
        guard !unlinked, let attributes = try? FileManager.default.attributesOfItem(atPath: mkvURL.path),
              let size = (attributes[.size] as? NSNumber)?.uint64Value else {
            if !force, stagingLost == nil { stagingLost = mkvURL.deletingLastPathComponent().path }
            return
        }
        shared.update { s in s.progress.bytesWritten = size }
    }

    func appendRow(group: Int64, center: Int64, dup: Bool) {
        csvBuffer += FramesTable.line(FrameRow(frame: rowsWritten, group: group, centerMicroseconds: center, isDup: dup))
        csvBuffer += "\n"
        rowsWritten += 1
        // Rows reach the disk every second's worth of frames; with the 2 s re-estimation lag a crash loses the
        // last ~3 s of rows (the .mkv keeps those frames).
        if rowsWritten % Int64(max(settings.fps, 1)) == 0 { flushRows() }
    }

    func flushRows() {
        guard !csvBuffer.isEmpty else { return }
        let r = csv.write(Array(csvBuffer.utf8))
        if r != 0 {
            shared.update { s in s.progress.error = s.progress.error ?? "camera \(node)/\(settings.camera): writing \(csvURL.path) failed: \(POSIX.text(r))" }
        }
        csvBuffer = ""
    }

    /// Writes the last rows, finishes the .mkv and closes both; returns what went wrong, if anything.
    @discardableResult
    func finishFiles(reason: String?) -> String? {
        emitRows(all: true)
        flushRows()
        csv.synchronize()
        csv.close()
        var problem: String?
        do {
            try writer.finish()
        } catch {
            problem = "finishing \(mkvURL.path) failed: \(error)"
            shared.update { s in s.progress.error = s.progress.error ?? "camera \(node)/\(settings.camera): \(problem!)" }
        }
        refreshBytesWritten(force: true)
        let failure = reason.map { "camera \(node)/\(settings.camera) \($0)" }
        let recorded = assigner != nil
        shared.update { s in
            s.progress.finished = true
            if let failure, s.progress.error == nil, recorded { s.progress.error = failure }
        }
        logger.info("camera finished", metadata: ["camera": "\(settings.camera)", "frames": "\(rowsWritten)"])
        return problem
    }
}
