import CoordCore
import Foundation
import Testing
@testable import NodeAgent

/// A throwaway directory standing in for "/": files and symbolic links at paths relative to it.
struct FakeRoot {
    let url: URL

    init(files: [String: String] = [:], links: [String: String] = [:]) throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("root-\(UInt32.random(in: 0...UInt32.max))")
        for (path, text) in files {
            let file = url.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try text.write(to: file, atomically: true, encoding: .utf8)
        }
        for (path, target) in links {
            let link = url.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: link.deletingLastPathComponent(), withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: target)
        }
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    var probe: HostProbe { HostProbe(root: url) }

    func remove() { try? FileManager.default.removeItem(at: url) }
}

/// What a node reads about its host from sysfs and procfs, on fake trees.
@Suite struct HostProbeTests {
    @Test func thermalZonesReadTemperatureAndTripPoints() throws {
        let root = try FakeRoot(files: [
            "sys/class/thermal/thermal_zone0/type": "cpu-thermal\n",
            "sys/class/thermal/thermal_zone0/temp": "45123\n",
            "sys/class/thermal/thermal_zone0/trip_point_0_type": "passive\n",
            "sys/class/thermal/thermal_zone0/trip_point_0_temp": "85000\n",
            "sys/class/thermal/thermal_zone0/trip_point_1_type": "critical\n",
            "sys/class/thermal/thermal_zone0/trip_point_1_temp": "105000\n",
            "sys/class/thermal/thermal_zone0/trip_point_2_type": "passive\n",
            "sys/class/thermal/thermal_zone0/trip_point_2_temp": "80000\n",
            "sys/class/thermal/thermal_zone0/trip_point_3_type": "active\n",
            "sys/class/thermal/thermal_zone0/trip_point_3_temp": "60000\n",
            // Numbered after zone 3 although it sorts before it as text.
            "sys/class/thermal/thermal_zone10/type": "x86_pkg_temp\n",
            "sys/class/thermal/thermal_zone10/temp": "50000\n",
            "sys/class/thermal/thermal_zone10/trip_point_0_type": "passive\n",
            "sys/class/thermal/thermal_zone10/trip_point_0_temp": "lots\n",
            "sys/class/thermal/thermal_zone3/type": "gpu\n",
            "sys/class/thermal/thermal_zone3/temp": "-5000\n",
            "sys/class/thermal/thermal_zone3/trip_point_0_type": "critical\n",
            "sys/class/thermal/thermal_zone3/trip_point_0_temp": "95000\n",
            // No temperature, a garbled one: skipped.
            "sys/class/thermal/thermal_zone1/type": "acpitz\n",
            "sys/class/thermal/thermal_zone2/type": "battery\n",
            "sys/class/thermal/thermal_zone2/temp": "warm\n",
            "sys/class/thermal/cooling_device0/type": "Processor\n",
        ])
        defer { root.remove() }
        #expect(root.probe.thermalZones() == [
            ThermalZone(name: "cpu-thermal", celsius: 45.123, passiveCelsius: 80, criticalCelsius: 105),
            ThermalZone(name: "gpu", celsius: -5, passiveCelsius: nil, criticalCelsius: 95),
            ThermalZone(name: "x86_pkg_temp", celsius: 50, passiveCelsius: nil, criticalCelsius: nil),
        ])
    }

    @Test func noThermalTreeMeansNoZones() throws {
        let root = try FakeRoot()
        defer { root.remove() }
        #expect(root.probe.thermalZones().isEmpty)
    }

    @Test func cpuListsCountEveryRange() {
        #expect(HostProbe.countCPUs(inRanges: "0-3,6") == 5)
        #expect(HostProbe.countCPUs(inRanges: "0") == 1)
        #expect(HostProbe.countCPUs(inRanges: "0-7,9-10,12") == 11)
        #expect(HostProbe.countCPUs(inRanges: "3-1") == nil)
        #expect(HostProbe.countCPUs(inRanges: "0-") == nil)
        #expect(HostProbe.countCPUs(inRanges: "zero") == nil)
        #expect(HostProbe.countCPUs(inRanges: "") == nil)
    }

    @Test func cpuCountReadsOnlineThenCpuinfoThenTheProcess() throws {
        let online = try FakeRoot(files: ["sys/devices/system/cpu/online": "0-3,6\n",
                                          "proc/cpuinfo": "processor\t: 0\n"])
        defer { online.remove() }
        #expect(online.probe.cpuCount() == 5)

        let cpuinfo = try FakeRoot(files: [
            "sys/devices/system/cpu/online": "garbage\n",
            "proc/cpuinfo": "processor\t: 0\nmodel name\t: X\n\nprocessor\t: 1\nmodel name\t: X\n\nprocessor\t: 2\n",
        ])
        defer { cpuinfo.remove() }
        #expect(cpuinfo.probe.cpuCount() == 3)

        let empty = try FakeRoot()
        defer { empty.remove() }
        #expect(empty.probe.cpuCount() == ProcessInfo.processInfo.activeProcessorCount)
    }

    @Test func loadIsPerCPU() throws {
        let root = try FakeRoot(files: ["sys/devices/system/cpu/online": "0-3\n", "proc/loadavg": "3.00 1.50 0.75 2/345 6789\n"])
        defer { root.remove() }
        #expect(root.probe.cpuLoad() == 0.75)

        let garbled = try FakeRoot(files: ["proc/loadavg": "busy\n"])
        defer { garbled.remove() }
        #expect(garbled.probe.cpuLoad() == 0)

        let missing = try FakeRoot()
        defer { missing.remove() }
        #expect(missing.probe.cpuLoad() == 0)
    }

    @Test func hostIDIsMachineAndBoot() throws {
        let root = try FakeRoot(files: ["etc/machine-id": "0123abcd\n",
                                        "proc/sys/kernel/random/boot_id": "5f1e-77\n"])
        defer { root.remove() }
        #expect(root.probe.hostID() == "0123abcd:5f1e-77")

        let missing = try FakeRoot()
        defer { missing.remove() }
        #expect(missing.probe.hostID() == ProcessInfo.processInfo.hostName)
    }

    static let controller = "sys/devices/pci0000:00/0000:00:14.0"

    @Test func aUSBCameraSitsOnItsRootHubsBus() throws {
        let root = try FakeRoot(files: [
            "\(Self.controller)/usb1/busnum": "1\n",
            "\(Self.controller)/usb1/speed": "480\n",
            "\(Self.controller)/usb1/1-1/busnum": "1\n",
            "\(Self.controller)/usb1/1-1/speed": "480\n",
            "\(Self.controller)/usb1/1-1/1-1:1.0/bInterfaceClass": "0e\n",
        ], links: [
            "sys/class/video4linux/video0/device": "../../../devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0",
            "sys/bus/usb/devices/usb1": "../../../devices/pci0000:00/0000:00:14.0/usb1",
        ])
        defer { root.remove() }
        let bus = try #require(root.probe.usbBus(forVideoDevice: "/dev/video0"))
        #expect(bus == Bus(id: "usb1", kind: "usb2", bandwidthBytesPerSecond: 48e6))
    }

    @Test func theRootHubsSpeedIsTheBusRate() throws {
        // A USB 2 camera on a USB 3 root hub's bus, laid out as real sysfs is: the class entry is itself a link
        // and `device` is relative to where it really lives; an absolute link points into the fake root.
        let root = try FakeRoot(files: [
            "\(Self.controller)/usb2/speed": "5000\n",
            "\(Self.controller)/usb2/2-3/busnum": "2\n",
            "\(Self.controller)/usb2/2-3/speed": "480\n",
            "\(Self.controller)/usb2/2-3/2-3:1.0/video4linux/video4/name": "Camera\n",
        ], links: [
            "sys/class/video4linux/video4": "../../devices/pci0000:00/0000:00:14.0/usb2/2-3/2-3:1.0/video4linux/video4",
            "\(Self.controller)/usb2/2-3/2-3:1.0/video4linux/video4/device": "../../../2-3:1.0",
            "sys/bus/usb/devices/usb2": "/\(Self.controller)/usb2",
        ])
        defer { root.remove() }
        let bus = try #require(root.probe.usbBus(forVideoDevice: "/dev/video4"))
        #expect(bus == Bus(id: "usb2", kind: "usb3", bandwidthBytesPerSecond: 500e6))
    }

    @Test func aCameraNotOnUSBHasNoUSBBus() throws {
        let root = try FakeRoot(files: [
            "sys/devices/platform/fe800000.csi/of_node/compatible": "brcm,bcm2835-unicam\n",
            // Garbled: a bus number that is not a number.
            "\(Self.controller)/usb3/3-1/busnum": "three\n",
            "\(Self.controller)/usb3/3-1/speed": "480\n",
            "\(Self.controller)/usb3/3-1/3-1:1.0/bInterfaceClass": "0e\n",
        ], links: [
            "sys/class/video4linux/video0/device": "../../../devices/platform/fe800000.csi",
            "sys/class/video4linux/video1/device": "../../../devices/pci0000:00/0000:00:14.0/usb3/3-1/3-1:1.0",
            // A link that climbs out of the tree stays inside it.
            "sys/class/video4linux/video2/device": "../../../../../../../../../../sys",
        ])
        defer { root.remove() }
        #expect(root.probe.usbBus(forVideoDevice: "/dev/video0") == nil)
        #expect(root.probe.usbBus(forVideoDevice: "/dev/video1") == nil)
        #expect(root.probe.usbBus(forVideoDevice: "/dev/video2") == nil)
        #expect(root.probe.usbBus(forVideoDevice: "/dev/video9") == nil)
    }

    @Test func resolvingStaysUnderTheRoot() throws {
        let root = try FakeRoot(files: ["etc/machine-id": "fake\n"], links: ["a/up": "../../../../etc", "a/abs": "/etc"])
        defer { root.remove() }
        #expect(root.probe.resolve("a/up/machine-id") == ["etc", "machine-id"])
        #expect(root.probe.resolve("a/abs/machine-id") == ["etc", "machine-id"])
        #expect(root.probe.read("a/abs/machine-id") == "fake")
    }

    @Test func aLinkLoopGivesNothing() throws {
        let root = try FakeRoot(links: ["a": "b", "b": "a"])
        defer { root.remove() }
        #expect(root.probe.resolve("a/x") == nil)
        #expect(root.probe.read("a") == nil)
    }

    @Test func diskOfATemporaryDirectory() throws {
        let staging = try FakeRoot()
        defer { staging.remove() }
        let probe = HostProbe(root: URL(fileURLWithPath: "/"))
        let disk = probe.disk(staging: staging.url)
        #expect(disk.free > 0)
        #expect(disk.total >= disk.free)
        #expect(disk.id.hasPrefix(probe.hostID() + ":"))
        #expect(disk.id.split(separator: ":").count >= 3)
        // A staging directory not made yet lies on its parent's filesystem.
        #expect(probe.disk(staging: staging.url.appendingPathComponent("later/still-later")).id == disk.id)
    }

    @Test func resourcesAssembleTheProbe() throws {
        let root = try FakeRoot(files: [
            "sys/devices/system/cpu/online": "0-1\n", "proc/loadavg": "1.0 0 0 1/1 1\n",
            "etc/machine-id": "m\n", "proc/sys/kernel/random/boot_id": "b\n",
            "sys/class/thermal/thermal_zone0/temp": "40000\n",
        ])
        defer { root.remove() }
        let bus = Bus(id: "usb1", kind: "usb2", bandwidthBytesPerSecond: 48e6)
        let resources = root.probe.resources(staging: root.url, calibration: nil, buses: [bus])
        #expect(resources.buses == [bus])
        #expect(resources.cpuCount == 2)
        #expect(resources.cpuLoad == 0.5)
        #expect(resources.hostID == "m:b")
        #expect(resources.diskID.hasPrefix("m:b:"))
        #expect(resources.freeDiskBytes > 0)
        #expect(resources.thermalZones == [ThermalZone(name: "thermal_zone0", celsius: 40)])
    }
}

