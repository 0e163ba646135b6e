import Platform
import CoordCore
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads what the host offers a take (thermal zones, CPUs, load, USB buses, the staging disk) from sysfs and
/// procfs under `root`, so tests can feed a fake tree; "/" on a real node.
///
/// Every answer is best effort: a missing, unreadable or garbled file gives an empty or default answer, never a
/// failure, because a node without a thermal zone or a machine-id must still record.
public struct HostProbe: Sendable {
    /// The directory every system path is read under.
    public let root: URL

    public init(root: URL) {
        self.root = root
    }

    // MARK: - Thermal zones

    /// The readable thermal zones, in zone-number order, with their passive and critical trip points.
    public func thermalZones() -> [ThermalZone] {
        let zones = entries("sys/class/thermal").compactMap { entry -> (Int, String)? in
            guard entry.hasPrefix("thermal_zone"), let n = Int(entry.dropFirst("thermal_zone".count)), n >= 0 else { return nil }
            return (n, entry)
        }.sorted { $0.0 < $1.0 }
        return zones.compactMap { _, entry in zone("sys/class/thermal/\(entry)") }
    }

    private func zone(_ dir: String) -> ThermalZone? {
        guard let temp = millidegrees(read("\(dir)/temp")) else { return nil }
        let name = read("\(dir)/type").flatMap { $0.isEmpty ? nil : $0 } ?? (dir as NSString).lastPathComponent
        var passive: Double?, critical: Double?
        for entry in entries(dir) where entry.hasPrefix("trip_point_") && entry.hasSuffix("_type") {
            let number = entry.dropFirst("trip_point_".count).dropLast("_type".count)
            guard !number.isEmpty, number.allSatisfy(\.isNumber),
                  let kind = read("\(dir)/\(entry)"),
                  let celsius = millidegrees(read("\(dir)/trip_point_\(number)_temp")) else { continue }
            switch kind {
            case "passive": passive = min(passive ?? celsius, celsius)
            // A zone has one critical trip; should a driver list two, the lower one is where the machine stops.
            case "critical": critical = min(critical ?? celsius, celsius)
            default: continue
            }
        }
        return ThermalZone(name: name, celsius: temp, passiveCelsius: passive, criticalCelsius: critical)
    }

    private func millidegrees(_ text: String?) -> Double? {
        guard let text, let value = Double(text), value.isFinite else { return nil }
        return value / 1000
    }

    // MARK: - CPUs and load

    /// CPUs online: `sys/devices/system/cpu/online`, else the `processor` lines of `proc/cpuinfo`, else what
    /// this process sees.
    public func cpuCount() -> Int {
        if let online = read("sys/devices/system/cpu/online"), let n = Self.countCPUs(inRanges: online), n > 0 { return n }
        if let cpuinfo = read("proc/cpuinfo") {
            let n = cpuinfo.split(separator: "\n").filter { line in
                line.split(separator: ":", maxSplits: 1).first?.trimmingCharacters(in: .whitespaces) == "processor"
            }.count
            if n > 0 { return n }
        }
        return max(1, ProcessInfo.processInfo.activeProcessorCount)
    }

    /// The number of CPUs in a kernel CPU list such as "0-3,6"; nil if the list is garbled.
    static func countCPUs(inRanges list: String) -> Int? {
        var count = 0
        for part in list.split(separator: ",") {
            let bounds = part.trimmingCharacters(in: .whitespaces).split(separator: "-", omittingEmptySubsequences: false)
            switch bounds.count {
            case 1:
                guard Int(bounds[0]) != nil else { return nil }
                count += 1
            case 2:
                guard let low = Int(bounds[0]), let high = Int(bounds[1]), low >= 0, high >= low else { return nil }
                count += high - low + 1
            default:
                return nil
            }
        }
        return count > 0 ? count : nil
    }

