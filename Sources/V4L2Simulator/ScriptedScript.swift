// The camera script: which devices a ScriptedV4L2Driver pretends exist and how each misbehaves.
import CV4L2
import CoordCore
import Foundation
import Platform
import V4L2

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension ScriptedV4L2Driver {
    /// The devices this driver pretends exist.
    public struct Script: Codable, Sendable {
        /// Keyed by path, e.g. "/dev/video0".
        public var devices: [String: Device]

        public init(devices: [String: Device]) {
            self.devices = devices
        }

        public init(from decoder: Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            devices = try container.decodeIfPresent([String: Device].self, forKey: .devices) ?? [:]
        }
    }

    /// One device node: a profile and the faults to inject.
    public struct Device: Codable, Sendable {
        /// "uvc-webcam" (a Logitech C920-like UVC webcam) or "metadata-node" (UVC's second, non-capture node).
        public var profile: String
        /// "EBUSY", "ENODEV", "EACCES", ...: open fails with it.
        public var openError: String?
        /// After this many filled frames have been dequeued, the device vanishes at its next frame, as a yanked USB
        /// camera: poll and every ioctl fail with ENODEV, close still works, the node disappears from the path.
        public var unplugAfterFrames: Int?
        /// Sequence numbers captured but never delivered (the next buffer's sequence jumps).
        public var dropSequences: [UInt32]?
        /// "soe" (default): the timestamp is the start of exposure; "eof": the end of readout.
        public var timestampSource: String?
        /// Standard deviation of gaussian noise on the buffer timestamp, in microseconds; seeded.
        public var timestampJitterUs: Double?
        /// The sensor's clock error against CLOCK_MONOTONIC; positive runs fast, so frames come more often.
        public var rateErrorPPM: Double?
        /// Makes S_FMT fail with this errno name, e.g. "EBUSY" or "EINVAL" (without it, S_FMT adjusts as drivers do).
        public var sFmtError: String?
        /// Makes STREAMON fail with this errno name, e.g. "ENOSPC" (no USB bandwidth left) or "EBUSY".
        public var streamonError: String?
        /// From STREAMON to frame 0's start of exposure; default a seeded draw within one frame interval.
        public var startPhaseUs: Double?
        /// What S_PARM does while streaming: "EBUSY" (default, as uvcvideo answers) or "resync" (as vivid: the
        /// new interval runs from the frame after the one in progress, so one odd frame moves all later ones).
        public var sParmWhileStreaming: String?

        public init(profile: String = "uvc-webcam", openError: String? = nil, unplugAfterFrames: Int? = nil,
                    dropSequences: [UInt32]? = nil, timestampSource: String? = nil, timestampJitterUs: Double? = nil,
                    rateErrorPPM: Double? = nil, sFmtError: String? = nil, streamonError: String? = nil,
                    startPhaseUs: Double? = nil)
        {
            self.profile = profile
            self.openError = openError
            self.unplugAfterFrames = unplugAfterFrames
            self.dropSequences = dropSequences
            self.timestampSource = timestampSource
            self.timestampJitterUs = timestampJitterUs
            self.rateErrorPPM = rateErrorPPM
            self.sFmtError = sFmtError
            self.streamonError = streamonError
            self.startPhaseUs = startPhaseUs
        }

        public init(from decoder: Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            self.init(
                profile: try c.decodeIfPresent(String.self, forKey: .profile) ?? "uvc-webcam",
                openError: try c.decodeIfPresent(String.self, forKey: .openError),
                unplugAfterFrames: try c.decodeIfPresent(Int.self, forKey: .unplugAfterFrames),
                dropSequences: try c.decodeIfPresent([UInt32].self, forKey: .dropSequences),
                timestampSource: try c.decodeIfPresent(String.self, forKey: .timestampSource),
                timestampJitterUs: try c.decodeIfPresent(Double.self, forKey: .timestampJitterUs),
                rateErrorPPM: try c.decodeIfPresent(Double.self, forKey: .rateErrorPPM),
                sFmtError: try c.decodeIfPresent(String.self, forKey: .sFmtError),
                streamonError: try c.decodeIfPresent(String.self, forKey: .streamonError),
                startPhaseUs: try c.decodeIfPresent(Double.self, forKey: .startPhaseUs))
            sParmWhileStreaming = try c.decodeIfPresent(String.self, forKey: .sParmWhileStreaming)
        }

        /// What is wrong with this device's description, as a clause, or nil.
        func problem(path: String) -> String? {
            if Profile.named(profile) == nil {
                return "names an unknown profile \"\(profile)\" for \(path) (known: \(Profile.names.joined(separator: ", ")))"
            }
            for (field, name) in [("openError", openError), ("sFmtError", sFmtError), ("streamonError", streamonError)] {
                if let name, ScriptedV4L2Driver.errnoNamed(name) == nil {
                    return "gives \(path) an unknown \(field) \"\(name)\" (known: \(ScriptedV4L2Driver.errnoNames))"
                }
            }
            if let source = timestampSource, source != "soe", source != "eof" {
                return "gives \(path) an unknown timestampSource \"\(source)\" (known: soe, eof)"
            }
            if let mode = sParmWhileStreaming, mode != "EBUSY", mode != "resync" {
                return "gives \(path) an unknown sParmWhileStreaming \"\(mode)\" (known: EBUSY, resync)"
            }
            if let n = unplugAfterFrames, n < 0 {
                return "gives \(path) a negative unplugAfterFrames"
            }
            return nil
        }
    }

    /// What the painter gets for each frame: fill `buffer` with an image in `fourcc` at `width`x`height` and return the bytes used.
    public struct Frame {
        /// The pixel format S_FMT chose, e.g. "MJPG" or "YUYV".
        public var fourcc: String
        public var width: Int
        public var height: Int
        /// The sequence number the buffer will carry.
        public var sequence: UInt32
        /// The true start of exposure on CLOCK_MONOTONIC, before any timestamp jitter.
        public var startOfExposureUs: Int64
        /// Half the frame interval, or exposure_absolute × 100 µs in manual exposure.
        public var exposureUs: Int64
        /// The whole driver buffer (sizeimage bytes).
        public var buffer: UnsafeMutableRawBufferPointer
    }

    /// A script that cannot be used, rendered as one sentence naming the file.
    public struct ScriptError: Error, CustomStringConvertible, Sendable {
        /// The script's path.
        public var file: String
        /// What is wrong, as the rest of the sentence after the file's name.
        public var reason: String

        public var description: String { "the camera script \(file) \(reason)." }
    }

    /// The default profile, for tests.
    public static let uvcWebcam = Device()
    /// UVC's metadata node (the second /dev/videoN of every UVC camera), for tests.
    public static let metadataNode = Device(profile: "metadata-node")

    /// Reads a JSON script; one sentence naming the file on error.
    public static func load(_ url: URL) throws -> Script {
        let file = url.path
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            let reason = (error as NSError).localizedDescription.trimmingCharacters(in: CharacterSet(charactersIn: "."))
            throw ScriptError(file: file, reason: "cannot be read: \(reason)")
        }
        let script: Script
        do {
            script = try JSONDecoder().decode(Script.self, from: data)
        } catch let error as DecodingError {
            throw ScriptError(file: file, reason: "is not a valid camera script: \(DecodingProblem.sentence(error))")
        }
        for path in script.devices.keys.sorted() {
            if let problem = script.devices[path]!.problem(path: path) {
                throw ScriptError(file: file, reason: problem)
            }
        }
        return script
    }
}
