// A GenICam camera's features by GenICam's names (with the fallbacks real cameras still have), and the devices
// found on the node. Every call into Aravis goes through the CAravis shims.
import CAravis
import CoordCore
import Foundation
import Capture
import Platform
import Synchronization

extension GenICamCamera {
    /// The camera's GenICam features, each call one sentence on failure. Called under `deviceLock` once streaming.
    struct Features {
        let camera: UnsafeMutablePointer<ArvCamera>
        let deviceID: String

        /// Opens `deviceID`: a GigE Vision camera on one of `interfaces` (where it was last found, else found again
        /// there), by address; else a USB3 Vision camera. Throws one sentence naming it and what was found instead.
        static func open(_ deviceID: String, interfaces: [String]) throws -> UnsafeMutablePointer<ArvCamera> {
            var err = [CChar](repeating: 0, count: 512)
            if !interfaces.isEmpty {
                let key = "\(interfaces.joined(separator: ","))/\(deviceID)"
                if let known = GenICamCamera.located.withLock({ $0[key] }),
                   let camera = carv_gv_camera_open(known.interfaceAddress, known.announcement.address, &err, 512) {
                    return camera
                }
                if let found = try GigEVisionDiscovery.discover(on: interfaces, looking: deviceID).first {
                    GenICamCamera.located.withLock { $0[key] = found }
                    if let camera = carv_gv_camera_open(found.interfaceAddress, found.announcement.address, &err, 512) { return camera }
                    throw CameraSourceError("GigE Vision camera \(Echo.short(deviceID)) answered discovery on \(found.interface) from \(found.announcement.address) but could not be opened: \(text(err))")
                }
            }
            if let camera = carv_camera_open(deviceID, &err, 512) { return camera }
            let found = (try? GenICamCamera.devices(interfaces: interfaces))?.map { Echo.short($0.deviceID) } ?? []
            let looked = interfaces.isEmpty
                ? "GigE Vision discovery is off: name the network interface its cameras are on with --genicam-interface IFACE"
                : "GigE Vision looked on \(interfaces.joined(separator: ", ")) only"
            throw CameraSourceError("no GenICam camera answers as \"\(Echo.short(deviceID))\" (\(found.isEmpty ? "none was found" : "found: " + found.joined(separator: ", ")); \(looked); see coord-node --list-cameras)")
        }

        func call(_ what: String, _ body: (UnsafeMutablePointer<CChar>, Int) -> Int32) throws {
            var err = [CChar](repeating: 0, count: 512)
            let rc = err.withUnsafeMutableBufferPointer { body($0.baseAddress!, $0.count) }
            if rc != 0 { throw CameraSourceError("\(deviceID) refused \(what): \(text(err))") }
        }

        func available(_ name: String) -> Bool { carv_feature_available(camera, name) != 0 }
        /// The first of `names` the camera has.
        func first(_ names: [String]) -> String? { names.first(where: available) }

        func integer(_ name: String) throws -> Int64 {
            var value: Int64 = 0
            try call("reading \(name)") { carv_get_integer(camera, name, &value, $0, $1) }
            return value
        }
        func setInteger(_ name: String, _ value: Int64) throws {
            try call("\(name) = \(value)") { carv_set_integer(camera, name, value, $0, $1) }
        }
        func integerBounds(_ name: String) throws -> ClosedRange<Int64> {
            var lo: Int64 = 0, hi: Int64 = 0
            try call("reading \(name)'s range") { carv_integer_bounds(camera, name, &lo, &hi, $0, $1) }
            return lo...max(lo, hi)
        }
        func float(_ name: String) throws -> Double {
            var value = 0.0
            try call("reading \(name)") { carv_get_float(camera, name, &value, $0, $1) }
            return value
        }
        func setFloat(_ name: String, _ value: Double) throws {
            try call("\(name) = \(value)") { carv_set_float(camera, name, value, $0, $1) }
        }
        func floatBounds(_ name: String) throws -> ClosedRange<Double> {
            var lo = 0.0, hi = 0.0
            try call("reading \(name)'s range") { carv_float_bounds(camera, name, &lo, &hi, $0, $1) }
            return lo...max(lo, hi)
        }
        func setString(_ name: String, _ value: String) throws {
            try call("\(name) = \(value)") { carv_set_string(camera, name, value, $0, $1) }
        }
        func string(_ name: String) -> String? {
            var out = [CChar](repeating: 0, count: 256), err = [CChar](repeating: 0, count: 256)
            guard carv_get_string(camera, name, &out, 256, &err, 256) == 0 else { return nil }
            return text(out)
        }

        func pixelFormats() throws -> [String] {
            var out = [CChar](repeating: 0, count: 4096)
            var count: Int32 = 0
            try call("listing its pixel formats") { err, len in
                count = carv_pixel_formats(camera, &out, 4096, err, len)
                return count < 0 ? -1 : 0
            }
            return text(out).split(separator: "\n").map(String.init)
        }

