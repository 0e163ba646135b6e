// Issue 23: every reply a node sends is checked at the coordinator's edge (CoordWire's NodeReply), one sentence
// naming the node and the field; values that trapped the coordinator are refused before any arithmetic.
import CoordCore
import CoordWire
import Foundation
import Testing

private func fault<T>(_ body: () throws(FieldFault) -> T) -> FieldFault? {
    do {
        _ = try body()
        return nil
    } catch {
        return error
    }
}

private func camera(_ name: String, minPeriod: UInt64 = 1_000, maxPeriod: UInt64 = 1_000_000) -> Coord_V1_CameraInfo {
    var c = Coord_V1_CameraInfo()
    c.name = name
    c.source = "synthetic"
    var f = Coord_V1_CameraFormat()
    f.pixelFormat = "yuv420p"
    f.width = 640
    f.height = 480
    f.minFramePeriodUs = minPeriod
    f.maxFramePeriodUs = maxPeriod
    c.formats = [f]
    c.codecs = ["mjpeg"]
    return c
}

private func hello(_ cameras: [Coord_V1_CameraInfo], node: String = "n1") -> Coord_V1_HelloReply {
    var h = Coord_V1_HelloReply()
    h.node = node
    h.agentVersion = "1.2.0"
    h.cameras = cameras
    return h
}

private func file(_ path: String, bytes: UInt64 = 10, sha: String = String(repeating: "ab", count: 32),
                  xxh: String = String(repeating: "cd", count: 16)) -> Coord_V1_FileInfo {
    var f = Coord_V1_FileInfo()
    f.path = path
    f.bytes = bytes
    f.sha256 = sha
    f.xxh128 = xxh
    return f
}

private func list(_ files: [Coord_V1_FileInfo], take: String = "T1") -> Coord_V1_FileList {
    var l = Coord_V1_FileList()
    l.takeID = take
    l.files = files
    l.final = true
    return l
}

private func probe(_ t1: Int64, _ t2: Int64, _ t3: Int64) -> Coord_V1_ClockProbeReply {
    var r = Coord_V1_ClockProbeReply()
    r.t1Us = t1
    r.t2Us = t2
    r.t3Us = t3
    return r
}

@Suite struct NodeReplyTests {
    @Test func anHonestHelloPassesAsItCame() throws {
        let h = hello([camera("cam0"), camera("cam1")])
        #expect(try NodeReply.hello(h, from: "node n1") == h)
    }

    @Test func aFramePeriodAbove2To63IsRefusedNamingNodeAndField() throws {
        // CameraFormat(wire:) trapped on this (Wire.swift:150): `start-take`, `plan` and the console died.
        let f = fault { () throws(FieldFault) in try NodeReply.hello(hello([camera("cam0", maxPeriod: .max)]), from: "node n1") }
        #expect(f?.field == "HelloReply.cameras[0].formats[0].max_frame_period_us")
        #expect(f?.sentence.hasPrefix("node n1 sent HelloReply.cameras[0].formats[0].max_frame_period_us 18446744073709551615") == true)
        let g = fault { () throws(FieldFault) in try NodeReply.hello(hello([camera("cam0", minPeriod: 1 << 63, maxPeriod: .max)]), from: "node n1") }
        #expect(g?.field == "HelloReply.cameras[0].formats[0].min_frame_period_us")
        // The slowest period may not be faster than the fastest.
        let h = fault { () throws(FieldFault) in try NodeReply.hello(hello([camera("cam0", minPeriod: 5_000, maxPeriod: 4_000)]), from: "node n1") }
        #expect(h?.field == "HelloReply.cameras[0].formats[0].max_frame_period_us")
    }

    @Test func emptyRepeatedOrUnsafeCameraNamesAreRefused() throws {
        let empty = fault { () throws(FieldFault) in try NodeReply.hello(hello([camera("")]), from: "node n1") }
        #expect(empty?.field == "HelloReply.cameras[0].name")
        #expect(empty?.sentence.contains("empty") == true)
        let twice = fault { () throws(FieldFault) in try NodeReply.hello(hello([camera("cam0"), camera("cam0")]), from: "node n1") }
        #expect(twice?.field == "HelloReply.cameras[1].name")
        #expect(twice?.sentence.contains("share one file") == true)
        for bad in ["..", "a/b", "../../etc", "cam 0", String(repeating: "x", count: 65)] {
            #expect(fault { () throws(FieldFault) in try NodeReply.hello(hello([camera(bad)]), from: "node n1") }?.field == "HelloReply.cameras[0].name")
        }
        #expect(fault { () throws(FieldFault) in try NodeReply.hello(hello([], node: "../x"), from: "node at tcp://h:1") }?.field == "HelloReply.node")
    }

