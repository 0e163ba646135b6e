import Testing
@testable import CoordCore

// Fixtures: a camera offering one pixel format at a ladder of sizes, and nodes with generous resources unless a
// test narrows one, so each test's limiting resource is the one it is about.

private let ladder = [(1920, 1080), (1280, 720), (960, 540), (800, 500), (640, 480), (640, 360), (320, 180)]

private func formats(_ pixelFormat: String) -> [CameraFormat] {
    ladder.map { w, h in
        CameraFormat(pixelFormat: pixelFormat, width: w, height: h,
                     minFramePeriodMicroseconds: w >= 1920 ? 33_333 : 16_667, maxFramePeriodMicroseconds: 1_000_000)
    }
}

private func cam(_ node: String, _ name: String, _ width: Int = 640, _ height: Int = 480, fps: Int = 30,
                 codec: VideoCodec = .mjpeg, pixelFormat: String = "yuyv422", bus: String = "", priority: Int = 0,
                 recordEvery: Int = 1, offered: [CameraFormat]? = nil) -> PlannedCamera {
    PlannedCamera(node: node,
                  settings: CameraSettings(camera: name, ordinal: 0, width: width, height: height, fps: fps, codec: codec,
                                           recordEvery: recordEvery),
                  capabilities: CameraCapabilities(name: name, source: "v4l2", formats: offered ?? formats(pixelFormat),
                                                   codecs: [.mjpeg, .ffv1, .h264], bus: bus),
                  priority: priority)
}

private func calibration(disk: Double = 1e10, mjpeg: Double = 1e10, ffv1: Double = 1e10, h264: Double = 1e10,
                         mjpegBytes: Double = 0.3, ffv1Bytes: Double = 1.0, h264Bytes: Double = 0.05,
                         heating: Double? = nil) -> Calibration {
    Calibration(diskWriteBytesPerSecond: disk,
                encode: ["mjpeg": .init(pixelsPerSecond: mjpeg, bytesPerPixel: mjpegBytes),
                         "ffv1": .init(pixelsPerSecond: ffv1, bytesPerPixel: ffv1Bytes),
                         "h264": .init(pixelsPerSecond: h264, bytesPerPixel: h264Bytes)],
                heatingCelsiusPerSecond: heating, cpuCount: 4, measuredAt: "2026-01-01T00:00:00Z")
}

private func node(_ name: String, buses: [Bus] = [], calibration cal: Calibration? = calibration(), free: UInt64 = 1 << 40,
                  diskID: String = "", hostID: String = "", zones: [ThermalZone] = [], cameras: [PlannedCamera]) -> PlannedNode {
    PlannedNode(name: name, resources: NodeResources(buses: buses, calibration: cal, freeDiskBytes: free, diskTotalBytes: free,
                                                     diskID: diskID, cpuCount: 4, thermalZones: zones, hostID: hostID),
                cameras: cameras)
}

private let usb2 = Bus.usb(number: 1, megabitsPerSecond: 480)  // 48 MB/s usable

private func load(_ budget: RigBudget, _ node: String, _ kind: ResourceLoad.Kind) -> ResourceLoad? {
    budget.nodes.first { $0.node == node }?.loads.first { $0.kind == kind }
}

private func close(_ a: Double, _ b: Double) -> Bool { abs(a - b) <= 1e-9 * max(1, abs(b)) }

@Suite struct BudgetCostTests {
    /// Three 640x480 YUYV streams at 30 fps: 18.4 MB/s each, 55.3 MB/s on a USB 2 bus carrying 48 MB/s.
    let threeOnOneBus = node("node-1", buses: [usb2], cameras: (0..<3).map { cam("node-1", "cam\($0)", bus: "usb1") })

    @Test func busOverBudgetIsTheLimitingLoad() throws {
        let budget = Budget.evaluate([threeOnOneBus])
        let bus = try #require(load(budget, "node-1", .bus))
        #expect(bus.resource == "bus usb1 (usb2)")
        #expect(close(bus.demand, 3 * 640 * 480 * 30 * 2))
        #expect(close(bus.capacity, 48e6))
        #expect(close(bus.cost, 3 * 640 * 480 * 30 * 2 / 48e6))
        #expect(bus.cameras == ["node-1/cam0", "node-1/cam1", "node-1/cam2"])
        #expect(budget.cost == bus.cost && budget.limitingNode == "node-1" && budget.limitingLoad == bus)
        #expect(!budget.fits)
    }

    @Test func refusalNamesNodeResourceAndFigures() throws {
        let refusal = try #require(Budget.evaluate([threeOnOneBus]).refusal())
        #expect(refusal == "node node-1 is over budget: bus usb1 (usb2) needs 55.3 MB/s where it carries 48.0 MB/s, a hardware cost of 1.15 (it must stay below 1.0).")
    }

    @Test func aPlanUnderBudgetIsNotRefused() {
        let two = node("node-1", buses: [usb2], cameras: (0..<2).map { cam("node-1", "cam\($0)", bus: "usb1") })
        let budget = Budget.evaluate([two])
        #expect(budget.cost < 1 && budget.fits)
        #expect(budget.refusal() == nil)
        #expect(budget.conflicts.isEmpty)
    }

