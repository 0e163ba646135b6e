import Capture
import CoordCore
import Foundation
import Libcamera
import Logging

extension CameraListing {
    /// `--list-cameras`: one block per libcamera camera (id, model, pipeline, formats and sizes, frame duration
    /// limits, controls), or why none are listed.
    public static func libcameraLines() -> [String] { LibcameraManager.listingLines() }
}

/// The node's libcamera cameras: found at start (their handshake formats), opened at arm.
enum LibcameraCameras {
    /// The camera libcamera lists as `entry.cameraID`, as the handshake offers it; one sentence when it is not listed
    /// or offers neither a YUV420 nor a YUYV stream.
    static func capabilities(_ entry: LibcameraCameraEntry, logger: Logger) throws(NodeFailure) -> CameraCapabilities {
        let manager: LibcameraManager
        switch LibcameraManager.shared {
        case .failure(let error): throw NodeFailure(.io, "camera \(entry.name): \(error).")
        case .success(let m): manager = m
        }
        let listed = manager.cameras()
        guard let found = listed.first(where: { $0.id == entry.cameraID }) else {
            let ids = listed.isEmpty ? "none" : listed.map(\.id).joined(separator: ", ")
            throw NodeFailure(.io, "camera \(entry.name): libcamera has no camera \(entry.cameraID) (it lists \(ids)).")
        }
        let formats = LibcameraStreamFormats.handshake(found.formats, frameDurationLimits: found.frameDurationLimits)
        guard !formats.isEmpty else {
            throw NodeFailure(.io, "camera \(entry.name): libcamera camera \(entry.cameraID) offers no YUV420 or YUYV video stream (it offers \(found.formats)).")
        }
        logger.info("camera found", metadata: ["camera": "\(entry.name)", "libcamera": "\(entry.cameraID)", "model": "\(found.model)",
                                               "pipeline": "\(found.pipeline.rawValue)"])
        // A CSI sensor's stream crosses no shared bus; a UVC camera's USB bus is not looked up (see docs/node-guide.md).
        return CameraCapabilities(name: entry.name, source: "libcamera", device: entry.cameraID, formats: formats,
                                  codecs: VideoCodec.allCases, bus: "")
    }

    /// Opens the camera for a take: configures its stream and measures whether it honours frame durations.
    static func open(_ entry: LibcameraCameraEntry, node: String, width: Int, height: Int, periodMicroseconds: Double,
                     logger: Logger, localClock: @escaping @Sendable (Int64) -> Int64) throws(NodeFailure) -> LibcameraCamera {
        do {
            let camera = try LibcameraCamera(cameraID: entry.cameraID, width: width, height: height,
                                             periodMicroseconds: periodMicroseconds, localClock: localClock)
            logger.info("camera configured", metadata: ["camera": "\(entry.name)", "libcamera": "\(entry.cameraID)",
                                                        "frame_duration": "\(camera.honour)"])
            return camera
        } catch {
            throw NodeFailure(.io, "camera \(node)/\(entry.name): \(error).")
        }
    }
}
