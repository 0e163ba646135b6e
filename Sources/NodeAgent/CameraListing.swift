import CoordCore
import Foundation
import GenICam
import Capture

/// What `coord-node --list-cameras` prints: one block per V4L2 device node (device, driver, card, bus, formats
/// with sizes and rates), or why it was skipped, and a last line saying how many cameras coord can record; then
/// the same for the GenICam cameras discovery finds, if any (`genicamLines`).
public enum CameraListing {
    /// The lines to print; never empty, and the last one says what was found.
    public static func lines(access: V4L2Access, probe: HostProbe) -> [String] {
        let paths = access.devicePaths()
        guard !paths.isEmpty else {
            return [access.isScripted ? "no cameras found (the V4L2 script lists no devices)"
                        : "no cameras found (no /dev/video* devices)"]
        }
        var out: [String] = []
        var usable: [String] = []
        for path in paths {
            do {
                let found = try access.describe(path: path)
                let bus = probe.usbBus(forVideoDevice: path).map {
                    "\($0.id), \($0.kind), \(Int(($0.bandwidthBytesPerSecond * 8 / 0.8 / 1e6).rounded())) Mbit/s"
                }
                out += found.lines(bus: bus)
                // A webcam's metadata node shares its interface: the line goes with the capture node only.
                if found.formatProblem == nil, let iso = probe.usbIsoStream(forVideoDevice: path) { out.append(Self.isochronousLine(iso)) }
                if let problem = found.formatProblem {
                    out.append("  skipped: \(problem)")
                } else {
                    usable.append(path)
                }
            } catch {
                out += [path, "  skipped: \(error)"]
            }
        }
        out.append(usable.isEmpty ? "no cameras found (\(paths.count) device node(s), none coord can record from)"
                       : "\(usable.count) camera(s) coord can record from: \(usable.joined(separator: ", ")); use --v4l2 NAME=DEVICE")
        return out
    }

    /// One block per GenICam camera found (GigE Vision on `interfaces` only, USB3 Vision: protocol, vendor, model,
    /// serial, Width/Height ranges and steps, rates, formats) or why it was skipped, and a summary line; first a line
    /// saying where GigE Vision cameras were looked for.
    public static func genicamLines(interfaces: [String]) -> [String] {
        let notLookedFor = "GigE Vision not looked for (name the interface its cameras are on with --genicam-interface IFACE)"
        var out = [interfaces.isEmpty ? "GenICam: USB3 Vision only; \(notLookedFor)"
                                      : "GenICam: USB3 Vision, and GigE Vision looked for on \(interfaces.joined(separator: ", ")) only"]
        let devices: [GenICamDevice]
        do {
            devices = try GenICamCamera.devices(interfaces: interfaces)
        } catch {
            return out + ["no GenICam cameras listed: \(error)"]
        }
        guard !devices.isEmpty else {
            return interfaces.isEmpty ? ["no GenICam cameras found; \(notLookedFor)"] : out + ["no GenICam cameras found"]
        }
        var usable: [String] = []
        for device in devices {
            do {
                let found = try GenICamCamera.describe(deviceID: device.deviceID, interfaces: interfaces)
                out += found.lines(device: device)
                if let problem = found.formatProblem(deviceID: device.deviceID) {
                    out.append("  skipped: \(problem)")
                } else {
                    usable.append(device.deviceID)
                }
            } catch {
                out += ["genicam \(device.deviceID)", "  skipped: \(error)"]
            }
        }
        out.append(usable.isEmpty ? "no GenICam cameras coord can record from (\(devices.count) found)"
                       : "\(usable.count) GenICam camera(s) coord can record from: \(usable.joined(separator: ", ")); use --genicam NAME=DEVICE_ID")
        return out
    }
}