    @Test func conflictSaysHowManyFit() {
        #expect(Budget.evaluate([threeOnOneBus]).conflicts == [
            "node-1: cam0, cam1 and cam2 cannot run together at these settings: they need 55.3 MB/s on bus usb1 (usb2), which carries 48.0 MB/s; at most 2 of them fit.",
        ])
    }

    @Test func aCameraOverBudgetAloneIsSaidSo() {
        let one = node("node-1", buses: [Bus(id: "csi0", kind: "csi", bandwidthBytesPerSecond: 10e6)],
                       cameras: [cam("node-1", "cam0", bus: "csi0")])
        #expect(Budget.evaluate([one]).conflicts == ["node-1/cam0 alone needs 18.4 MB/s on bus csi0 (csi), which carries 10.0 MB/s."])
    }

    @Test func camerasOnDifferentBusesDoNotShare() {
        let n = node("node-1", buses: [usb2, Bus.usb(number: 2, megabitsPerSecond: 480)],
                     cameras: [cam("node-1", "cam0", bus: "usb1"), cam("node-1", "cam1", bus: "usb2"), cam("node-1", "cam2", bus: "usb2"),
                               cam("node-1", "cam3")])
        let loads = Budget.evaluate([n]).nodes[0].loads.filter { $0.kind == .bus }
        #expect(loads.map(\.resource) == ["bus usb1 (usb2)", "bus usb2 (usb2)"])
        #expect(loads.map(\.cameras) == [["node-1/cam0"], ["node-1/cam1", "node-1/cam2"]])
    }

    @Test func anUnreportedBusIsANoteNotALoad() {
        let n = node("node-1", cameras: [cam("node-1", "cam0", bus: "usb9")])
        let budget = Budget.evaluate([n])
        #expect(budget.nodes[0].loads.allSatisfy { $0.kind != .bus })
        #expect(budget.notes.contains("node-1/cam0 is on bus usb9, which node node-1 did not report: its bus load is not counted."))
    }

    @Test func encodingOverBudgetNamesTheCodecAndFigures() throws {
        // 1920x1080 at 30 fps is 62.2 Mpx/s, 93.3 with the pipeline's overhead; this node encodes 20 Mpx/s of MJPEG.
        let k = Budget.recordingOverhead
        #expect(k == 1.5)
        let n = node("node-1", calibration: calibration(mjpeg: 20e6), cameras: [cam("node-1", "cam0", 1920, 1080)])
        let budget = Budget.evaluate([n])
        let encoding = try #require(load(budget, "node-1", .encoding))
        #expect(close(encoding.demand, k * 1920 * 1080 * 30) && close(encoding.capacity, 20e6))
        #expect(close(encoding.cost, k * 1920 * 1080 * 30 / 20e6))
        #expect(encoding.detail == "mjpeg, ×1.50 for the pipeline")
        #expect(budget.refusal() == "node node-1 is over budget: encoding needs 93.3 Mpx/s (mjpeg, ×1.50 for the pipeline) where its calibration measured 20.0 Mpx/s, a hardware cost of 4.67 (it must stay below 1.0).")
    }

    @Test func encodingSumsEachCodecAgainstItsOwnRate() throws {
        // 9.2 Mpx/s of MJPEG at 20 Mpx/s and 9.2 Mpx/s of FFV1 at 10 Mpx/s: 0.46 + 0.92.
        let n = node("node-1", calibration: calibration(mjpeg: 20e6, ffv1: 10e6),
                     cameras: [cam("node-1", "cam0"), cam("node-1", "cam1", codec: .ffv1)])
        let encoding = try #require(load(Budget.evaluate([n]), "node-1", .encoding))
        let px = 640.0 * 480 * 30 * Budget.recordingOverhead
        #expect(close(encoding.cost, px / 20e6 + px / 10e6))
        #expect(close(encoding.demand, 2 * px) && close(encoding.capacity, 2 * px / encoding.cost))
        #expect(encoding.detail == "mjpeg + ffv1, ×1.50 for the pipeline")
        #expect(close(encoding.shares[0], px / 20e6) && close(encoding.shares[1], px / 10e6))
    }

    @Test func aFrameRateCapLowersBusAndEncoding() throws {
        let full = Budget.evaluate([node("n", buses: [usb2], cameras: [cam("n", "cam0", bus: "usb1")])])
        let capped = Budget.evaluate([node("n", buses: [usb2], cameras: [cam("n", "cam0", bus: "usb1", recordEvery: 3)])])
        #expect(try close(#require(load(capped, "n", .bus)).demand, #require(load(full, "n", .bus)).demand / 3))
        #expect(try close(#require(load(capped, "n", .encoding)).demand, #require(load(full, "n", .encoding)).demand / 3))
    }

    @Test func diskOverBudget() throws {
        // FFV1 at 1 byte per pixel: 1280x720 at 30 fps writes 27.6 MB/s to a disk that takes 20 MB/s.
        let n = node("node-1", calibration: calibration(disk: 20e6), cameras: [cam("node-1", "cam0", 1280, 720, codec: .ffv1)])
        let budget = Budget.evaluate([n])
        let disk = try #require(load(budget, "node-1", .disk))
        #expect(disk.resource == "disk write")
        #expect(close(disk.demand, 1280 * 720 * 30) && close(disk.capacity, 20e6))
        #expect(budget.limitingLoad?.kind == .disk)
        #expect(budget.refusal() == "node node-1 is over budget: disk write needs 27.6 MB/s where its calibration measured 20.0 MB/s, a hardware cost of 1.38 (it must stay below 1.0).")
    }

    @Test func eachMicrophoneAddsItsPCMToTheDiskWrite() throws {
        var n = node("node-1", calibration: calibration(disk: 20e6), cameras: [cam("node-1", "cam0", 1280, 720, codec: .ffv1)])
        let without = try #require(load(Budget.evaluate([n]), "node-1", .disk))
        n.microphones = ["mic0", "mic1"]
        let with = try #require(load(Budget.evaluate([n]), "node-1", .disk))
        #expect(close(with.demand - without.demand, 2 * PlannedNode.microphoneBytesPerSecond))
        #expect(with.cameras.suffix(2) == ["node-1/mic0", "node-1/mic1"])
    }

    @Test func heldGroupsCostAnIntraCodecItsWholePacketButH264AlmostNothing() throws {
        let ffv1 = Budget.evaluate([node("n", cameras: [cam("n", "cam0", codec: .ffv1, recordEvery: 2)])])
        #expect(try close(#require(load(ffv1, "n", .disk)).demand, 640 * 480 * 30 * 1.0))
        let h264 = Budget.evaluate([node("n", cameras: [cam("n", "cam0", codec: .h264, recordEvery: 2)])])
        #expect(try close(#require(load(h264, "n", .disk)).demand, 640 * 480 * 15 * 0.05))
    }

    @Test func mjpegPassthroughCostsNoEncoding() throws {
        let passthrough = cam("node-1", "cam0", 1280, 720, codec: .mjpeg, pixelFormat: "mjpeg", bus: "usb1")
        let budget = Budget.evaluate([node("node-1", buses: [usb2], calibration: calibration(mjpeg: 1e6), cameras: [passthrough])])
        #expect(load(budget, "node-1", .encoding) == nil)
        // The camera's own packets travel the bus and land on disk: 0.5 bytes per pixel.
        #expect(try close(#require(load(budget, "node-1", .bus)).demand, 1280 * 720 * 30 * 0.5))
        #expect(try close(#require(load(budget, "node-1", .disk)).demand, 1280 * 720 * 30 * 0.5))
        #expect(budget.cost < 1)
        // The same stream re-encoded to FFV1 is encoded in full.
        var reencoded = passthrough
        reencoded.settings.codec = .ffv1
        let other = Budget.evaluate([node("node-1", buses: [usb2], calibration: calibration(ffv1: 1e6), cameras: [reencoded])])
        #expect(try close(#require(load(other, "node-1", .encoding)).demand, 1280 * 720 * 30 * Budget.recordingOverhead))
    }

    @Test func aCameraOfferingMJPGAndYUYVIsCostedOnTheStreamTheNodeOpens() throws {
        // A UVC webcam lists MJPG first; an mjpeg take passes it through, any other codec opens YUYV (2 bytes/px).
        let offered = ["mjpeg", "yuyv422"].map {
            CameraFormat(pixelFormat: $0, width: 1280, height: 720, minFramePeriodMicroseconds: 33_333, maxFramePeriodMicroseconds: 200_000)
        }
        var webcam = cam("node-1", "cam0", 1280, 720, codec: .mjpeg, bus: "usb1", offered: offered)
        let cal = calibration(mjpeg: 1e9, ffv1: 1e9)
        let passthrough = Budget.evaluate([node("node-1", buses: [usb2], calibration: cal, cameras: [webcam])])
        #expect(try close(#require(load(passthrough, "node-1", .bus)).demand, 1280 * 720 * 30 * 0.5))
        webcam.settings.codec = .ffv1
        let raw = Budget.evaluate([node("node-1", buses: [usb2], calibration: cal, cameras: [webcam])])
        #expect(try close(#require(load(raw, "node-1", .bus)).demand, 1280 * 720 * 30 * 2))
    }

    @Test func nodesOnOneHostPoolEncodingAndOnOneDiskPoolDiskWrite() throws {
        // Each node's 9.2 Mpx/s (13.8 with the overhead) alone is 0.92 of 15 Mpx/s; together 1.84 of the one host.
        let cal = calibration(disk: 5e6, mjpeg: 15e6)
        let a = node("node-1", calibration: cal, diskID: "sda1", hostID: "box", cameras: [cam("node-1", "cam0")])
        let b = node("node-2", calibration: cal, diskID: "sda1", hostID: "box", cameras: [cam("node-2", "cam0")])
        let budget = Budget.evaluate([a, b])
        let px = 640.0 * 480 * 30
        let k = Budget.recordingOverhead
        for (name, other) in [("node-1", "node-2"), ("node-2", "node-1")] {
            let encoding = try #require(load(budget, name, .encoding))
            #expect(close(encoding.cost, 2 * k * px / 15e6) && close(encoding.demand, 2 * k * px))
            #expect(encoding.cameras == ["node-1/cam0", "node-2/cam0"] && encoding.sharedWith == [other])
            let disk = try #require(load(budget, name, .disk))
            #expect(close(disk.demand, 2 * px * 0.3) && close(disk.capacity, 5e6) && disk.sharedWith == [other])
        }
        #expect(budget.refusal()?.contains("shared with node-2") == true, "\(budget.refusal() ?? "")")
        // One conflict per pooled resource, not one per node sharing it.
        #expect(budget.conflicts.count == 2)
        #expect(budget.conflicts.contains { $0.hasPrefix("node-1 and node-2: node-1/cam0 and node-2/cam0 cannot run together") && $0.contains("encoding") })

        // Different hosts and disks, or ids left empty, pool nothing.
        for (hostA, hostB) in [("box", "other"), ("", "")] {
            let apart = Budget.evaluate([node("node-1", calibration: cal, diskID: hostA, hostID: hostA, cameras: [cam("node-1", "cam0")]),
                                         node("node-2", calibration: cal, diskID: hostB, hostID: hostB, cameras: [cam("node-2", "cam0")])])
            let encoding = try #require(load(apart, "node-1", .encoding))
            #expect(close(encoding.cost, k * px / 15e6) && encoding.sharedWith.isEmpty && encoding.cameras == ["node-1/cam0"])
        }
    }

    @Test func anUncalibratedNodeCountsItsBusesOnlyAndSaysSo() throws {
        let n = node("node-3", buses: [usb2], calibration: nil, cameras: [cam("node-3", "cam0", bus: "usb1")])
        let budget = Budget.evaluate([n])
        #expect(budget.nodes[0].loads.map(\.kind) == [.bus])
        #expect(budget.nodes[0].notes == ["node node-3 is not calibrated: its encoding and disk write are not counted (run coord-node calibrate on it)."])
        #expect(budget.nodes[0].forecast.longestSeconds == nil)
        // It stays out of a calibrated neighbour's pools: nothing says what its machine can do.
        let neighbour = node("node-4", hostID: "box", cameras: [cam("node-4", "cam0")])
        var same = n
        same.resources.hostID = "box"
        #expect(try #require(load(Budget.evaluate([same, neighbour]), "node-4", .encoding)).cameras == ["node-4/cam0"])
    }

    @Test func aCodecTheCalibrationLacksIsANote() {
        var cal = calibration()
        cal.encode["h264"] = nil
        let budget = Budget.evaluate([node("node-1", calibration: cal, cameras: [cam("node-1", "cam0", codec: .h264)])])
        #expect(budget.nodes[0].loads.isEmpty)
        #expect(budget.notes == ["node node-1's calibration has no figure for codec h264: the encoding and disk write of node-1/cam0 are not counted."])
    }

    @Test func noCamerasCostNothing() {
        let budget = Budget.evaluate([node("node-1", cameras: [])])
        #expect(budget.cost == 0 && budget.limitingNode == nil && budget.refusal() == nil && budget.nodes[0].loads.isEmpty)
        #expect(Budget.evaluate([]).cost == 0)
    }

    @Test func tableIsAlignedInHumanUnits() {
        let budget = Budget.evaluate([threeOnOneBus, node("node-2", calibration: nil, cameras: [cam("node-2", "cam0")])])
        let lines = budget.table()
        #expect(lines[0].hasPrefix("node    resource"))
        let rows = lines.filter { !$0.hasPrefix("note: ") }
        // Every row starts its second column where the header does.
        let column = lines[0].distance(from: lines[0].startIndex, to: lines[0].range(of: "resource")!.lowerBound)
        for row in rows {
            let chars = Array(row)
            #expect(chars.count > column && chars[column] != " " && chars[column - 1] == " ", "\(row)")
            #expect(!row.hasSuffix(" "))
        }
        #expect(rows.contains { $0.contains("bus usb1 (usb2)") && $0.contains("55.3 MB/s") && $0.contains("48.0 MB/s") && $0.contains("1.15") && $0.contains("cam0, cam1, cam2") })
        #expect(rows.contains { $0.contains("encoding (mjpeg, ×1.50 for the pipeline)") && $0.contains("Mpx/s") })
        #expect(rows.contains { $0.hasPrefix("node-1") && $0.contains("node cost") && $0.contains("1.15") })
        #expect(rows.contains { $0.hasPrefix("rig") && $0.contains("rig cost") && $0.contains("over budget") })
        #expect(rows.contains { $0.hasPrefix("node-1") && $0.contains("longest take") && $0.contains("h") })
        #expect(rows.contains { $0.hasPrefix("node-2") && $0.contains("longest take") && $0.contains("no limit") })
        #expect(lines.last == "note: node node-2 is not calibrated: its encoding and disk write are not counted (run coord-node calibrate on it).")
    }
}