        func payload() throws -> UInt32 {
            var bytes: UInt32 = 0
            try call("reading its payload size") { carv_payload(camera, &bytes, $0, $1) }
            return bytes
        }

        /// Free-run: no trigger, continuous acquisition, the frame rate under our control.
        func prepareFreeRun() throws {
            if available("TriggerSelector") { try? setString("TriggerSelector", "FrameStart") }
            if available("TriggerMode") { try setString("TriggerMode", "Off") }
            if available("AcquisitionMode") { try setString("AcquisitionMode", "Continuous") }
            if available("AcquisitionFrameRateEnable") {
                try call("AcquisitionFrameRateEnable = true") { carv_set_boolean(camera, "AcquisitionFrameRateEnable", 1, $0, $1) }
            }
        }

        /// Width and Height, with the offsets at 0; one sentence naming the camera, the size and its ranges when it
        /// cannot be that size.
        func setSize(width: Int, height: Int) throws {
            for name in ["OffsetX", "OffsetY"] where available(name) { try? setInteger(name, 0) }
            // The ranges with the offsets at 0 (a camera's Width max shrinks while OffsetX is set).
            let widths = try integerBounds("Width"), heights = try integerBounds("Height")
            let sizes = GenICamDescription(identity: DeviceIdentity(driver: "aravis"), pixelFormats: [],
                                           widthRange: Int(widths.lowerBound)...Int(widths.upperBound),
                                           heightRange: Int(heights.lowerBound)...Int(heights.upperBound),
                                           widthStep: Int(carv_integer_increment(camera, "Width")),
                                           heightStep: Int(carv_integer_increment(camera, "Height")),
                                           frameRateRange: nil, controlRanges: ControlRanges())
            if let problem = sizes.sizeProblem(deviceID: deviceID, width: width, height: height) { throw CameraSourceError(problem) }
            for (name, value) in [("Width", width), ("Height", height)] {
                try setInteger(name, Int64(value))
                let kept = try integer(name)
                guard kept == Int64(value) else {
                    throw CameraSourceError("\(deviceID) was asked for \(name) \(value) but kept \(kept) (its \(name) steps do not allow it)")
                }
            }
        }

        static let frameRateNames = ["AcquisitionFrameRate", "AcquisitionFrameRateAbs"]

        /// Sets the frame rate; returns the period the camera kept, µs. Throws when it has no rate control or keeps
        /// a rate more than 0.1 % off.
        func setFramePeriod(_ period: Double) throws -> Double {
            guard let name = first(Self.frameRateNames) else {
                throw CameraSourceError("\(deviceID) has no AcquisitionFrameRate feature, so coord cannot set its rate")
            }
            let fps = 1e6 / period
            let range = try floatBounds(name)
            guard range.contains(fps) else {
                throw CameraSourceError("\(deviceID) cannot run at \(String(format: "%.3g", fps)) fps (its \(name) is \(String(format: "%.3g", range.lowerBound))…\(String(format: "%.4g", range.upperBound)))")
            }
            try setFloat(name, fps)
            let kept = try float(name)
            guard abs(kept - fps) <= fps * 1e-3 else {
                throw CameraSourceError("\(deviceID) was asked for \(String(format: "%.3f", fps)) fps but runs at \(String(format: "%.3f", kept)) fps")
            }
            return 1e6 / kept
        }

        /// The timestamp clock's rate: GigE Vision's tick frequency register (Aravis turns ticks into ns with it), else
        /// the GevTimestampTickFrequency feature; nil when the camera has neither.
        func tickFrequency() -> Int64? {
            let hz = carv_camera_gv_tick_frequency(camera)
            if hz > 0 { return Int64(clamping: hz) }
            guard available("GevTimestampTickFrequency"), let hz = try? integer("GevTimestampTickFrequency"), hz > 0 else { return nil }
            return hz
        }

        func hostAddress() -> String? {
            var out = [CChar](repeating: 0, count: 64)
            guard carv_camera_gv_interface_address(camera, &out, 64) == 0 else { return nil }
            return text(out)
        }

        func exposureMicroseconds() -> Double? {
            if let name = first(["ExposureTime", "ExposureTimeAbs"]) { return try? float(name) }
            if available("ExposureTimeRaw") { return (try? integer("ExposureTimeRaw")).map(Double.init) }
            return nil
        }
        func setExposure(_ us: Double) throws {
            if available("ExposureAuto") { try? setString("ExposureAuto", "Off") }
            if let name = first(["ExposureTime", "ExposureTimeAbs"]) { return try setFloat(name, us) }
            try setInteger("ExposureTimeRaw", Int64(us.rounded()))
        }
        /// Gain in dB (`Gain`), or in the camera's own units where it has only `GainRaw` (as V4L2's gain).
        func gain() -> Double? {
            if let name = first(["Gain", "GainAbs"]) { return try? float(name) }
            if available("GainRaw") { return (try? integer("GainRaw")).map(Double.init) }
            return nil
        }
        func setGain(_ value: Double) throws {
            if available("GainAuto") { try? setString("GainAuto", "Off") }
            if let name = first(["Gain", "GainAbs"]) { return try setFloat(name, value) }
            try setInteger("GainRaw", Int64(value.rounded()))
        }

