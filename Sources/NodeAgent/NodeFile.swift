import CoordCore
import Foundation
import VersionedYAML

/// The node file (`coord-node --config /etc/coord-node/node.yaml`, CONTRACT §7): the daemon's settings, so a
/// systemd unit runs one fixed command. Every key is optional; a flag given on the command line overrides the
/// file's value. Unknown keys are warned about, bad values refused naming their line.
///
///     version: 1
///     name: pi-left
///     endpoint: tcp://0.0.0.0:5710
///     staging: /var/lib/coord-node
///     cameras:
///       - {name: cam0, v4l2: /dev/v4l/by-id/usb-046d_HD_Pro_Webcam_C920-video-index0}
///       - {name: test, synthetic: true, bus: usb1}
///       - {name: mv0, genicam: Basler-acA1920-21234567}   # a GenICam camera by its device id (CONTRACT §12)
///     genicam_interfaces: [eth1]     # where GigE Vision cameras are looked for; none: nowhere (USB3 Vision only)
///     buses: {usb1: 5000}            # buses synthetic cameras share, Mbit/s
///     audio:                         # microphones recorded with every take (CONTRACT §9)
///       - {name: mic0, alsa: "hw:1,0"}
///       - {name: clicks, synthetic: true}
///     keys: {cert: /etc/coord-node/pi-left.key_secret, authorized: /etc/coord-node/authorized}
public struct NodeFile: Decodable, Equatable, Sendable {
    public static let supportedVersion = 1

    public var version: Int
    public var name: String?
    public var endpoint: String?
    public var previewEndpoint: String?
    public var staging: String?
    public var calibration: String?
    public var cameras: [Camera]?
    public var buses: [String: Int]?
    public var keys: Keys?
    public var insecure: Bool?
    public var keepAfterCollect: Bool?
    public var logLevel: String?
    public var metrics: String?
    public var discoveryPort: UInt16?
    public var audio: [Microphone]?
    /// The network interfaces GigE Vision cameras are discovered on (`--genicam-interface`); nil or empty: none.
    public var genicamInterfaces: [String]?
    /// Trigger outputs (CONTRACT §17; NodeFileTriggers.swift).
    public var triggers: [Trigger]?

    public struct Microphone: Decodable, Equatable, Sendable {
        public var name: String
        public var alsa: String?
        public var synthetic: Bool?
        public enum CodingKeys: String, CodingKey, CaseIterable { case name, alsa, synthetic }
    }

    public struct Camera: Decodable, Equatable, Sendable {
        public var name: String
        public var v4l2: String?
        public var synthetic: Bool?
        public var bus: String?
        public var genicam: String?
        public var libcamera: String?
        /// The trigger output that exposes this camera's frames (CONTRACT §17).
        public var trigger: CameraTriggerEntry?
        public enum CodingKeys: String, CodingKey, CaseIterable { case name, v4l2, synthetic, bus, genicam, libcamera, trigger }
    }

    public struct Keys: Decodable, Equatable, Sendable {
        public var cert: String
        public var authorized: String
        public enum CodingKeys: String, CodingKey, CaseIterable { case cert, authorized }
    }

    public enum CodingKeys: String, CodingKey, CaseIterable {
        case version, name, endpoint, staging, calibration, cameras, buses, keys, insecure, metrics, audio
        case previewEndpoint = "preview_endpoint"
        case keepAfterCollect = "keep_after_collect"
        case logLevel = "log_level"
        case discoveryPort = "discovery_port"
        case genicamInterfaces = "genicam_interfaces"
        case triggers
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        version = try c.decodeIfPresent(Int.self, forKey: .version) ?? Self.supportedVersion
        name = try c.decodeIfPresent(String.self, forKey: .name)
        endpoint = try c.decodeIfPresent(String.self, forKey: .endpoint)
        previewEndpoint = try c.decodeIfPresent(String.self, forKey: .previewEndpoint)
        staging = try c.decodeIfPresent(String.self, forKey: .staging)
        calibration = try c.decodeIfPresent(String.self, forKey: .calibration)
        cameras = try c.decodeIfPresent([Camera].self, forKey: .cameras)
        buses = try c.decodeIfPresent([String: Int].self, forKey: .buses)
        keys = try c.decodeIfPresent(Keys.self, forKey: .keys)
        insecure = try c.decodeIfPresent(Bool.self, forKey: .insecure)
        keepAfterCollect = try c.decodeIfPresent(Bool.self, forKey: .keepAfterCollect)
        logLevel = try c.decodeIfPresent(String.self, forKey: .logLevel)
        metrics = try c.decodeIfPresent(String.self, forKey: .metrics)
        discoveryPort = try c.decodeIfPresent(UInt16.self, forKey: .discoveryPort)
        audio = try c.decodeIfPresent([Microphone].self, forKey: .audio)
        genicamInterfaces = try c.decodeIfPresent([String].self, forKey: .genicamInterfaces)
        triggers = try c.decodeIfPresent([Trigger].self, forKey: .triggers)
    }

