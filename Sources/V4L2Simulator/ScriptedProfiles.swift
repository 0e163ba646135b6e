// What real devices answer: the profiles a camera script names.
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

// ---- profiles: what real devices answer ----

struct SizeSpec {
    var width: UInt32
    var height: UInt32
    /// Frame rates offered, fastest first, as uvcvideo lists the intervals (1/fps).
    var fps: [UInt32]
}

struct FormatSpec {
    var pixelFormat: UInt32
    var description: String
    var compressed: Bool
    var sizes: [SizeSpec]
}

struct ControlError: Error {
    var code: Int32
}

struct ControlSpec {
    var id: UInt32
    var type: UInt32
    var name: String
    var minimum: Int32
    var maximum: Int32
    var step: Int32
    var defaultValue: Int32
    /// Menu items the device offers (others in range are EINVAL), for menu controls.
    var menuItems: [Int32] = []
    /// The auto control that governs this one, and the values of it under which this one may be set.
    var autoID: UInt32?
    var activeWhen: [Int32] = []

    /// What the control framework does with a value: integers clamp and round to the step, menus must name an item.
    func validate(_ value: Int32) -> Result<Int32, ControlError> {
        if type == CV4L2_CTRL_TYPE_MENU {
            guard value >= minimum, value <= maximum else { return .failure(ControlError(code: ERANGE)) }
            return menuItems.contains(value) ? .success(value) : .failure(ControlError(code: EINVAL))
        }
        let clamped = min(max(Int64(value), Int64(minimum)), Int64(maximum))
        let step = Int64(max(step, 1))
        let rounded = Int64(minimum) + (clamped - Int64(minimum) + step / 2) / step * step
        return .success(Int32(min(rounded, Int64(maximum))))
    }
}

struct Profile {
    var driver: String
    var card: String
    var busInfo: String
    var capabilities: UInt32
    var deviceCaps: UInt32
    var formats: [FormatSpec]
    var controls: [ControlSpec]

    var isCapture: Bool { (deviceCaps & CV4L2_CAP_VIDEO_CAPTURE) != 0 }

    func format(_ pixelFormat: UInt32) -> FormatSpec? { formats.first { $0.pixelFormat == pixelFormat } }
    func control(_ id: UInt32) -> ControlSpec? { controls.first { $0.id == id } }

    /// KERNEL_VERSION(6, 8, 0): what QUERYCAP reports on a current Ubuntu LTS.
    static let kernelVersion: UInt32 = (6 << 16) | (8 << 8) | 0

    static let names = ["metadata-node", "uvc-webcam"]

    static func named(_ name: String) -> Profile? {
        switch name {
        case "uvc-webcam": uvcWebcam
        case "metadata-node": metadataNode
        default: nil
        }
    }

    /// The whole UVC device: a video node and a metadata node (what QUERYCAP's `capabilities` reports on both).
    static let uvcDeviceCaps = CV4L2_CAP_VIDEO_CAPTURE | CV4L2_CAP_META_CAPTURE | CV4L2_CAP_STREAMING
        | CV4L2_CAP_EXT_PIX_FORMAT | CV4L2_CAP_DEVICE_CAPS

    /// A Logitech C920 as uvcvideo presents it (trimmed to three sizes).
    static let uvcWebcam = Profile(
        driver: "uvcvideo", card: "HD Pro Webcam C920", busInfo: "usb-0000:00:14.0-1",
        capabilities: uvcDeviceCaps,
        deviceCaps: CV4L2_CAP_VIDEO_CAPTURE | CV4L2_CAP_STREAMING | CV4L2_CAP_EXT_PIX_FORMAT,
        formats: [
            // Uncompressed 1080p needs more USB 2.0 bandwidth than 30 fps allows, hence the slow rates.
            FormatSpec(pixelFormat: CV4L2_PIX_FMT_YUYV, description: "YUYV 4:2:2", compressed: false, sizes: [
                SizeSpec(width: 640, height: 480, fps: [30, 24, 20, 15, 10, 5]),
                SizeSpec(width: 1280, height: 720, fps: [10, 5]),
                SizeSpec(width: 1920, height: 1080, fps: [5]),
            ]),
            FormatSpec(pixelFormat: CV4L2_PIX_FMT_MJPEG, description: "Motion-JPEG", compressed: true, sizes: [
                SizeSpec(width: 640, height: 480, fps: [30, 24, 20, 15, 10, 5]),
                SizeSpec(width: 1280, height: 720, fps: [30, 24, 20, 15, 10, 5]),
                SizeSpec(width: 1920, height: 1080, fps: [30, 24, 20, 15, 10, 5]),
            ]),
        ],
        controls: [
            ControlSpec(id: CV4L2_CID_AUTO_WHITE_BALANCE, type: CV4L2_CTRL_TYPE_BOOLEAN,
                        name: "White Balance Temperature, Auto", minimum: 0, maximum: 1, step: 1, defaultValue: 1),
            ControlSpec(id: CV4L2_CID_WHITE_BALANCE_TEMPERATURE, type: CV4L2_CTRL_TYPE_INTEGER,
                        name: "White Balance Temperature", minimum: 2000, maximum: 6500, step: 1, defaultValue: 4000,
                        autoID: CV4L2_CID_AUTO_WHITE_BALANCE, activeWhen: [0]),
            ControlSpec(id: CV4L2_CID_EXPOSURE_AUTO, type: CV4L2_CTRL_TYPE_MENU, name: "Exposure, Auto",
                        minimum: 0, maximum: 3, step: 1, defaultValue: CV4L2_EXPOSURE_APERTURE_PRIORITY,
                        menuItems: [CV4L2_EXPOSURE_MANUAL, CV4L2_EXPOSURE_APERTURE_PRIORITY]),
            ControlSpec(id: CV4L2_CID_EXPOSURE_ABSOLUTE, type: CV4L2_CTRL_TYPE_INTEGER, name: "Exposure (Absolute)",
                        minimum: 3, maximum: 2047, step: 1, defaultValue: 250,
                        autoID: CV4L2_CID_EXPOSURE_AUTO,
                        activeWhen: [CV4L2_EXPOSURE_MANUAL, CV4L2_EXPOSURE_SHUTTER_PRIORITY]),
            ControlSpec(id: CV4L2_CID_FOCUS_ABSOLUTE, type: CV4L2_CTRL_TYPE_INTEGER, name: "Focus (absolute)",
                        minimum: 0, maximum: 250, step: 5, defaultValue: 0,
                        autoID: CV4L2_CID_FOCUS_AUTO, activeWhen: [0]),
            ControlSpec(id: CV4L2_CID_FOCUS_AUTO, type: CV4L2_CTRL_TYPE_BOOLEAN, name: "Focus, Auto",
                        minimum: 0, maximum: 1, step: 1, defaultValue: 1),
            ControlSpec(id: CV4L2_CID_GAIN, type: CV4L2_CTRL_TYPE_INTEGER, name: "Gain",
                        minimum: 0, maximum: 255, step: 1, defaultValue: 0),
        ])

    /// UVC's second node: same camera, metadata only; capture ioctls are EINVAL, parm and controls ENOTTY.
    static let metadataNode = Profile(
        driver: "uvcvideo", card: "HD Pro Webcam C920", busInfo: "usb-0000:00:14.0-1",
        capabilities: uvcDeviceCaps,
        deviceCaps: CV4L2_CAP_META_CAPTURE | CV4L2_CAP_STREAMING | CV4L2_CAP_EXT_PIX_FORMAT,
        formats: [], controls: [])
}
