import CoordCore
import Foundation

/// Parses the daemon's `--synthetic NAME[@BUS],…` and `--synthetic-bus ID=MBITS` flags: which synthetic cameras
/// the node offers, and which declared bus each shares (for the rig's bandwidth budget).
public enum SyntheticCameraSpec {
    /// The cameras in flag order, the bus of each camera that names one, and the declared buses in flag order.
    /// Camera names are checked by `NodeConfiguration.problem()`, as for any camera.
    public static func parse(synthetic: String, buses: [String]) throws -> (cameras: [String], cameraBus: [String: String], buses: [Bus]) {
        var declared: [Bus] = []
        for entry in buses {
            let bus = try parseBus(entry)
            if declared.contains(where: { $0.id == bus.id }) {
                throw SyntheticCameraSpecError(option: "--synthetic-bus", entry: entry, reason: "bus \(bus.id) is declared twice")
            }
            declared.append(bus)
        }
        var cameras: [String] = []
        var cameraBus: [String: String] = [:]
        // Empty entries ("cam0,,cam1", a trailing comma) are skipped, as the flag always allowed.
        for raw in synthetic.split(separator: ",") {
            let entry = raw.trimmingCharacters(in: .whitespaces)
            if entry.isEmpty { continue }
            let parts = entry.split(separator: "@", omittingEmptySubsequences: false).map(String.init)
            guard parts.count <= 2, !parts[0].isEmpty, parts.count == 1 || !parts[1].isEmpty else {
                throw SyntheticCameraSpecError(option: "--synthetic", entry: entry, reason: "expected NAME or NAME@BUS")
            }
            cameras.append(parts[0])
            if parts.count == 2 {
                guard declared.contains(where: { $0.id == parts[1] }) else {
                    throw SyntheticCameraSpecError(option: "--synthetic", entry: entry,
                                                   reason: "bus \(parts[1]) is not declared by any --synthetic-bus \(parts[1])=MBITS")
                }
                cameraBus[parts[0]] = parts[1]
            }
        }
        return (cameras, cameraBus, declared)
    }

    /// "usb1=5000": a bus with the link rate in megabits per second; usable bandwidth as `Bus.usb` reckons it.
    private static func parseBus(_ entry: String) throws -> Bus {
        let parts = entry.trimmingCharacters(in: .whitespaces).split(separator: "=", omittingEmptySubsequences: false)
        guard parts.count == 2 else {
            throw SyntheticCameraSpecError(option: "--synthetic-bus", entry: entry, reason: "expected ID=MBITS, e.g. usb1=5000")
        }
        let id = parts[0].trimmingCharacters(in: .whitespaces)
        guard RigName.isValid(id) else {
            throw SyntheticCameraSpecError(option: "--synthetic-bus", entry: entry,
                                           reason: "the bus id must be 1 to 64 of A-Z a-z 0-9 . _ -")
        }
        guard let mbits = Double(parts[1].trimmingCharacters(in: .whitespaces)), mbits.isFinite, mbits > 0 else {
            throw SyntheticCameraSpecError(option: "--synthetic-bus", entry: entry,
                                           reason: "the rate must be a positive number of megabits per second")
        }
        return Bus(id: id, kind: mbits >= 5000 ? "usb3" : "usb2", bandwidthBytesPerSecond: mbits * 1e6 / 8 * 0.8)
    }
}

/// A `--synthetic`, `--synthetic-bus` or `--v4l2` entry the node cannot use, and why, as one sentence.
public struct SyntheticCameraSpecError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The flag the entry came from.
    public let option: String
    public let entry: String
    public let reason: String

    public init(option: String, entry: String, reason: String) {
        self.option = option; self.entry = entry; self.reason = reason
    }

    /// The entry as given, cut short and its control characters escaped (`Echo.short`).
    public var description: String { "\(option) entry \"\(Echo.short(entry))\" is not usable: \(reason)." }
}

/// A V4L2 camera the node records: its name in the rig and its device node (`--v4l2 NAME=/dev/videoN`).
public struct V4L2CameraEntry: Equatable, Sendable {
    public var name: String
    public var device: String

    public init(name: String, device: String) {
        self.name = name
        self.device = device
    }