    /// The 1-minute load average per CPU (1.0 = every CPU busy); 0 when `proc/loadavg` is unreadable.
    public func cpuLoad() -> Double {
        guard let text = read("proc/loadavg"),
              let first = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).first,
              let load = Double(first), load.isFinite, load >= 0 else { return 0 }
        return load / Double(cpuCount())
    }

    // MARK: - Identity

    /// The machine and its boot (`etc/machine-id:proc/sys/kernel/random/boot_id`): nodes that report the same id
    /// share CPUs. Either part alone still identifies the host; with neither, the host name.
    public func hostID() -> String {
        let parts = [read("etc/machine-id"), read("proc/sys/kernel/random/boot_id")].compactMap { $0 }.filter { !$0.isEmpty }
        return parts.isEmpty ? ProcessInfo.processInfo.hostName : parts.joined(separator: ":")
    }

    // MARK: - USB

    /// The USB bus a V4L2 device (`/dev/videoN`) sits on, with the bus's link rate; nil for a device that is not on
    /// USB (a CSI or platform camera) or when sysfs does not say.
    public func usbBus(forVideoDevice path: String) -> Bus? {
        let name = (path as NSString).lastPathComponent
        guard !name.isEmpty, name != ".", name != ".." else { return nil }
        // The interface the video node hangs off; its parents are the USB device, hub ports and the controller.
        guard var dir = resolve("sys/class/video4linux/\(name)/device"), !dir.isEmpty,
              FileManager.default.fileExists(atPath: absolute(dir)) else { return nil }
        while !dir.isEmpty {
            let here = dir.joined(separator: "/")
            if let busText = read("\(here)/busnum"), let speedText = read("\(here)/speed") {
                guard let bus = Int(busText), bus > 0 else { return nil }
                // The root hub's speed is the link the bus's cameras share; a device's own may be slower.
                let rate = Self.megabits(read("sys/bus/usb/devices/usb\(bus)/speed")) ?? Self.megabits(speedText)
                return rate.map { Bus.usb(number: bus, megabitsPerSecond: $0) }
            }
            dir.removeLast()
        }
        return nil
    }

    private static func megabits(_ text: String?) -> Double? {
        guard let text, let value = Double(text), value.isFinite, value > 0 else { return nil }
        return value
    }

    // MARK: - Disk

    /// Free and total bytes of the filesystem holding `staging` (a real path, not under `root`), and an id for that
    /// filesystem on this host (`<hostID>:<major>:<minor>`). A staging directory not made yet is measured on
    /// the nearest existing parent, where it will be made; zeros and an empty id when nothing can be read.
    public func disk(staging: URL) -> (free: UInt64, total: UInt64, id: String) {
        var path = staging.standardizedFileURL.path
        var info = stat()
        while stat(path, &info) != 0 {
            let parent = (path as NSString).deletingLastPathComponent
            guard !parent.isEmpty, parent != path else { return (0, 0, "") }
            path = parent
        }
        var fs = statvfs()
        guard statvfs(path, &fs) == 0 else { return (0, 0, "") }
        let unit = UInt64(fs.f_frsize)
        let (major, minor) = Self.deviceNumbers(UInt64(info.st_dev))
        return (UInt64(fs.f_bavail) * unit, UInt64(fs.f_blocks) * unit, "\(hostID()):\(major):\(minor)")
    }

    /// Splits a `dev_t` the way the C library's `major()`/`minor()` macros do (Swift cannot import them).
    static func deviceNumbers(_ dev: UInt64) -> (major: UInt64, minor: UInt64) {
#if os(Linux)
        return (((dev >> 8) & 0xfff) | ((dev >> 32) & ~0xfff), (dev & 0xff) | ((dev >> 12) & ~0xff))
#else
        return ((dev >> 24) & 0xff, dev & 0xff_ffff)
#endif
    }

    // MARK: - Everything

    /// What this node has to spend on a take, as it reports it in the handshake.
    public func resources(staging: URL, calibration: Calibration?, buses: [Bus]) -> NodeResources {
        let disk = disk(staging: staging)
        return NodeResources(buses: buses, calibration: calibration, freeDiskBytes: disk.free, diskTotalBytes: disk.total,
                             diskID: disk.id, cpuCount: cpuCount(), cpuLoad: cpuLoad(), thermalZones: thermalZones(),
                             hostID: hostID())
    }

    // MARK: - Reading under root

    /// `relative` with every symbolic link followed as if `root` were "/": absolute targets start at `root` and
    /// ".." stops there, so a fake tree's links never reach the real system. Components under `root`, or nil for
    /// a link loop.
    func resolve(_ relative: String) -> [String]? {
        var resolved: [String] = []
        var pending = Array(relative.split(separator: "/").map(String.init).reversed())
        var links = 0
        while let component = pending.popLast() {
            if component == "." { continue }
            if component == ".." {
                if !resolved.isEmpty { resolved.removeLast() }
                continue
            }
            let candidate = resolved + [component]
            let full = absolute(candidate)
            if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: full) {
                // The kernel gives up after 40 links; so does this.
                links += 1
                if links > 40 { return nil }
                if target.hasPrefix("/") { resolved = [] }
                pending.append(contentsOf: target.split(separator: "/").map(String.init).reversed())
            } else {
                resolved = candidate
            }
        }
        return resolved
    }

    /// The real path of components under `root`.
    private func absolute(_ components: [String]) -> String {
        var base = root.path
        while base.hasSuffix("/") { base.removeLast() }
        return base + "/" + components.joined(separator: "/")
    }

    private func path(_ relative: String) -> String? {
        resolve(relative).map(absolute)
    }

    /// The file's text, trimmed; nil if it is missing, unreadable or larger than 4 MiB.
    func read(_ relative: String) -> String? {
        guard let path = path(relative) else { return nil }
        // read(2) to EOF: sysfs and procfs files report a size of 4096 or 0 whatever they hold.
        guard let fd = try? POSIX.retryingEINTR("open", path, { open(path, O_RDONLY | O_CLOEXEC) }) else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while bytes.count <= 4 << 20 {
            guard let n = try? POSIX.retryingEINTR("read", path, { chunk.withUnsafeMutableBytes { readBytes(fd, $0.baseAddress, $0.count) } }) else {
                return nil
            }
            if n == 0 { return String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) }
            bytes += chunk[0..<n]
        }
        return nil
    }

    private func entries(_ relative: String) -> [String] {
        guard let path = path(relative) else { return [] }
        return (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
    }
}

/// read(2) under a name that does not collide with `HostProbe.read`.
private func readBytes(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
#if canImport(Glibc)
    return Glibc.read(fd, buffer, count)
#else
    return Darwin.read(fd, buffer, count)
#endif
}