        func controlRanges() -> ControlRanges {
            var ranges = ControlRanges()
            if let name = first(["ExposureTime", "ExposureTimeAbs"]), let r = try? floatBounds(name) {
                ranges.exposureMicroseconds = Int(r.lowerBound.rounded(.up))...Int(min(r.upperBound, 1e9).rounded(.down))
            } else if available("ExposureTimeRaw"), let r = try? integerBounds("ExposureTimeRaw") {
                ranges.exposureMicroseconds = Int(r.lowerBound)...Int(min(r.upperBound, 1_000_000_000))
            }
            if let name = first(["Gain", "GainAbs"]), let r = try? floatBounds(name) {
                ranges.gainDecibels = r
            } else if available("GainRaw"), let r = try? integerBounds("GainRaw") {
                ranges.gainDecibels = Double(r.lowerBound)...Double(r.upperBound)
            }
            return ranges
        }

        /// What the camera is: vendor, model, serial, and its protocol by the device it opened as.
        func identity() -> DeviceIdentity {
            let transport = carv_camera_is_gv(camera) != 0 ? "GigEVision" : carv_camera_is_uv(camera) != 0 ? "USB3Vision" : nil
            return DeviceIdentity(driver: "aravis", transport: transport, vendor: string("DeviceVendorName"),
                                  model: string("DeviceModelName"),
                                  serial: string("DeviceSerialNumber") ?? string("DeviceID"))
        }

        /// Sizes, formats and rates for the handshake and `--list-cameras`.
        func description() throws -> GenICamDescription {
            let widths = try integerBounds("Width"), heights = try integerBounds("Height")
            let rates = try first(Self.frameRateNames).map { try floatBounds($0) }
            return GenICamDescription(identity: identity(), pixelFormats: try pixelFormats(),
                                      widthRange: Int(widths.lowerBound)...Int(widths.upperBound),
                                      heightRange: Int(heights.lowerBound)...Int(heights.upperBound),
                                      widthStep: Int(carv_integer_increment(camera, "Width")),
                                      heightStep: Int(carv_integer_increment(camera, "Height")),
                                      frameRateRange: rates, controlRanges: controlRanges(), hostAddress: hostAddress())
        }
    }

    // MARK: Devices

    /// Where each GigE Vision camera was last found (interfaces and device id → its answer), so opening it again
    /// for a take talks to it directly instead of discovering again.
    static let located = Mutex<[String: GigEVisionCameraFound]>([:])

    /// Every GenICam device found now without opening them: GigE Vision cameras answering on `interfaces` (none:
    /// GigE Vision is not looked for, nothing is broadcast) and USB3 Vision cameras. Throws one sentence when an
    /// interface cannot be used.
    public static func devices(interfaces: [String]) throws -> [GenICamDevice] {
        let answers = try GigEVisionDiscovery.discover(on: interfaces)
        located.withLock { cache in
            for found in answers { cache["\(interfaces.joined(separator: ","))/\(found.announcement.deviceID)"] = found }
        }
        let gige = answers.map { found in
            let a = found.announcement
            return GenICamDevice(deviceID: a.deviceID, protocolName: "GigEVision", vendor: a.vendor, model: a.model,
                                 serial: a.serialOrMAC, address: a.address)
        }
        let count = carv_update_device_list()
        func text(_ p: UnsafePointer<CChar>?) -> String { p.map { String(cString: $0) } ?? "" }
        let usb = (0..<count).map { i in
            GenICamDevice(deviceID: text(carv_device_id(i)), protocolName: text(carv_device_protocol(i)),
                          vendor: text(carv_device_vendor(i)), model: text(carv_device_model(i)),
                          serial: text(carv_device_serial(i)), address: text(carv_device_address(i)))
        }
        return gige + usb
    }

    /// Opens `deviceID` (GigE Vision looked for on `interfaces` only), reads what it offers, closes it; one sentence
    /// naming it when it cannot be opened.
    public static func describe(deviceID: String, interfaces: [String]) throws -> GenICamDescription {
        let camera = try Features.open(deviceID, interfaces: interfaces)
        defer { carv_camera_close(camera) }
        return try Features(camera: camera, deviceID: deviceID).description()
    }
}

/// The NUL-terminated text a C call wrote into `chars`.
func text(_ chars: [CChar]) -> String {
    chars.withUnsafeBufferPointer { buffer in
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