    /// Parses the repeatable `--v4l2 NAME=/dev/videoN` flag; the names are checked by `NodeConfiguration.problem()`.
    public static func parse(_ entries: [String]) throws -> [V4L2CameraEntry] {
        try entries.map { raw in
            let parts = try nameAndValue(raw, option: "--v4l2", expected: "expected NAME=/dev/videoN")
            guard parts[1].hasPrefix("/") else {
                throw SyntheticCameraSpecError(option: "--v4l2", entry: raw, reason: "the device must be an absolute path such as /dev/video0")
            }
            return V4L2CameraEntry(name: parts[0], device: parts[1])
        }
    }
}

/// A GenICam camera the node records: its name in the rig and its Aravis device id (`--genicam NAME=DEVICE_ID`).
public struct GenICamCameraEntry: Equatable, Sendable {
    public var name: String
    public var deviceID: String

    public init(name: String, deviceID: String) {
        self.name = name
        self.deviceID = deviceID
    }

    /// Parses the repeatable `--genicam NAME=DEVICE_ID` flag; the names are checked by `NodeConfiguration.problem()`.
    public static func parse(_ entries: [String]) throws -> [GenICamCameraEntry] {
        try entries.map { raw in
            let parts = try nameAndValue(raw, option: "--genicam", expected: "expected NAME=DEVICE_ID, e.g. cam0=Aravis-Fake-GV01")
            return GenICamCameraEntry(name: parts[0], deviceID: parts[1])
        }
    }
}

/// A camera driven through libcamera (`--libcamera NAME=CAMERA_ID`, node file `cameras: [{name, libcamera: ID}]`).
public struct LibcameraCameraEntry: Equatable, Sendable {
    public var name: String
    public var cameraID: String

    public init(name: String, cameraID: String) {
        self.name = name
        self.cameraID = cameraID
    }

    /// Parses the repeatable `--libcamera NAME=CAMERA_ID` flag (an id may hold '=' or ':', so only the first '=' splits).
    public static func parse(_ entries: [String]) throws -> [LibcameraCameraEntry] {
        try entries.map { raw in
            let parts = try nameAndValue(raw, option: "--libcamera",
                                         expected: "expected NAME=CAMERA_ID, e.g. cam0=/base/axi/pcie@120000/rp1/i2c@88000/imx708@1a")
            return LibcameraCameraEntry(name: parts[0], cameraID: parts[1])
        }
    }
}

/// A network interface GigE Vision cameras are looked for on (`--genicam-interface IFACE`, node file
/// `genicam_interfaces:`): a Linux interface name, checked before anything is sent on it.
public enum GenICamInterfaceName {
    /// Why `name` cannot be a network interface name, as a clause, or nil.
    public static func problem(_ name: String) -> String? {
        if name.isEmpty { return "it is empty: give a network interface such as eth1 (see ip link)" }
        // IFNAMSIZ is 16 with its NUL; '/', ':' and white space are never in one.
        guard name.utf8.count <= 15, name != ".", name != "..",
              name.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0 != "/" && $0 != ":" && $0.value != 0x7f }) else {
            return "a network interface name has 1 to 15 characters and no /, : or spaces (see ip link)"
        }
        return nil
    }

    /// Checks the repeatable `--genicam-interface` flag, throwing on the first bad name; repeats dropped.
    public static func parse(_ names: [String]) throws -> [String] {
        var kept: [String] = []
        for name in names {
            if let problem = problem(name) {
                throw SyntheticCameraSpecError(option: "--genicam-interface", entry: name, reason: problem)
            }
            if !kept.contains(name) { kept.append(name) }
        }
        return kept
    }
}

extension MicrophoneEntry {
    /// Parses the repeatable `--audio NAME=DEVICE` flag (an ALSA capture device: `hw:1,0`, `default`, `pulse`).
    public static func parseALSA(_ entries: [String]) throws -> [MicrophoneEntry] {
        try entries.map { raw in
            let parts = try nameAndValue(raw, option: "--audio", expected: "expected NAME=DEVICE, e.g. mic0=hw:1,0 or mic0=default")
            return MicrophoneEntry(name: parts[0], device: .alsa(parts[1]))
        }
    }
}

/// A repeatable `NAME=VALUE` flag's entry split in two, both non-empty; else one sentence naming the flag.
func nameAndValue(_ raw: String, option: String, expected: String) throws -> [String] {
    let entry = raw.trimmingCharacters(in: .whitespaces)
    let parts = entry.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
    guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
        throw SyntheticCameraSpecError(option: option, entry: raw, reason: expected)
    }
    return parts
}
