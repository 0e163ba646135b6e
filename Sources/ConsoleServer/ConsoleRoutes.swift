import CoordCore
import Coordinator
import Foundation
import Hummingbird
import NIOCore
import NIOPosix
import Platform
import RigMetrics
import ServiceLifecycle
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

extension ConsoleServer {
    /// What is not JSON, served as it is (openapi.yaml describes these too, tag `files`): the page, this API's
    /// document, metrics, the controls as YAML, preview tiles and take files.
    static func routes(_ router: Router<BasicRequestContext>, rig: LiveRig) {
        router.get("/") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
                     body: .init(byteBuffer: ByteBuffer(string: ConsolePage.html)))
        }
        router.get("/openapi.json") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: OpenAPIDocument.json)))
        }
        // The rig's metrics, the node's names and labels from each node's status (CONTRACT §7).
        let book = MetricsBook()
        router.get("/metrics") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                     body: .init(byteBuffer: ByteBuffer(string: book.exposition(rig.metricsSamples))))
        }
        router.get("/api/rig/controls.yaml") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/yaml; charset=utf-8",
                                             .contentDisposition: "attachment; filename=\"controls.yaml\""],
                     body: .init(byteBuffer: ByteBuffer(string: rig.controlsYAML)))
        }
        router.get("/api/rig/rig.yaml") { _, _ in
            let file: (name: String, text: String)
            do throws(LiveRig.Refusal) { file = try rig.rigFileWithControls() } catch { return failure(.conflict, error.sentence) }
            // The name as a header value: the rig file's own name when it is a plain one.
            let name = file.name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) } ? file.name : "rig.yaml"
            return Response(status: .ok, headers: [.contentType: "application/yaml; charset=utf-8",
                                                   .contentDisposition: "attachment; filename=\"\(name)\""],
                            body: .init(byteBuffer: ByteBuffer(string: file.text)))
        }
        router.get("/preview/:node/:camera/:file") { _, context in
            let node = context.parameters.get("node") ?? "", camera = context.parameters.get("camera") ?? ""
            let file = context.parameters.get("file") ?? ""
            guard file.hasSuffix(".jpg"), let group = Int64(file.dropLast(4)) else { return failure(.notFound, "a tile is named GROUP.jpg.") }
            guard let jpeg = rig.image(node: node, camera: camera, group: group) else {
                return failure(.notFound, "no tile of \(node)/\(camera) for group \(group) (tiles are kept for the last \(LiveRig.keptImagesPerCamera) groups).")
            }
            return Response(status: .ok, headers: [.contentType: "image/jpeg", .cacheControl: "max-age=60"],
                            body: .init(byteBuffer: ByteBuffer(bytes: jpeg)))
        }
        // Every file of a take directory, node folders included (CONTRACT §6b), streamed from disk: a camera file
        // may be gigabytes.
        router.get("/takes/:take/**") { _, context in
            let take = context.parameters.get("take") ?? ""
            let parts = context.parameters.getCatchAll().map(String.init)
            // Only names of CONTRACT §4's pattern, one per folder level: nothing can lead outside the take directory
            // (and the coordinator's own temporary folder, whose name is outside the pattern, is never served).
            guard RigName.isValid(take), (1...4).contains(parts.count), parts.allSatisfy(RigName.isValid) else {
                return failure(.notFound, "no such take file.")
            }
            let relative = parts.joined(separator: "/")
            // Opened from the takes folder down, one name at a time without following a link (CONTRACT §14): a linked
            // take, folder or file, a FIFO or a device is no take file; the descriptor checked is the one served.
            let file: TakeFile
            do { file = try TakeDirectory.open(rig.template.takesDirectory.path).file(take + "/" + relative) } catch {
                return failure(.notFound, "take \(take) has no file \(relative).")
            }
            return Response(status: .ok, headers: [.contentType: takeFileType(relative)], body: takeFileBody(file))
        }
    }

    /// A take file streamed from its open descriptor, a megabyte at a time read on the thread pool (a camera file may
    /// be gigabytes); it ends where the file ends should it shrink meanwhile.
    static func takeFileBody(_ file: TakeFile) -> ResponseBody {
        let size = file.size
        return ResponseBody(contentLength: Int(clamping: size)) { writer in
            var offset: UInt64 = 0
            while offset < size {
                let at = offset
                let chunk = try await NIOThreadPool.singleton.runIfActive { () throws -> ByteBuffer in
                    let want = Int(min(1 << 20, size - at))
                    var buffer = ByteBufferAllocator().buffer(capacity: want)
                    buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: want) { raw in
                        max(0, pread(file.fd, raw.baseAddress, want, off_t(at)))
                    }
                    return buffer
                }
                if chunk.readableBytes == 0 { break }
                offset += UInt64(chunk.readableBytes)
                try await writer.write(chunk)
            }
            try await writer.finish(nil)
        }
    }

    static func failure(_ status: HTTPResponse.Status, _ sentence: String) -> Response {
        Response(status: status, headers: [.contentType: "application/json"],
                 body: .init(byteBuffer: ByteBuffer(bytes: ConsoleBodies.errorJSON(sentence))))
    }
}

/// The Content-Type of a take's file, by its extension.
func takeFileType(_ path: String) -> String {
    switch (path as NSString).pathExtension.lowercased() {
    case "html": "text/html; charset=utf-8"
    case "json", "otio": "application/json"
    case "csv": "text/csv; charset=utf-8"
    case "xml", "fcpxml", "mhl": "application/xml"
    case "mkv": "video/x-matroska"
    case "mka": "audio/x-matroska"
    case "mov": "video/quicktime"
    case "wav": "audio/wav"
    default: "application/octet-stream"
    }
}

/// True for the first caller only.
final class Once: Sendable {
    private let done = Mutex(false)
    func first() -> Bool { done.withLock { done in defer { done = true }; return !done } }
}

/// The live rig as a service of the console's group: follows the rig until the group shuts down, or is cancelled
/// (another service of the group failed: the server cannot listen).
struct LiveRigService: Service {
    let rig: LiveRig
    func run() async throws {
        try await cancelWhenGracefulShutdown { await rig.run() }
    }
}

/// The console's takes as a service of its group: every take started from the page (or adopted from the rig and
/// stopped here) runs as a child task of this service, so graceful shutdown stops it on one instant and waits for
/// its collection, manifest and report (CONTRACT §14).
struct ConsoleTakes: Service {
    let rig: LiveRig
    let shuttingDown: @Sendable (String?) -> Void
    func run() async throws {
        await withGracefulShutdownHandler {
            await rig.runTakes()
        } onGracefulShutdown: {
            shuttingDown(rig.close())
        }
    }
}
