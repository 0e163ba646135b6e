// The coordinator's side of the wire (issue 23, item 6): every reply a node sends, parsed as the coordinator's
// socket code parses it, checked by the same `NodeReply` entry point, then handed to the code that acts on it
// (the planner and budget, the take conductor, collection's bookkeeping, the clock estimator, the multiview).
// Nothing a node can send may trap here: a lying node is named and refused, never fatal.
import CoordCore
import CoordWire
import Coordinator
import Foundation

enum ReplyTarget: Int, CaseIterable {
    case helloReply, status, fileList, chunk, clockProbeReply, armed, controlsApplied, previewFrame

    var name: String {
        switch self {
        case .helloReply: "hello_reply"
        case .status: "status"
        case .fileList: "file_list"
        case .chunk: "chunk"
        case .clockProbeReply: "clock_probe_reply"
        case .armed: "armed"
        case .controlsApplied: "controls_applied"
        case .previewFrame: "preview_frame"
        }
    }

    static let who = "node fuzz"

    /// One envelope from a node, as `NodeLink` receives it: parsed, version checked, then this target's reply.
    func run(_ input: [UInt8]) {
        if self == .previewFrame {
            // The preview receiver takes whole published messages itself.
            previewFrame(input)
            return
        }
        guard let envelope = try? Wire.parse(input), (try? Wire.checkVersion(envelope)) != nil else { return }
        switch (self, envelope.body) {
        case (.helloReply, .helloReply(let m)?): hello(m)
        case (.status, .status(let m)?): status(m)
        case (.fileList, .fileList(let m)?): fileList(m)
        case (.chunk, .chunk(let m)?): chunk(m, requestID: envelope.requestID)
        case (.clockProbeReply, .clockProbeReply(let m)?): clockProbe(m, requestID: envelope.requestID)
        case (.armed, .armed(let m)?): armed(m)
        case (.controlsApplied, .controlsApplied(let m)?): controlsApplied(m)
        default: break
        }
    }

    /// The handshake through the planner and the cost model, as `start-take`, `plan` and the console do.
    private func hello(_ m: Coord_V1_HelloReply) {
        guard let reply = try? NodeReply.hello(m, from: Self.who) else { return }
        let request = TakeRequest(name: "fuzz", seconds: 5, fps: 30, width: 320, height: 240, codec: .mjpeg,
                                  takesDirectory: URL(fileURLWithPath: "/nonexistent"))
        let hellos = [RigPlanner.Hello(endpoint: "tcp://127.0.0.1:5710", reply: reply)]
        guard let nodes = try? RigPlanner.plannedNodes(hellos, request: request),
              let checked = try? RigPlanner.check(nodes, request: request) else { return }
        _ = RigPlanner.summary(checked)
    }

    /// A status through its report and the take conductor, as a recording take polls it.
    private func status(_ m: Coord_V1_Status) {
        guard let status = try? NodeReply.status(m, from: Self.who) else { return }
        let grid = FrameGrid(t0: 1_000_000_000, periodMicroseconds: 33_333)
        var conductor = TakeConductor(takeID: "t1", nodes: [status.node], grid: grid, groups: 150, now: 1_000_000_000)
        _ = conductor.handle(.status(node: status.node, status.report, now: 1_000_100_000))
        _ = conductor.handle(.operatorStop(now: 1_000_200_000))
        _ = conductor.handle(.status(node: status.node, status.report, now: 1_000_300_000))
        _ = status.events.map(\.kind)
    }