@Suite struct BudgetForecastTests {
    /// 800x500 at 25 fps in FFV1 at 0.2 bytes per pixel writes 2 MB/s.
    func writer(_ name: String, free: UInt64, diskID: String = "", zones: [ThermalZone] = [], heating: Double? = nil,
                mjpeg: Double = 1e10) -> PlannedNode {
        node(name, calibration: calibration(mjpeg: mjpeg, ffv1: 30e6, ffv1Bytes: 0.2, heating: heating), free: free, diskID: diskID,
             zones: zones, cameras: [cam(name, "cam0", 800, 500, fps: 25, codec: .ffv1)])
    }
    let mib = 1024.0 * 1024

    @Test func diskForecastKeepsTheReserve() throws {
        let free = UInt64(16 * mib + 750 * 2e6)
        let budget = Budget.evaluate([writer("node-2", free: free)])
        let forecast = budget.nodes[0].forecast
        #expect(try close(#require(forecast.longestSeconds), 750))
        #expect(forecast.factor == "disk")
        #expect(forecast.sentence == "node node-2 can record 12 min 30 s: its disk has 1.41 GiB free, less 16.0 MiB kept to finalize its files, and the take writes 2.00 MB/s there.")
        #expect(budget.longestSeconds == forecast.longestSeconds && budget.longestNode == "node-2")
        #expect(budget.forecastSentence == forecast.sentence)
    }