    @Test func aFileListIsCheckedForPathsSizesDuplicatesAndChecksums() throws {
        let good = list([file("n1/cam0.mkv"), file("n1/.cam0.mkv.part", bytes: 3)])
        #expect(try NodeReply.fileList(good, node: "n1", takeID: "T1", from: "node n1").map(\.path) == ["n1/cam0.mkv", "n1/.cam0.mkv.part"])
        func field(_ l: Coord_V1_FileList) -> String? {
            fault { () throws(FieldFault) in try NodeReply.fileList(l, node: "n1", takeID: "T1", from: "node n1") }?.field
        }
        // Collector.swift:80 trapped summing these.
        #expect(field(list([file("n1/cam0.mkv", bytes: .max)])) == "FileList.files[0].bytes")
        #expect(field(list([file("n1/cam0.mkv", bytes: 1 << 63)])) == "FileList.files[0].bytes")
        #expect(field(list([file("n1/cam0.mkv"), file("n1/cam0.mkv")])) == "FileList.files[1].path")
        #expect(field(list([file("n2/cam0.mkv")])) == "FileList.files[0].path")
        #expect(field(list([file("n1/../cam0.mkv")])) == "FileList.files[0].path")
        #expect(field(list([file("n1/cam0.mkv", sha: "AB")])) == "FileList.files[0].sha256")
        #expect(field(list([file("n1/cam0.mkv")], take: "T2")) == "FileList.take_id")
        // xxh128: 32 lower-case hex digits, or empty from a node that predates it (then sha256 is checked).
        #expect(try NodeReply.fileList(good, node: "n1", takeID: "T1", from: "node n1").map(\.xxh128) == [String(repeating: "cd", count: 16), String(repeating: "cd", count: 16)])
        #expect(try NodeReply.fileList(list([file("n1/cam0.mkv", xxh: "")]), node: "n1", takeID: "T1", from: "node n1").map(\.xxh128) == [""])
        for bad in [String(repeating: "CD", count: 16), String(repeating: "c", count: 31), String(repeating: "c", count: 33), String(repeating: "g", count: 32)] {
            #expect(field(list([file("n1/cam0.mkv", xxh: bad)])) == "FileList.files[0].xxh128")
        }
    }

