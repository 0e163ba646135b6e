// Coverage-guided fuzzing of what a peer or a file can feed coord (issue 14, item 3): the wire envelope through
// the node's whole request handling, the rig-file, node-file and manifest readers, and discovery datagrams. The first byte of an input
// picks the target. Built for libFuzzer with -DFUZZING (see docs/tests.md); built normally it replays inputs:
//   coord-fuzz FILE|DIR...   runs every file through the same targets (the committed corpus, or a crash).
import CoordCore
import CoordWire
import Coordinator
import Foundation
import Logging
import NodeAgent

enum FuzzTarget {
    /// One node agent for the whole run, with a synthetic camera and a scratch staging area.
    nonisolated(unsafe) static var agent: NodeAgent?

    static func node() -> NodeAgent? {
        if let agent { return agent }
        let staging = FileManager.default.temporaryDirectory.appendingPathComponent("coord-fuzz-\(getpid())")
        try? FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
        var configuration = NodeConfiguration(name: "fuzz", endpoint: "", staging: staging, syntheticCameras: ["cam0"])
        configuration.previewEndpoint = ""
        var logger = Logger(label: "fuzz")
        logger.logLevel = .critical
        agent = try? NodeAgent(configuration: configuration, logger: logger)
        return agent
    }

    /// Inputs run per target, printed when the process exits.
    nonisolated(unsafe) static var counts = [Int](repeating: 0, count: names.count)
    nonisolated(unsafe) static var reporting = false

    /// Selectors 0…5: what a coordinator or a file sends a node; 6…13: every reply a node sends the coordinator (ReplyTarget).
    static let names = ["edge", "node", "rig", "manifest", "nodefile", "discovery"] + ReplyTarget.allCases.map(\.name)
    /// COORD_FUZZ_TARGET=<one of names> sends every input to one target (its first byte is still dropped,
    /// so the shared corpus seeds it), for a run of a given number of inputs per target.
    static let fixed: UInt8? = ProcessInfo.processInfo.environment["COORD_FUZZ_TARGET"].flatMap { names.firstIndex(of: $0) }.map(UInt8.init)

    static func run(_ bytes: [UInt8]) {
        guard let first = bytes.first else { return }
        let selector = fixed ?? first
        if !reporting {
            reporting = true
            atexit {
                let counts = zip(FuzzTarget.names, FuzzTarget.counts).map { "\($0) \($1)" }.joined(separator: ", ")
                FileHandle.standardError.write(Data("coord-fuzz: inputs per target: \(counts)\n".utf8))
            }
        }
        let target = Int(selector) % names.count
        counts[target] += 1
        let input = Array(bytes.dropFirst())
        if let reply = ReplyTarget(rawValue: target - 6) {
            reply.run(input)
            return
        }
        switch target {
        case 0:
            // The edge alone: parse, version, names, fields, and the coordinator's own conversions of replies.
            guard let envelope = try? Wire.parse(input) else { return }
            _ = try? Wire.checkVersion(envelope)
            _ = try? Wire.checkNames(envelope)
            _ = try? Wire.checkFields(envelope)
            switch envelope.body {
            case .status(let s): _ = NodeStatus(wire: s).report
            case .helloReply(let h): _ = h.cameras.map(\.name)
            case .controlsApplied(let c): _ = CameraControls(wire: c.controls)
            default: break
            }
        case 1:
            // The node's request handling, as its socket thread calls it.
            _ = node()?.handle(input, receivedLocal: 0)
        case 2:
            _ = try? RigFile.parse(String(decoding: input, as: UTF8.self), path: "fuzz.yaml")
        case 4:
            _ = try? NodeFile.parse(String(decoding: input, as: UTF8.self), path: "fuzz.yaml")
        case 5:
            // A discovery datagram, as the node's responder and coord discover read one.
            guard let datagram = try? Coord_V1_Discovery(serializedBytes: input) else { return }
            if case .announcement(let a)? = datagram.body {
                _ = DiscoveredNode.checked(name: a.node, endpoint: a.endpoint, cameras: a.cameras, version: a.agentVersion,
                                           publicKey: a.publicKey, from: "10.0.0.1", isKey: { $0.utf8.count == 40 })
            }
        default:
            if let manifest = try? JSONDecoder().decode(TakeManifest.self, from: Data(input)) {
                _ = manifest.partialCause
            }
        }
    }
}

#if FUZZING
/// libFuzzer's driver, called from our own main (SwiftPM names every executable's entry point itself).
@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(_ argc: UnsafeMutablePointer<CInt>,
                     _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
                     _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> CInt

@main
struct Fuzz {
    static func main() {
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(runFuzzerDriver(&argc, &argv) { data, size in
            guard let data else { return 0 }
            FuzzTarget.run(Array(UnsafeBufferPointer(start: data, count: size)))
            return 0
        })
    }
}
#else
@main
struct Replay {
    static func main() {
        var files: [URL] = []
        for argument in CommandLine.arguments.dropFirst() {
            let url = URL(fileURLWithPath: argument)
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else {
                FileHandle.standardError.write(Data("coord-fuzz: no file or directory \(argument).\n".utf8))
                exit(2)
            }
            if isDirectory.boolValue {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
                files += names.sorted().map { url.appendingPathComponent($0) }
            } else {
                files.append(url)
            }
        }
        for file in files {
            guard let data = try? Data(contentsOf: file) else { continue }
            FuzzTarget.run([UInt8](data))
        }
        print("coord-fuzz: \(files.count) input(s) ran without a crash")
        exit(0)
    }
}
#endif