    @Test func nodesOnOneDiskShareItsWriteRate() throws {
        let free = UInt64(16 * mib + 1500 * 2e6)
        let budget = Budget.evaluate([writer("node-1", free: free, diskID: "nvme0"), writer("node-2", free: free, diskID: "nvme0")])
        for n in budget.nodes {
            #expect(try close(#require(n.forecast.longestSeconds), 750))
            #expect(n.forecast.sentence.contains("writes 4.00 MB/s there (with node-"))
        }
    }

    @Test func aDiskAtItsReserveCannotRecord() throws {
        let forecast = Budget.evaluate([writer("node-2", free: UInt64(10 * mib))]).nodes[0].forecast
        #expect(forecast.longestSeconds == 0)
        #expect(forecast.sentence == "node node-2 cannot record at all: its disk has 10.0 MiB free, no more than the 16.0 MiB it keeps to finalize its files.")
    }

    @Test func diskReserveIsSixteenMiBOrThreeSecondsOfWriting() {
        #expect(Budget.diskReserveBytes(writeBytesPerSecond: 0) == 16 * mib)
        #expect(Budget.diskReserveBytes(writeBytesPerSecond: 1e6) == 16 * mib)
        #expect(Budget.diskReserveBytes(writeBytesPerSecond: 100e6) == 300e6)
    }