    @Test func clockProbeExtremesAreRefusedBeforeAnyArithmetic() throws {
        // Clock.swift:40/66/98 trapped on these: a running console died about 10 s after start.
        let t4: Int64 = 5_000_000
        func field(_ r: Coord_V1_ClockProbeReply) -> String? {
            fault { () throws(FieldFault) in try NodeReply.clockProbe(r, receivedAt: t4, from: "node n1") }?.field
        }
        #expect(field(probe(4_000_000, .min, 100)) == "ClockProbeReply.t2_us")
        #expect(field(probe(4_000_000, .max, .max)) == "ClockProbeReply.t2_us")
        #expect(field(probe(4_000_000, 100, .max)) == "ClockProbeReply.t3_us")
        #expect(field(probe(.min, 100, 200)) == "ClockProbeReply.t1_us")
        #expect(field(probe(t4 + 1, 100, 200)) == "ClockProbeReply.t1_us")
        #expect(field(probe(4_000_000, 200, 100)) == "ClockProbeReply.t3_us")
        let s = try NodeReply.clockProbe(probe(4_000_000, 100, 110), receivedAt: t4, from: "node n1")
        #expect(s == ClockProbeSample(t1: 4_000_000, t2: 100, t3: 110, t4: t4))
        #expect(fault { () throws(FieldFault) in try NodeReply.clockProbe(probe(4_000_000, 100, 110), sent: 3, receivedAt: t4, from: "node n1") }?.field
                == "ClockProbeReply.t1_us")
    }

    @Test func statusCountsTimesAndNamesAreChecked() throws {
        var s = Coord_V1_Status()
        s.node = "n1"
        s.state = .recording
        s.takeID = "T1"
        var c = Coord_V1_CameraStatus()
        c.camera = "cam0"
        c.frames = 10
        c.lastGroup = 9
        s.cameras = [c]
        s.framePeriodUs = 33_333
        #expect(try NodeReply.status(s, from: "node n1").cameras.first?.frames == 10)
        func field(_ edit: (inout Coord_V1_Status) -> Void) -> String? {
            var m = s
            edit(&m)
            return fault { () throws(FieldFault) in try NodeReply.status(m, from: "node n1") }?.field
        }
        #expect(field { $0.framePeriodUs = .max } == "Status.frame_period_us")
        #expect(field { $0.rigNowUs = .min } == "Status.rig_now_us")
        #expect(field { $0.cameras[0].frames = .max } == "Status.cameras[0].frames")
        #expect(field { $0.cameras[0].lastGroup = .max } == "Status.cameras[0].last_group")
        #expect(field { let first = $0.cameras[0]; $0.cameras.append(first) } == "Status.cameras[1].camera")
        #expect(field { $0.cameras[0].camera = "" } == "Status.cameras[0].camera")
        #expect(field { $0.stopGroup = -1 } == "Status.stop_group")
        // A triggered camera's figures (CONTRACT §17) come from the node too: names, counts and errors checked.
        var t = Coord_V1_TriggerStatus()
        t.output = "sync"; t.source = "Line0"; t.pulses = 10; t.errorP50Us = 3; t.errorP99Us = 9; t.errorMaxUs = 12
        #expect(field { $0.cameras[0].trigger = t } == nil)
        #expect(field { $0.cameras[0].trigger = t; $0.cameras[0].trigger.output = "../x" } == "Status.cameras[0].trigger.output")
        #expect(field { $0.cameras[0].trigger = t; $0.cameras[0].trigger.source = "" } == "Status.cameras[0].trigger.source")
        #expect(field { $0.cameras[0].trigger = t; $0.cameras[0].trigger.pulses = .max } == "Status.cameras[0].trigger.pulses")
        #expect(field { $0.cameras[0].trigger = t; $0.cameras[0].trigger.extraFrames = .max } == "Status.cameras[0].trigger.extra_frames")
        #expect(field { $0.cameras[0].trigger = t; $0.cameras[0].trigger.errorMaxUs = -1 } == "Status.cameras[0].trigger.error_max_us")
        #expect(field { $0.cameras[0].trigger = t; $0.cameras[0].trigger.errorP99Us = .max } == "Status.cameras[0].trigger.error_p99_us")
    }

    @Test func statusCarriesEachCamerasControlsInForceChecked() throws {
        var s = Coord_V1_Status()
        s.node = "n1"
        s.state = .idle
        var status = NodeStatus(node: "n1", state: .idle)
        status.controls = ["cam0": CameraControls(exposureMicroseconds: 8000, gainDecibels: 3, whiteBalanceKelvin: 5000, focus: 0.5),
                           "cam1": CameraControls(exposureMicroseconds: 20000)]
        s.controls = status.wire.controls
        #expect(try NodeReply.status(s, from: "node n1").controls == status.controls)
        func field(_ edit: (inout Coord_V1_Status) -> Void) -> String? {
            var m = s
            edit(&m)
            return fault { () throws(FieldFault) in try NodeReply.status(m, from: "node n1") }?.field
        }
        #expect(field { $0.controls[0].controls.focus = 2 } == "Status.controls[0].controls.focus")
        #expect(field { $0.controls[0].controls.gainDb = .nan } == "Status.controls[0].controls.gain_db")
        #expect(field { $0.controls[1].camera = "../x" } == "Status.controls[1].camera")
        #expect(field { let first = $0.controls[0]; $0.controls.append(first) } == "Status.controls[2].camera")
    }

    @Test func armedDevicesAreCheckedAndCarryEveryField() throws {
        var armed = Coord_V1_Armed()
        armed.takeID = "T1"
        armed.cameras = ["cam0", "gige"]
        armed.devices = [.init(camera: "cam0", DeviceIdentity(driver: "vivid", card: "vivid", busInfo: "platform:vivid-000")),
                         .init(camera: "gige", DeviceIdentity(driver: "aravis", transport: "GigEVision", vendor: "Aravis",
                                                              model: "Fake", serial: "GV01")),
                         .init(microphone: "mic0", card: "Dummy")]
        let checked = try NodeReply.armed(armed, takeID: "T1", from: "node n1")
        #expect(checked.cameraDevices["cam0"] == DeviceIdentity(driver: "vivid", card: "vivid", busInfo: "platform:vivid-000"))
        #expect(checked.cameraDevices["gige"] == DeviceIdentity(driver: "aravis", transport: "GigEVision", vendor: "Aravis", model: "Fake", serial: "GV01"))
        #expect(checked.micDevices == ["mic0": "Dummy"])
        func field(_ edit: (inout Coord_V1_Armed) -> Void) -> String? {
            var m = armed
            edit(&m)
            return fault { () throws(FieldFault) in try NodeReply.armed(m, takeID: "T1", from: "node n1") }?.field
        }
        #expect(field { $0.devices[0].card = String(repeating: "x", count: 513) } == "Armed.devices[0].card")
        #expect(field { $0.devices[1].serial = "GV\u{1B}[2J" } == "Armed.devices[1].serial")
        #expect(field { $0.devices[0].driver = "" } == "Armed.devices[0].driver")
        #expect(field { $0.devices[2].card = "" } == "Armed.devices[2].card")
        #expect(field { $0.devices[0].source = "../x" } == "Armed.devices[0].source")
        #expect(field { $0.devices.append($0.devices[0]) } == "Armed.devices[3].source")
        #expect(field { $0.devices = Array(repeating: $0.devices[0], count: 513) } == "Armed.devices")
        let control = fault { () throws(FieldFault) in
            var m = armed
            m.devices[1].vendor = "Ara\u{7}vis"
            _ = try NodeReply.armed(m, takeID: "T1", from: "node n1")
        }
        #expect(control?.sentence == "node n1 sent Armed.devices[1].vendor with the control character U+0007; a device's name is printable text.")
    }

    /// Issue 36: a uvcvideo camera's buffer stamp crosses the Armed reply, and a node's hostile stamp fields are
    /// refused naming the field (an unknown stamp or marks, a lateness that is not a finite 0…1 h in µs).
    @Test func aCamerasBufferStampCrossesAndHostileStampFieldsAreRefused() throws {
        var armed = Coord_V1_Armed()
        armed.takeID = "T1"
        armed.cameras = ["cam0"]
        var webcam = DeviceIdentity(driver: "uvcvideo", card: "C920", busInfo: "usb-0000:00:14.0-1")
        webcam.timestamp = BufferStampChoice(stamp: .firstPacket, marks: .endOfExposure, lateMicroseconds: 250_000,
                                             uncertaintyMicroseconds: 125_000, hwTimestamps: 0)
        armed.devices = [.init(camera: "cam0", webcam)]
        #expect(try NodeReply.armed(armed, takeID: "T1", from: "node n1").cameraDevices["cam0"] == webcam)
        func field(_ edit: (inout Coord_V1_Armed) -> Void) -> String? {
            var m = armed
            edit(&m)
            return fault { () throws(FieldFault) in try NodeReply.armed(m, takeID: "T1", from: "node n1") }?.field
        }
        #expect(field { $0.devices[0].timestampStamp = "sundial" } == "Armed.devices[0].timestamp_stamp")
        #expect(field { $0.devices[0].timestampMarks = "" } == "Armed.devices[0].timestamp_marks")
        #expect(field { $0.devices[0].timestampLateUs = .nan } == "Armed.devices[0].timestamp_late_us")
        #expect(field { $0.devices[0].timestampLateUs = 4e9 } == "Armed.devices[0].timestamp_late_us")
        #expect(field { $0.devices[0].timestampUncertaintyUs = -1 } == "Armed.devices[0].timestamp_uncertainty_us")
        #expect(field { $0.devices[0].timestampUncertaintyUs = .infinity } == "Armed.devices[0].timestamp_uncertainty_us")
    }

    /// CONTRACT §16: a libcamera camera's device carries its pipeline and id through the Armed reply.
    @Test func aLibcameraDeviceCarriesItsPipelineAndID() throws {
        var armed = Coord_V1_Armed()
        armed.takeID = "T1"
        armed.cameras = ["pi"]
        let pi = DeviceIdentity(driver: "libcamera", model: "imx708", pipeline: "rpi/pisp",
                                cameraID: "/base/axi/pcie@120000/rp1/i2c@88000/imx708@1a")
        armed.devices = [.init(camera: "pi", pi)]
        #expect(try NodeReply.armed(armed, takeID: "T1", from: "node n1").cameraDevices["pi"] == pi)
        armed.devices[0].cameraID = "imx708\u{1B}[2J"
        let bad = fault { () throws(FieldFault) in _ = try NodeReply.armed(armed, takeID: "T1", from: "node n1") }
        #expect(bad?.field == "Armed.devices[0].camera_id")
    }

    @Test func chunksArmedControlsAndPreviewFramesAreChecked() throws {
        var chunk = Coord_V1_Chunk()
        chunk.path = "n1/cam0.mkv"
        chunk.offset = 4096
        chunk.data = Data(count: 100)
        #expect(try NodeReply.chunk(chunk, path: "n1/cam0.mkv", offset: 4096, length: 100, from: "node n1").count == 100)
        #expect(fault { () throws(FieldFault) in try NodeReply.chunk(chunk, path: "n1/cam0.mkv", offset: 4096, length: 99, from: "node n1") }?.field == "Chunk.data")
        #expect(fault { () throws(FieldFault) in try NodeReply.chunk(chunk, path: "n1/cam1.mkv", offset: 4096, length: 100, from: "node n1") }?.field == "Chunk.path")
        #expect(fault { () throws(FieldFault) in try NodeReply.chunk(chunk, path: "n1/cam0.mkv", offset: 0, length: 100, from: "node n1") }?.field == "Chunk.offset")

        var applied = Coord_V1_ControlsApplied()
        applied.camera = "cam0"
        applied.controls.focus = .nan
        #expect(fault { () throws(FieldFault) in try NodeReply.controlsApplied(applied, from: "node n1") }?.field == "ControlsApplied.controls.focus")
        applied.controls.focus = 0.5
        applied.controls.exposureUs = .max
        #expect(fault { () throws(FieldFault) in try NodeReply.controlsApplied(applied, from: "node n1") }?.field == "ControlsApplied.controls.exposure_us")

        var armed = Coord_V1_Armed()
        armed.takeID = "T1"
        armed.cameras = ["cam0"]
        #expect(try NodeReply.armed(armed, takeID: "T1", from: "node n1").controls.isEmpty)
        armed.controls = [applied]
        #expect(fault { () throws(FieldFault) in try NodeReply.armed(armed, takeID: "T1", from: "node n1") }?.field == "Armed.controls[0].controls.exposure_us")

        var frame = Coord_V1_PreviewFrame()
        frame.node = "n1"
        frame.camera = "cam0"
        frame.width = 320
        frame.height = 240
        frame.group = 5
        #expect(try NodeReply.previewFrame(frame, from: "a preview publisher") == frame)
        frame.group = .min
        #expect(fault { () throws(FieldFault) in try NodeReply.previewFrame(frame, from: "a preview publisher") }?.field == "PreviewFrame.group")
    }

    @Test func aSizeRangeCrossesTheWireAndIsChecked() throws {
        // A GenICam camera's Width/Height ranges (CONTRACT §12): the largest size with its minima and steps.
        let ranged = CameraFormat(pixelFormat: "BayerRG8", width: 2048, height: 2048, minFramePeriodMicroseconds: 10_000,
                                  maxFramePeriodMicroseconds: 1_000_000,
                                  sizeRange: CameraFormat.SizeRange(minWidth: 1, minHeight: 1, widthStep: 1, heightStep: 2))
        #expect(CameraFormat(wire: ranged.wire) == ranged)
        var c = camera("cam0")
        c.formats = [ranged.wire]
        #expect(try NodeReply.hello(hello([c]), from: "node n1").cameras[0].formats[0].heightStep == 2)
        // A minimum above the largest size, or a step of 0 beside a set one, is refused naming the field.
        var f = ranged.wire
        f.minWidth = 4096
        c.formats = [f]
        #expect(fault { () throws(FieldFault) in try NodeReply.hello(hello([c]), from: "node n1") }?.field == "HelloReply.cameras[0].formats[0].min_width")
        f = ranged.wire
        f.heightStep = 0
        c.formats = [f]
        #expect(fault { () throws(FieldFault) in try NodeReply.hello(hello([c]), from: "node n1") }?.field == "HelloReply.cameras[0].formats[0].height_step")
        // No range: the fields stay 0 and the format is one size.
        #expect(CameraFormat(wire: camera("cam0").formats[0]).sizeRange == nil)
    }

    @Test func aCameraFormatOfAnyPeriodConvertsWithoutTrapping() {
        var f = Coord_V1_CameraFormat()
        f.maxFramePeriodUs = .max
        f.minFramePeriodUs = 1 << 63
        let format = CameraFormat(wire: f)
        #expect(format.maxFramePeriodMicroseconds == .max && format.minFramePeriodMicroseconds == .max)
        var m = ClockMapping(offsetMicroseconds: .infinity)
        #expect(m.wire.offsetUs == .max)
        m.offsetMicroseconds = .nan
        #expect(m.wire.offsetUs == 0)
    }
}