// Nested so that `--filter HostProbe` runs them with the probe.
extension HostProbeTests {
    /// The calibration file and the measurement that fills it. Serialized: a test checks that no scratch file of
    /// this process is left in /dev/shm, which another calibration running beside it would still be writing.
    @Suite(.serialized) struct CalibrationTests {
        let sample = Calibration(diskWriteBytesPerSecond: 812e6,
                                 encode: ["mjpeg": .init(pixelsPerSecond: 180e6, bytesPerPixel: 0.21),
                                          "h264": .init(pixelsPerSecond: 90e6, bytesPerPixel: 0.05)],
                                 heatingCelsiusPerSecond: 0.4, cpuCount: 4, measuredAt: "2025-11-21T20:00:00Z")

        @Test func saveAndLoadRoundTrip() throws {
            let dir = try FakeRoot()
            defer { dir.remove() }
            let file = dir.url.appendingPathComponent("calibration.json")
            try sample.save(to: file)
            #expect(try Calibration.load(from: file) == sample)
            let text = try String(contentsOf: file, encoding: .utf8)
            // Pretty and sorted, with the file's own key names.
            #expect(text.contains("\n  \"cpu_count\" : 4"))
            let keys = ["cpu_count", "disk_write_bytes_per_s", "encode", "format", "heating_c_per_s", "measured_at"]
            let positions = keys.compactMap { text.range(of: "\"\($0)\"")?.lowerBound }
            #expect(positions.count == keys.count && positions == positions.sorted())
            // Saved again over the old file; no temporary file is left beside it.
            var changed = sample
            changed.cpuCount = 8
            try changed.save(to: file)
            #expect(try Calibration.load(from: file).cpuCount == 8)
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir.url.path) == ["calibration.json"])
        }

        @Test func aWrongFormatIsRefused() throws {
            let dir = try FakeRoot(files: [
                "v2.json": #"{"format": "coord.calibration/2", "disk_write_bytes_per_s": 1, "encode": {}, "cpu_count": 1, "measured_at": ""}"#,
                "none.json": #"{"disk_write_bytes_per_s": 1}"#,
                "broken.json": #"{"format": "coord.calibration/1", "#,
                "short.json": #"{"format": "coord.calibration/1", "encode": {}, "cpu_count": 1, "measured_at": ""}"#,
            ])
            defer { dir.remove() }
            for (name, words) in [("v2.json", "coord.calibration/2"), ("none.json", "missing"), ("broken.json", "not a JSON object"),
                                  ("short.json", "disk_write_bytes_per_s"), ("absent.json", "read")] {
                let file = dir.url.appendingPathComponent(name)
                let error = #expect(throws: CalibrationError.self) { try Calibration.load(from: file) }
                let sentence = error?.description ?? ""
                #expect(sentence.contains(file.path), "\(sentence)")
                #expect(sentence.contains(words), "\(sentence)")
                #expect(sentence.hasSuffix(".") && !sentence.dropLast().contains(". "), "\(sentence)")
            }
        }

        @Test func savingIntoAMissingDirectoryNamesTheFile() throws {
            let dir = try FakeRoot()
            defer { dir.remove() }
            let file = dir.url.appendingPathComponent("no/such/calibration.json")
            let error = #expect(throws: CalibrationError.self) { try sample.save(to: file) }
            #expect(error?.description.contains(file.path) == true)
        }

        @Test func measuringGivesAFigureForTheDiskAndEveryCodec() throws {
            let staging = try FakeRoot()
            defer { staging.remove() }
            let probe = HostProbe(root: URL(fileURLWithPath: "/"))
            var lines: [String] = []
            let calibration = try Calibrator.measure(staging: staging.url, probe: probe, seconds: 0.2) { lines.append($0) }
            #expect(calibration.diskWriteBytesPerSecond > 0)
            #expect(Set(calibration.encode.keys) == ["mjpeg", "ffv1", "h264"])
            for (codec, rate) in calibration.encode {
                #expect(rate.pixelsPerSecond > 0, "\(codec)")
                #expect(rate.bytesPerPixel > 0 && rate.bytesPerPixel < 3, "\(codec)")
            }
            // Lossless costs more bytes than the lossy codecs at their recording quality.
            #expect(calibration.encode["ffv1"]!.bytesPerPixel > calibration.encode["h264"]!.bytesPerPixel)
            #expect(calibration.cpuCount == probe.cpuCount())
            #expect(calibration.format == Calibration.formatV1)
            #expect(lines.count == 4)
            #expect(lines.first?.hasPrefix("disk write ") == true && lines.first?.hasSuffix(" MB/s") == true)
            #expect(lines.dropFirst().allSatisfy { $0.contains(" encode ") && $0.hasSuffix(" bytes/px)") })
            // Every test file is gone: from the staging directory and from RAM.
            #expect(try FileManager.default.contentsOfDirectory(atPath: staging.url.path).isEmpty)
            let shm = (try? FileManager.default.contentsOfDirectory(atPath: "/dev/shm")) ?? []
            #expect(!shm.contains { $0.hasPrefix("coord-calibrate-\(getpid())-") })
        }

        @Test func theEncodeLineSaysWhatWasMeasuredNotZero() {
            // Issue 27: h264 printed "(0.00 bytes/px)".
            let h264 = Calibrator.encodeLine("h264", .init(pixelsPerSecond: 31.2e6, bytesPerPixel: 0.00283))
            #expect(h264 == "h264 encode 31 Mpx/s, 2.6 KB a 1280x720 frame (0.0028 bytes/px)")
            #expect(Calibrator.encodeLine("ffv1", .init(pixelsPerSecond: 9e6, bytesPerPixel: 1.234)) == "ffv1 encode 9 Mpx/s, 1.1 MB a 1280x720 frame (1.23 bytes/px)")
            #expect(Calibrator.encodeLine("mjpeg", .init(pixelsPerSecond: 50e6, bytesPerPixel: 0.0001)) == "mjpeg encode 50 Mpx/s, 92 bytes a 1280x720 frame (0.00010 bytes/px)")
        }

        @Test func calibrateMakesTheStagingDirectoryAndSaves() throws {
            let dir = try FakeRoot()
            defer { dir.remove() }
            let staging = dir.url.appendingPathComponent("new/staging")
            let file = staging.appendingPathComponent("calibration.json")
            let calibration = try Calibrator.calibrate(staging: staging, file: file, probe: HostProbe(root: dir.url), seconds: 0.05) { _ in }
            #expect(try Calibration.load(from: file) == calibration)
            // No thermal zones under this root: no heating figure.
            #expect(calibration.heatingCelsiusPerSecond == nil)
        }

        @Test func aStagingPathThatIsAFileIsNamed() throws {
            let dir = try FakeRoot(files: ["occupied": "x"])
            defer { dir.remove() }
            let staging = dir.url.appendingPathComponent("occupied")
            let error = #expect(throws: CalibrationError.self) {
                try Calibrator.calibrate(staging: staging, file: staging.appendingPathComponent("c.json"), probe: HostProbe(root: dir.url),
                                         seconds: 0.05) { _ in }
            }
            #expect(error?.description.contains(staging.path) == true)
        }
    }

}

