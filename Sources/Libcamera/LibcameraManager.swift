import CLibcamera
import CoordCore
import Foundation

/// One camera as libcamera lists it (`coord-node --list-cameras`).
public struct LibcameraCameraInfo: Equatable, Sendable {
    public var id: String
    public var model: String
    /// FrameDurationLimits as the camera lists it, µs; nil when it lists none.
    public var frameDurationLimits: ClosedRange<Int64>?
    /// The video stream's formats and sizes as libcamera names them ("YUV420 640x480,1280x720; MJPEG 640x480").
    public var formats: String
    public var controls: [String]

    public var pipeline: LibcameraPipeline { .of(cameraID: id) }

    /// The manifest's `device` (CONTRACT §16).
    public var identity: DeviceIdentity {
        DeviceIdentity(driver: "libcamera", model: model.isEmpty ? nil : model, pipeline: pipeline.rawValue, cameraID: id)
    }
}

/// A libcamera failure, as one sentence.
public struct LibcameraError: Error, CustomStringConvertible, Equatable, Sendable {
    public let description: String
    init(_ text: String) { description = text }
}

/// libcamera's camera manager: libcamera allows one per process, so the node starts it once, when a libcamera
/// camera or the listing first needs it, and keeps it for its life.
// @unchecked: the manager pointer is only read after it is made; libcamera's manager is thread-safe for these calls.
public final class LibcameraManager: @unchecked Sendable {
    let handle: OpaquePointer

    private init(handle: OpaquePointer) { self.handle = handle }

    /// The process's manager, started on first use.
    public static let shared: Result<LibcameraManager, LibcameraError> = {
        var why = [CChar](repeating: 0, count: 512)
        guard let handle = clc_manager_start(&why, why.count) else {
            return .failure(LibcameraError(LibcameraManager.sentence(why)))
        }
        return .success(LibcameraManager(handle: handle))
    }()

    /// Every camera libcamera lists now.
    public func cameras() -> [LibcameraCameraInfo] {
        (0..<Int(clc_camera_count(handle))).compactMap { index in
            var info = clc_camera_info()
            guard clc_camera_info_at(handle, Int32(index), &info) == 0 else { return nil }
            let limits = info.frame_duration_min_us > 0 && info.frame_duration_max_us >= info.frame_duration_min_us
                ? info.frame_duration_min_us...info.frame_duration_max_us : nil
            var controls: [String] = []
            if info.has_exposure_time != 0 { controls.append("ExposureTime") }
            if info.has_analogue_gain != 0 { controls.append("AnalogueGain") }
            if info.has_colour_gains != 0 { controls.append("ColourGains") }
            if info.has_colour_temperature != 0 { controls.append("ColourTemperature") }
            if info.has_lens_position != 0 { controls.append("LensPosition") }
            return LibcameraCameraInfo(id: Self.text(&info.id), model: Self.text(&info.model), frameDurationLimits: limits,
                                       formats: Self.text(&info.formats), controls: controls)
        }
    }

    /// A C buffer's text up to its NUL.
    static func sentence(_ why: [CChar]) -> String {
        String(decoding: why.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func text<T>(_ tuple: inout T) -> String {
        withUnsafeBytes(of: &tuple) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
    }

    /// The lines `coord-node --list-cameras` prints for libcamera: one block per camera.
    public static func listingLines() -> [String] {
        let manager: LibcameraManager
        switch shared {
        case .failure(let error): return ["libcamera: no cameras listed: \(error)"]
        case .success(let m): manager = m
        }
        let cameras = manager.cameras()
        guard !cameras.isEmpty else { return ["libcamera: no cameras found"] }
        var out: [String] = []
        for camera in cameras {
            out.append("libcamera \(camera.id)")
            out.append("  model: \(camera.model.isEmpty ? "unknown" : camera.model), pipeline: \(camera.pipeline.rawValue)")
            out.append("  formats: \(camera.formats.isEmpty ? "none listed" : camera.formats)")
            out.append("  frame duration limits: " + (camera.frameDurationLimits.map { "\($0.lowerBound)…\($0.upperBound) µs" }
                                                    ?? "none listed (the camera free-runs)"))
            out.append("  controls: \(camera.controls.isEmpty ? "none" : camera.controls.joined(separator: ", "))")
        }
        out.append("\(cameras.count) libcamera camera(s); use --libcamera NAME=CAMERA_ID")
        return out
    }
}