    @Test func thermalForecastScalesHeatingByEncodingCost() throws {
        // 800x500 at 25 fps is 10 Mpx/s of FFV1 (15 with the overhead) against 30 Mpx/s: cost 0.5, so 0.1 °C/s heats
        // at 0.05 °C/s.
        let zones = [ThermalZone(name: "soc", celsius: 40, passiveCelsius: 95),
                     ThermalZone(name: "cpu-thermal", celsius: 60, passiveCelsius: 80, criticalCelsius: 90),
                     ThermalZone(name: "wifi", celsius: 70)]
        let forecast = Budget.evaluate([writer("node-1", free: 1 << 40, zones: zones, heating: 0.1)]).nodes[0].forecast
        #expect(try close(#require(forecast.longestSeconds), 20 / 0.05))
        #expect(forecast.factor == "thermal")
        #expect(forecast.sentence == "node node-1 can record 6 min 40 s: its thermal zone cpu-thermal is at 60.0 °C, 20.0 °C under its passive trip, and the take's encoding heats it by 0.050 °C/s.")
    }

    @Test func thermalHeatingIsCappedAtTheCalibratedRate() throws {
        // Encoding cost 2 (over budget) still heats no faster than calibration's every-CPU rate.
        var n = writer("node-1", free: 1 << 40, zones: [ThermalZone(name: "cpu", celsius: 60, passiveCelsius: 80)], heating: 0.1)
        n.resources.calibration!.encode["ffv1"]!.pixelsPerSecond = 5e6
        #expect(try close(#require(Budget.evaluate([n]).nodes[0].forecast.longestSeconds), 200))
    }

    @Test func aZoneAtItsPassiveTripCannotRecord() {
        let n = writer("node-1", free: 1 << 40, zones: [ThermalZone(name: "cpu", celsius: 81, passiveCelsius: 80)], heating: 0.1)
        let forecast = Budget.evaluate([n]).nodes[0].forecast
        #expect(forecast.longestSeconds == 0 && forecast.factor == "thermal")
        #expect(forecast.sentence == "node node-1 cannot record at all: its thermal zone cpu is at 81.0 °C, at or above its passive trip of 80.0 °C.")
    }

    @Test func theSoonerOfDiskAndThermalLimits() throws {
        let zones = [ThermalZone(name: "cpu", celsius: 60, passiveCelsius: 80)]
        let n = writer("node-1", free: UInt64(16 * mib + 100 * 2e6), zones: zones, heating: 0.1)  // disk 100 s, thermal 400 s
        let forecast = Budget.evaluate([n]).nodes[0].forecast
        #expect(forecast.factor == "disk")
        #expect(try close(#require(forecast.longestSeconds), 100))
    }