    /// A file list through collection's planning: what to fetch, the chunk schedule, the progress meter.
    private func fileList(_ m: Coord_V1_FileList) {
        guard let files = try? NodeReply.fileList(m, node: "fuzz", takeID: "t1", from: Self.who) else { return }
        var schedule = ChunkSchedule(window: 8, chunkBytes: 1 << 20)
        var total: UInt64 = 0
        for (i, file) in files.enumerated() {
            // A partial copy of half the file, as a resumed collection finds one.
            switch FileAction.decide(expectedBytes: file.bytes, expectedSHA256: file.sha256, final: (file.bytes / 3, nil),
                                     partialBytes: file.bytes / 2) {
            case .have: continue
            case .resume(let from): schedule.add(file: i, from: from, bytes: file.bytes); total = Saturating.add(total, file.bytes - from)
            case .fetch: schedule.add(file: i, from: 0, bytes: file.bytes); total = Saturating.add(total, file.bytes)
            }
        }
        var meter = TransferMeter(total: total)
        var t: Int64 = 0
        while let request = schedule.next() {
            meter.add(UInt64(request.length), at: t)
            t += 1_000
            schedule.completed()
            if t > 64_000 { break }
        }
        _ = (meter.rate, meter.secondsLeft)
    }

    /// A chunk answering a request for the first MiB of a listed file.
    private func chunk(_ m: Coord_V1_Chunk, requestID: UInt64) {
        let offset = UInt64(requestID & 0xFFFF) << 20
        guard let data = try? NodeReply.chunk(m, path: "fuzz/cam0.mkv", offset: offset, length: 1 << 20, from: Self.who) else { return }
        var meter = TransferMeter(total: 1 << 30)
        meter.add(UInt64(data.count), at: 1_000_000)
        meter.add(UInt64(data.count), at: 2_000_000)
        _ = (meter.rate, meter.secondsLeft)
    }

    /// A probe reply through the clock estimator: a run of exchanges built from it, then the mapping and its use.
    private func clockProbe(_ m: Coord_V1_ClockProbeReply, requestID: UInt64) {
        // t4: when it arrived, anywhere after t1 (the request id spreads it), as NodeLink stamps it.
        let t4 = Saturating.add(m.t1Us, Int64(requestID & 0xFFFFF))
        guard let sample = try? NodeReply.clockProbe(m, receivedAt: t4, from: Self.who) else { return }
        var estimator = ClockEstimator()
        for k in 0..<8 {
            let step = Int64(k) * 250_000
            estimator.add(ClockProbeSample(t1: Saturating.add(sample.t1, step), t2: Saturating.add(sample.t2, step),
                                           t3: Saturating.add(sample.t3, step), t4: Saturating.add(sample.t4, step)))
        }
        guard let mapping = estimator.estimate() else { return }
        _ = mapping.rig(fromLocal: Double(sample.t2))
        _ = mapping.local(fromRig: Double(sample.t1))
        _ = estimator.estimate(atRig: sample.t4)
    }

    /// Armed: the controls each camera reports in force, as the take records them.
    private func armed(_ m: Coord_V1_Armed) {
        guard let armed = try? NodeReply.armed(m, takeID: "t1", from: Self.who) else { return }
        for (camera, controls) in armed.controls { _ = Self.ranges.problem(with: controls, camera: camera) }
        // The manifest encodes every device as JSON.
        _ = try? JSONEncoder().encode(Array(armed.cameraDevices.values))
    }

    /// ControlsApplied: the values the console keeps, describes and checks against a camera's ranges.
    private func controlsApplied(_ m: Coord_V1_ControlsApplied) {
        guard let controls = try? NodeReply.controlsApplied(m, from: Self.who) else { return }
        _ = LiveRig.basicProblem(controls, camera: m.camera)
        _ = Self.ranges.problem(with: controls, camera: m.camera)
    }

    static let ranges = ControlRanges(exposureMicroseconds: 1...100_000, gainDecibels: 0...48, whiteBalanceKelvin: 2_000...10_000, focus: 0...1)

    /// A published preview frame through the receiver's parsing and the multiview's matching by group.
    private func previewFrame(_ input: [UInt8]) {
        guard let received = PreviewReceiver.received([input]) else { return }
        let other = CameraKey(node: "other", camera: "cam0")
        var assembler = MultiviewAssembler(cameras: [received.tile.key, other], patienceGroups: 4)
        _ = assembler.add(received.tile)
        var later = received.tile
        later.group = Saturating.add(later.group, 8)
        _ = assembler.add(later)
        let settings = PreviewSettings(width: 480, fps: 5)
        _ = settings.tileSize(width: received.tile.width, height: received.tile.height)
    }
}