extension HostProbeTests {
    /// `--synthetic NAME[@BUS],…` and `--synthetic-bus ID=MBITS`.
    @Suite struct SyntheticCameraSpecTests {
        @Test func camerasOnDeclaredBuses() throws {
            let spec = try SyntheticCameraSpec.parse(synthetic: "cam0@usb1, cam1 ,cam2@usb1,,cam3@slow", buses: ["usb1=5000", "slow=480"])
            #expect(spec.cameras == ["cam0", "cam1", "cam2", "cam3"])
            #expect(spec.cameraBus == ["cam0": "usb1", "cam2": "usb1", "cam3": "slow"])
            #expect(spec.buses == [Bus(id: "usb1", kind: "usb3", bandwidthBytesPerSecond: 500e6),
                                   Bus(id: "slow", kind: "usb2", bandwidthBytesPerSecond: 48e6)])
        }

        @Test func plainNamesNeedNoBus() throws {
            let spec = try SyntheticCameraSpec.parse(synthetic: "cam0,cam1", buses: [])
            #expect(spec.cameras == ["cam0", "cam1"])
            #expect(spec.cameraBus.isEmpty && spec.buses.isEmpty)
        }

        @Test(arguments: [
            ("cam0@usb9", ["usb1=5000"], "cam0@usb9"),
            ("cam0@", ["usb1=5000"], "cam0@"),
            ("@usb1", ["usb1=5000"], "@usb1"),
            ("cam0@usb1@usb1", ["usb1=5000"], "cam0@usb1@usb1"),
            ("cam0", ["usb1"], "usb1"),
            ("cam0", ["usb1=0"], "usb1=0"),
            ("cam0", ["usb1=-480"], "usb1=-480"),
            ("cam0", ["usb1=fast"], "usb1=fast"),
            ("cam0", ["=480"], "=480"),
            ("cam0", ["usb1=480", "usb1=5000"], "usb1=5000"),
        ])
        func badEntriesAreNamed(synthetic: String, buses: [String], entry: String) {
            let error = #expect(throws: SyntheticCameraSpecError.self) { try SyntheticCameraSpec.parse(synthetic: synthetic, buses: buses) }
            #expect(error?.entry == entry)
            #expect(error?.description.contains("\"\(entry)\"") == true)
        }
    }
}
