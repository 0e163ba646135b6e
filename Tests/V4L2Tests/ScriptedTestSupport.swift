// What the scripted-device tests share: a painter that logs what it painted, a webcam, and the checks every
// error must pass.
import Foundation
import Synchronization
import Testing
import V4L2
import V4L2Simulator

#if canImport(Glibc)
import Glibc
#endif


typealias Scripted = ScriptedV4L2Driver

/// What the painter was asked to paint, frame by frame.
final class PaintLog: Sendable {
    struct Entry: Equatable {
        var fourcc: String
        var width: Int
        var height: Int
        var sequence: UInt32
        var startOfExposureUs: Int64
        var exposureUs: Int64
        var bytesUsed: Int
    }

    private let entries = Mutex<[Entry]>([])

    var all: [Entry] { entries.withLock { $0 } }

    func entry(sequence: UInt32) -> Entry? { all.first { $0.sequence == sequence } }

    /// Paints a recognisable frame: a fake JPEG (SOI … EOI) for MJPG, the sequence number repeated for YUYV.
    func paint(_ frame: Scripted.Frame) -> Int {
        let used: Int
        if frame.fourcc == "MJPG" {
            used = 1000 + Int(frame.sequence)
            frame.buffer[0] = 0xff
            frame.buffer[1] = 0xd8
            frame.buffer[used - 2] = 0xff
            frame.buffer[used - 1] = 0xd9
        } else {
            used = frame.width * frame.height * 2
            frame.buffer.prefix(used).initializeMemory(as: UInt8.self, repeating: UInt8(truncatingIfNeeded: frame.sequence))
        }
        entries.withLock { entries in
            entries.append(Entry(fourcc: frame.fourcc, width: frame.width, height: frame.height, sequence: frame.sequence,
                                 startOfExposureUs: frame.startOfExposureUs, exposureUs: frame.exposureUs,
                                 bytesUsed: used))
        }
        return used
    }
}

func scripted(_ devices: [String: Scripted.Device], seed: UInt64 = 1) -> (Scripted, PaintLog) {
    let log = PaintLog()
    return (Scripted(script: .init(devices: devices), seed: seed, painter: log.paint), log)
}

func webcam(_ change: (inout Scripted.Device) -> Void = { _ in }) -> Scripted.Device {
    var device = Scripted.uvcWebcam
    change(&device)
    return device
}

/// Runs `body` and returns the V4L2Error it threw, recording an issue if it threw nothing or something else.
func v4l2Error(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> V4L2Error? {
    do {
        try body()
        Issue.record("expected a V4L2Error, nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as V4L2Error {
        return error
    } catch {
        Issue.record("expected a V4L2Error, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// The operator's rule for every error: one sentence that names the device and what was being done.
func expectOneSentence(_ error: V4L2Error, device: String, operation: String,
                               sourceLocation: SourceLocation = #_sourceLocation)
{
    let text = error.description
    #expect(error.device == device, sourceLocation: sourceLocation)
    #expect(error.operation == operation, sourceLocation: sourceLocation)
    #expect(text.contains(device), "\(text)", sourceLocation: sourceLocation)
    #expect(text.contains(operation), "\(text)", sourceLocation: sourceLocation)
    #expect(text.hasSuffix("."), "\(text)", sourceLocation: sourceLocation)
    #expect(!text.dropLast().contains(". "), "more than one sentence: \(text)", sourceLocation: sourceLocation)
    #expect(!text.contains("\n"), "\(text)", sourceLocation: sourceLocation)
}

/// Dequeues `count` frames (requeueing each), returning what each looked like.
func capture(_ device: V4L2Device, count: Int, timeoutMs: Int32 = 1000,
                     check: (V4L2Frame) -> Void = { _ in }) throws -> [V4L2Frame]
{
    var frames: [V4L2Frame] = []
    while frames.count < count {
        guard let frame = try device.dequeueFrame(timeoutMs: timeoutMs) else {
            Issue.record("no frame within \(timeoutMs) ms after \(frames.count) frames")
            break
        }
        check(frame)
        frames.append(frame)
        try device.requeue(frame)
    }
    return frames
}

let yuyv = V4L2Device.pixelFormat("YUYV")
let mjpg = V4L2Device.pixelFormat("MJPG")
let interval30Us: Int64 = 33_333


final class Counts: Sendable {
    private let sequences = Mutex<[String: [UInt32]]>([:])
    func set(_ path: String, _ value: [UInt32]) { sequences.withLock { $0[path] = value } }
    func get(_ path: String) -> [UInt32]? { sequences.withLock { $0[path] } }
}

func monotonicNowUs() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) * 1_000_000 + Double(ts.tv_nsec) / 1000
}