    @Test func noForecastWithoutAnythingToJudgeBy() {
        // Thermal needs both the calibrated heating and a passive trip; an empty node and an uncalibrated one say nothing.
        let noHeating = writer("node-1", free: 1 << 60, zones: [ThermalZone(name: "cpu", celsius: 60, passiveCelsius: 80)])
        let noTrip = writer("node-2", free: 1 << 60, zones: [ThermalZone(name: "cpu", celsius: 60, criticalCelsius: 100)], heating: 0.1)
        let budget = Budget.evaluate([noHeating, noTrip])
        #expect(budget.nodes.allSatisfy { $0.forecast.factor == "disk" })  // only the (huge) disk limits them

        let none = Budget.evaluate([node("node-1", cameras: []), node("node-2", calibration: nil, cameras: [cam("node-2", "cam0")])])
        #expect(none.nodes.allSatisfy { $0.forecast.longestSeconds == nil && $0.forecast.factor == "none" })
        #expect(none.longestSeconds == nil && none.longestNode == nil)
        #expect(none.nodes[1].forecast.sentence == "node node-2 sets no known limit on the take's length: it is not calibrated.")
        #expect(none.pressureRefusal(requestedSeconds: 1e9) == nil)
    }

    @Test func beforeCalibrationThePlanSaysWhatItCannotKnow() {
        // Issue 27: "no disk fills" was said of a rig no node of which was calibrated.
        let one = Budget.evaluate([node("node-1", calibration: nil, cameras: [cam("node-1", "cam0")])])
        #expect(one.forecastSentence == "how long the take can run is not known: node node-1 is not calibrated, so when its disk fills and how much CPU the encoding takes cannot be counted (run coord-node calibrate on it).")
        let mixed = Budget.evaluate([node("node-1", cameras: [cam("node-1", "cam0")]),
                                     node("node-2", calibration: nil, cameras: [cam("node-2", "cam0")]),
                                     node("node-3", calibration: nil, cameras: [cam("node-3", "cam0")])])
        #expect(mixed.forecastSentence.hasPrefix("node node-1 can record "), "\(mixed.forecastSentence)")
        #expect(mixed.forecastSentence.hasSuffix("; but nodes node-2 and node-3 are not calibrated, so when their disks fill and how much CPU the encoding takes cannot be counted (run coord-node calibrate on them)."))
        #expect(!mixed.forecastSentence.contains("no disk fills"))
    }

    @Test func pressureRefusalNamesTheNodeThatStopsTheTakeFirst() {
        let budget = Budget.evaluate([writer("node-1", free: UInt64(16 * mib + 3000 * 2e6)), writer("node-2", free: UInt64(16 * mib + 750 * 2e6))])
        #expect(budget.longestNode == "node-2")
        #expect(budget.pressureRefusal(requestedSeconds: 600) == nil)
        #expect(budget.pressureRefusal(requestedSeconds: 750) == nil)
        #expect(budget.pressureRefusal(requestedSeconds: 1200) == "the take asks for 20 min but node node-2 can record only 12 min 30 s: its disk has 1.41 GiB free, less 16.0 MiB kept to finalize its files, and the take writes 2.00 MB/s there.")
        let full = Budget.evaluate([writer("node-3", free: 1000)])
        #expect(full.pressureRefusal(requestedSeconds: 5)?.hasPrefix("the take asks for 5 s but node node-3 cannot record at all: its disk has") == true)
    }

    @Test func durationsReadAsAnOperatorSaysThem() {
        #expect(BudgetFigures.duration(0.4) == "0 s")
        #expect(BudgetFigures.duration(45.9) == "45 s")
        #expect(BudgetFigures.duration(60) == "1 min")
        #expect(BudgetFigures.duration(750) == "12 min 30 s")
        #expect(BudgetFigures.duration(7500) == "2 h 5 min")
        #expect(BudgetFigures.duration(7200) == "2 h")
    }
}

@Suite struct BudgetRecordEveryTests {
    @Test func examples() {
        #expect(Budget.recordEvery(fps: 30, cap: 30) == 1)
        #expect(Budget.recordEvery(fps: 30, cap: 60) == 1)
        #expect(Budget.recordEvery(fps: 30, cap: 15) == 2)
        #expect(Budget.recordEvery(fps: 30, cap: 14) == 3)
        #expect(Budget.recordEvery(fps: 60, cap: 25) == 3)
        #expect(Budget.recordEvery(fps: 30, cap: 0) == 30)
    }

    @Test func isTheSmallestThatKeepsUnderTheCap() {
        for fps in 1...120 {
            for cap in 1...130 {
                let k = Budget.recordEvery(fps: fps, cap: cap)
                #expect(k >= 1 && Double(fps) / Double(k) <= Double(cap), "fps \(fps) cap \(cap): \(k)")
                #expect(k == 1 || Double(fps) / Double(k - 1) > Double(cap), "fps \(fps) cap \(cap): \(k) is not the smallest")
            }
        }
    }
}

@Suite struct BudgetFitTests {
    func allSettingsRun(_ result: FitResult) {
        for n in result.nodes {
            for c in n.cameras {
                #expect(c.settings.problem(on: n.name, with: c.capabilities) == nil, "\(c.id): \(c.settings)")
            }
        }
    }

    func checkFitted(_ result: FitResult) {
        #expect(result.fits == (result.budget.cost < 1))
        #expect(Budget.evaluate(result.nodes) == result.budget)
        for change in result.changes {
            #expect(change.sentence.hasPrefix("\(change.node)/\(change.camera) (priority "), "\(change.sentence)")
            #expect(change.sentence.contains("relieving"), "\(change.sentence)")
        }
        // Stages are global: no cheaper step after a dearer one.
        let order: [FitChange.Kind: Int] = [.lowerFormat: 0, .capRate: 1, .disable: 2]
        let ranks = result.changes.map { order[$0.kind]! }
        #expect(ranks == ranks.sorted(), "\(result.changes.map(\.kind))")
        allSettingsRun(result)
    }