    public static let knownKeys: [String: Set<String>] = [
        "": Set(CodingKeys.allCases.map(\.rawValue)),
        "cameras[]": Set(Camera.CodingKeys.allCases.map(\.rawValue)),
        "keys": Set(Keys.CodingKeys.allCases.map(\.rawValue)),
        "audio[]": Set(Microphone.CodingKeys.allCases.map(\.rawValue)),
        "triggers[]": Set(Trigger.CodingKeys.allCases.map(\.rawValue)),
        "triggers[].gpio": Set(Trigger.GPIO.CodingKeys.allCases.map(\.rawValue)),
        "cameras[].trigger": Set(CameraTriggerEntry.CodingKeys.allCases.map(\.rawValue)),
    ]

    static let logLevels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]

    /// The field at fault and one sentence, or nil.
    public func fault() -> (field: String, sentence: String)? {
        if let name, !RigName.isValid(name) { return ("name", "name \"\(Echo.short(name))\" is not allowed: use 1 to 64 of A-Z a-z 0-9 . _ -") }
        for (key, value) in [("endpoint", endpoint), ("preview_endpoint", previewEndpoint)] {
            if let value, !value.isEmpty, !(value.hasPrefix("tcp://") || value.hasPrefix("ipc://")) {
                return (key, "\(key) must be a ZeroMQ endpoint such as tcp://0.0.0.0:5710 (got \"\(Echo.short(value))\").")
            }
        }
        if endpoint == "" { return ("endpoint", "endpoint is empty: give one such as tcp://0.0.0.0:5710.") }
        for (key, value) in [("staging", staging), ("calibration", calibration)] {
            if let value, !value.hasPrefix("/") { return (key, "\(key) must be an absolute path (got \"\(Echo.short(value))\").") }
        }
        for (id, mbits) in (buses ?? [:]).sorted(by: { $0.key < $1.key }) {
            if !RigName.isValid(id) { return ("buses", "buses: the bus id \"\(Echo.short(id))\" is not allowed: use 1 to 64 of A-Z a-z 0-9 . _ -") }
            if !(1...100_000).contains(mbits) { return ("buses.\(id)", "buses.\(id) must be 1 to 100000 Mbit/s (got \(mbits)).") }
        }
        for (i, mic) in (audio ?? []).enumerated() {
            let at = "audio[\(i)]"
            if !RigName.isValid(mic.name) { return ("\(at).name", "\(at).name \"\(Echo.short(mic.name))\" is not allowed: use 1 to 64 of A-Z a-z 0-9 . _ -") }
            switch (mic.alsa, mic.synthetic ?? false) {
            case (let device?, false) where device.isEmpty: return ("\(at).alsa", "\(at).alsa is empty: give an ALSA device such as hw:1,0 or default.")
            case (_?, true): return (at, "\(at) (microphone \(mic.name)) has both alsa and synthetic: a microphone is one or the other.")
            case (nil, false): return (at, "\(at) (microphone \(mic.name)) needs alsa: DEVICE (hw:1,0, default) or synthetic: true.")
            default: break
            }
        }
        var seen = Set<String>()
        for (i, camera) in (cameras ?? []).enumerated() {
            let at = "cameras[\(i)]"
            if !RigName.isValid(camera.name) { return ("\(at).name", "\(at).name \"\(Echo.short(camera.name))\" is not allowed: use 1 to 64 of A-Z a-z 0-9 . _ -") }
            if !seen.insert(camera.name).inserted { return ("\(at).name", "\(at).name \(camera.name) is listed twice.") }
            if let id = camera.libcamera {
                if id.isEmpty { return ("\(at).libcamera", "\(at).libcamera is empty: give a camera id as coord-node --list-cameras shows it.") }
                if camera.v4l2 != nil || camera.synthetic == true || camera.genicam != nil {
                    return (at, "\(at) (camera \(camera.name)) has libcamera and also v4l2, genicam or synthetic: a camera is one of them.")
                }
                if camera.bus != nil { return ("\(at).bus", "\(at).bus is for synthetic cameras: a libcamera camera's link is its own.") }
                continue
            }
            if let id = camera.genicam {
                if id.isEmpty { return ("\(at).genicam", "\(at).genicam is empty: give a device id as coord-node --list-cameras shows it.") }
                if camera.v4l2 != nil || camera.synthetic == true {
                    return (at, "\(at) (camera \(camera.name)) has genicam and also v4l2 or synthetic: a camera is one of them.")
                }
                if camera.bus != nil { return ("\(at).bus", "\(at).bus is for synthetic cameras: a GenICam camera's link is its own.") }
                continue
            }
            switch (camera.v4l2, camera.synthetic ?? false) {
            case (let device?, false):
                if !device.hasPrefix("/") { return ("\(at).v4l2", "\(at).v4l2 must be a device path such as /dev/video0 (got \"\(Echo.short(device))\").") }
                if camera.bus != nil { return ("\(at).bus", "\(at).bus is for synthetic cameras: a V4L2 camera's bus is read from sysfs.") }
            case (nil, true):
                if let bus = camera.bus, buses?[bus] == nil { return ("\(at).bus", "\(at).bus \(bus) is not declared under buses.") }
            case (_?, true):
                return (at, "\(at) (camera \(camera.name)) has both v4l2 and synthetic: a camera is one or the other.")
            case (nil, false):
                return (at, "\(at) (camera \(camera.name)) needs v4l2: /dev/…, genicam: DEVICE_ID or synthetic: true.")
            }
        }
        for (i, interface) in (genicamInterfaces ?? []).enumerated() {
            if let problem = GenICamInterfaceName.problem(interface) {
                return ("genicam_interfaces[\(i)]", "genicam_interfaces[\(i)] \"\(Echo.short(interface))\" is not usable: \(problem).")
            }
        }
        if let fault = triggerFault() { return fault }
        if let metrics, HostPort.parse(metrics) == nil {
            return ("metrics", "metrics must be HOST:PORT such as 127.0.0.1:9710 (got \"\(Echo.short(metrics))\").")
        }
        if let level = logLevel, !Self.logLevels.contains(level) {
            return ("log_level", "log_level must be one of \(Self.logLevels.joined(separator: ", ")) (got \"\(Echo.short(level))\").")
        }
        return nil
    }

    /// The flag forms of the file's cameras, so both go through one parser: `--synthetic` and `--synthetic-bus`
    /// strings and `--v4l2` entries.
    public var syntheticFlag: String? {
        guard let cameras else { return nil }
        return cameras.filter { $0.synthetic == true }.map { c in c.bus.map { "\(c.name)@\($0)" } ?? c.name }.joined(separator: ",")
    }
    public var syntheticBusFlags: [String]? { buses.map { $0.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" } } }
    /// The file's ALSA microphones as `--audio` entries, and its synthetic one's name (`--synthetic-mic`).
    public var audioFlags: [String]? { audio.map { $0.compactMap { m in m.alsa.map { "\(m.name)=\($0)" } } } }
    public var syntheticMicFlag: String? { audio?.first { $0.synthetic == true }?.name }
    public var v4l2Flags: [String]? { cameras.map { $0.compactMap { c in c.v4l2.map { "\(c.name)=\($0)" } } } }
    public var genicamFlags: [String]? { cameras.map { $0.compactMap { c in c.genicam.map { "\(c.name)=\($0)" } } } }
    public var libcameraFlags: [String]? { cameras.map { $0.compactMap { c in c.libcamera.map { "\(c.name)=\($0)" } } } }

    /// Reads and checks a node file; throws one sentence naming the file and the line at fault.
    public static func load(_ path: String) throws(YAMLFileError) -> (file: NodeFile, warnings: [String]) {
        try parse(try VersionedYAML.read(path, kind: "node file"), path: path)
    }

    public static func parse(_ text: String, path: String) throws(YAMLFileError) -> (file: NodeFile, warnings: [String]) {
        let yaml = try VersionedYAML(text: text, path: path, kind: "node file", version: supportedVersion,
                                     topKeys: "version, name, endpoint, staging and cameras (see /usr/share/doc/coord-node/examples/node.example.yaml)",
                                     knownKeys: knownKeys)
        let file = try yaml.decode(NodeFile.self)
        if let fault = file.fault() { throw yaml.fault(fault.field, fault.sentence) }
        return (file, yaml.warnings)
    }
}