    @Test func aPlanThatFitsIsLeftAlone() {
        let plan = [node("node-1", buses: [usb2], cameras: [cam("node-1", "cam0", bus: "usb1")])]
        let result = Budget.fit(plan)
        #expect(result.fits && result.changes.isEmpty && result.nodes == plan)
    }

    @Test func lowestPriorityLowersItsFormatFirst() {
        // Three 1280x720 YUYV streams (55.3 MB/s each) on a 48 MB/s bus; each may go down to 640 wide.
        let plan = [node("node-1", buses: [usb2], cameras: [
            cam("node-1", "cam0", 1280, 720, bus: "usb1", priority: 2),
            cam("node-1", "cam1", 1280, 720, bus: "usb1", priority: 1),
            cam("node-1", "cam2", 1280, 720, bus: "usb1", priority: 0),
        ])]
        let result = Budget.fit(plan)
        checkFitted(result)
        #expect(result.fits)
        // 1280x720 → 960x540 → 800x500 → 640x480 → 640x360: cam2 and cam1 all the way, then cam0 until it fits.
        #expect(result.changes.map(\.camera) == Array(repeating: "cam2", count: 4) + Array(repeating: "cam1", count: 4) + Array(repeating: "cam0", count: 3))
        #expect(result.changes.allSatisfy { $0.kind == .lowerFormat })
        #expect(result.changes.first?.sentence.hasPrefix("node-1/cam2 (priority 0): 1280x720 → 960x540, relieving bus usb1 (usb2) at cost 3.46") == true,
                "\(result.changes.first?.sentence ?? "")")
        // Never below half the width first asked for: 320x180 is offered but not taken.
        #expect(result.nodes[0].cameras.allSatisfy { $0.settings.width >= 640 })
        #expect(result.nodes[0].cameras.map { "\($0.settings.width)x\($0.settings.height)" } == ["640x480", "640x360", "640x360"])
    }

    @Test func goesFormatThenRateThenDisable() {
        // Four 1280x720 streams on a 10 MB/s bus: at 640x360 and one group in 4 each still needs 3.5 MB/s.
        let bus = Bus(id: "csi0", kind: "csi", bandwidthBytesPerSecond: 10e6)
        let plan = [node("node-1", buses: [bus], cameras: (0..<4).map {
            cam("node-1", "cam\($0)", 1280, 720, bus: "csi0", priority: $0)
        })]
        let result = Budget.fit(plan)
        checkFitted(result)
        #expect(result.fits)
        let kinds = result.changes.map(\.kind)
        #expect(kinds.filter { $0 == .lowerFormat }.count == 4 * 4)  // each down to 640x360 in four steps
        #expect(kinds.filter { $0 == .capRate }.count == 4 * 3)
        let disabled = result.changes.filter { $0.kind == .disable }.map(\.camera)
        #expect(disabled == ["cam0", "cam1"])
        #expect(result.nodes[0].cameras.map(\.settings.camera) == ["cam2", "cam3"])
        #expect(result.nodes[0].cameras.allSatisfy { $0.settings.recordEvery == 4 && $0.settings.height == 360 })
        let cap = result.changes.first { $0.kind == .capRate }!
        #expect(cap.sentence.hasPrefix("node-1/cam0 (priority 0): records one group in 2, 30 → 15 of its 30 fps, relieving bus csi0 (csi)"), "\(cap.sentence)")
        #expect(result.changes.last!.sentence.hasPrefix("node-1/cam1 (priority 1): disabled, relieving"), "\(result.changes.last!.sentence)")
    }

    @Test func aRateCapIsSkippedWhereItCannotHelp() {
        // FFV1 repeats whole packets for held groups, so only a smaller format or a disabled camera lowers its disk write.
        // At 640x360 the two still write 13.8 MB/s to a disk taking 10 MB/s.
        let plan = [node("node-1", calibration: calibration(disk: 10e6), cameras: [
            cam("node-1", "cam0", 1280, 720, codec: .ffv1, priority: 1),
            cam("node-1", "cam1", 1280, 720, codec: .ffv1),
        ])]
        let result = Budget.fit(plan)
        checkFitted(result)
        #expect(result.fits)
        #expect(!result.changes.contains { $0.kind == .capRate })
        #expect(result.changes.last?.kind == .disable && result.changes.last?.camera == "cam1")
    }

    @Test func neverDisablesTheRigsLastCameraAndSaysItDoesNotFit() {
        // One camera per node, each alone over its own bus; the rig keeps one of them.
        let tiny = Bus(id: "usb1", kind: "usb1", bandwidthBytesPerSecond: 1e6)
        let plan = [node("node-1", buses: [tiny], cameras: [cam("node-1", "cam0", 1280, 720, bus: "usb1", priority: 1)]),
                    node("node-2", buses: [tiny], cameras: [cam("node-2", "cam0", 1280, 720, bus: "usb1")])]
        let result = Budget.fit(plan)
        checkFitted(result)
        #expect(!result.fits)
        #expect(result.budget.cost >= 1 && result.budget.refusal() != nil)
        #expect(result.nodes.flatMap(\.cameras).map(\.id) == ["node-1/cam0"])
        #expect(result.changes.filter { $0.kind == .disable }.map(\.node) == ["node-2"])
        #expect(result.nodes[0].cameras[0].settings.recordEvery == 4)
    }

    @Test func onlyCamerasOnAnOverBudgetResourceAreTouched() {
        let plan = [node("node-1", buses: [usb2], cameras: [cam("node-1", "cam0", 1280, 720, bus: "usb1"),
                                                           cam("node-1", "cam1", 1280, 720, bus: "usb1")]),
                    node("node-2", buses: [usb2], cameras: [cam("node-2", "cam0", bus: "usb1")])]
        let result = Budget.fit(plan)
        checkFitted(result)
        #expect(result.fits && result.nodes[1] == plan[1])
        #expect(result.changes.allSatisfy { $0.node == "node-1" })
    }

    @Test func aLowerFormatKeepsItsPixelFormatAndFramePeriod() {
        // 960x540 is offered first as MJPEG (another bus cost per pixel), and 800x500 only up to 15 fps.
        let offered = [
            CameraFormat(pixelFormat: "yuyv422", width: 1280, height: 720, minFramePeriodMicroseconds: 33_333, maxFramePeriodMicroseconds: 1_000_000),
            CameraFormat(pixelFormat: "mjpeg", width: 960, height: 540, minFramePeriodMicroseconds: 33_333, maxFramePeriodMicroseconds: 1_000_000),
            CameraFormat(pixelFormat: "yuyv422", width: 960, height: 540, minFramePeriodMicroseconds: 33_333, maxFramePeriodMicroseconds: 1_000_000),
            CameraFormat(pixelFormat: "yuyv422", width: 800, height: 500, minFramePeriodMicroseconds: 66_666, maxFramePeriodMicroseconds: 1_000_000),
            CameraFormat(pixelFormat: "yuyv422", width: 640, height: 360, minFramePeriodMicroseconds: 33_333, maxFramePeriodMicroseconds: 1_000_000),
        ]
        let camera = cam("node-1", "cam0", 1280, 720, bus: "usb1", offered: offered)
        #expect(Budget.smallerSize(camera, requestedWidth: 1280).map { "\($0.width)x\($0.height)" } == "640x360")
        #expect(Budget.smallerSize(camera, requestedWidth: 1600) == nil)  // 640 is under half of 1600
    }

    @Test func fittedPlansAlwaysRunAndReEvaluateToTheirBudget() {
        // A spread of rigs: several nodes, shared hosts and disks, mixed codecs and priorities.
        var random = SeededRandom(seed: 7)
        for _ in 0..<40 {
            let sizes = [(1920, 1080), (1280, 720), (640, 480)]
            let codecs: [VideoCodec] = [.mjpeg, .ffv1, .h264]
            var nodes: [PlannedNode] = []
            for n in 0..<random.int(1...3) {
                let name = "node-\(n)"
                let cameras = (0..<random.int(1...3)).map { c -> PlannedCamera in
                    let size = sizes[random.int(0...2)]
                    return cam(name, "cam\(c)", size.0, size.1, fps: [15, 25, 30][random.int(0...2)], codec: codecs[random.int(0...2)],
                               pixelFormat: random.chance(0.3) ? "mjpeg" : "yuyv422", bus: "usb1", priority: random.int(0...2))
                }
                nodes.append(node(name, buses: [Bus(id: "usb1", kind: "usb2", bandwidthBytesPerSecond: random.double(5e6...80e6))],
                                  calibration: calibration(disk: random.double(5e6...60e6), mjpeg: random.double(5e6...80e6),
                                                           ffv1: random.double(5e6...40e6), h264: random.double(5e6...40e6)),
                                  diskID: random.chance(0.5) ? "shared" : "", hostID: random.chance(0.5) ? "box" : "", cameras: cameras))
            }
            let result = Budget.fit(nodes)
            checkFitted(result)
            #expect(result.nodes.flatMap(\.cameras).count >= 1)
            if !result.fits {
                // Only the last camera, as cheap as it can be, is left over budget.
                #expect(result.nodes.flatMap(\.cameras).count == 1)
            }
        }
    }
}

@Suite struct PreviewBudgetTests {
    @Test func thePreviewsTilesAreCountedInTheEncodingCost() throws {
        // 1280x720 at 30 fps encoded as ffv1, plus 480x270 tiles at 5 fps as JPEG.
        let cal = calibration(mjpeg: 20e6, ffv1: 100e6)
        var plain = node("node-1", calibration: cal, cameras: [cam("node-1", "cam0", 1280, 720, codec: .ffv1)])
        let without = try #require(load(Budget.evaluate([plain]), "node-1", .encoding))
        plain.preview = PreviewSettings(width: 480, fps: 5)
        let with = try #require(load(Budget.evaluate([plain]), "node-1", .encoding))
        #expect(close(with.cost - without.cost, 480.0 * 270 * 5 / 20e6))
        #expect(with.cameras.contains("node-1/cam0 (preview)"))
        #expect(with.detail.contains("preview"))
    }
}
