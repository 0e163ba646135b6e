import CoordCore
import Foundation
import Pixels
import Synchronization
import V4L2

/// How a node reaches its V4L2 devices: libv4l2 and the kernel, or (`coord-node-scripted --v4l2-script`, tests
/// only) a scripted driver per camera that behaves like a real webcam and paints the test pattern and SYNCSTRIPE.
public final class V4L2Access: Sendable {
    /// The real devices under /dev, through libv4l2.
    public static let system = V4L2Access(
        isScripted: false, devicePaths: { V4L2Device.listDevices() }, listingDriver: LibV4L2Driver.shared,
        driverForCamera: { _, _ in LibV4L2Driver.shared })

    /// Whether the devices are scripted (no real camera is touched).
    public let isScripted: Bool
    private let paths: @Sendable () -> [String]
    private let listingDriver: any V4L2Driver & Sendable
    private let driverForCamera: @Sendable (String, StripeOrdinal) -> any V4L2Driver & Sendable
    /// Each camera's driver and stripe ordinal, made the first time the camera is reached.
    private let cameras = Mutex<(drivers: [String: any V4L2Driver & Sendable], ordinals: [String: StripeOrdinal])>(([:], [:]))

    /// `driverForCamera(camera, ordinal)` makes the driver one camera's device is opened through; a scripted one
    /// paints `ordinal.value` into its stripe.
    package init(isScripted: Bool, devicePaths: @escaping @Sendable () -> [String], listingDriver: any V4L2Driver & Sendable,
                 driverForCamera: @escaping @Sendable (String, StripeOrdinal) -> any V4L2Driver & Sendable) {
        self.isScripted = isScripted
        self.paths = devicePaths
        self.listingDriver = listingDriver
        self.driverForCamera = driverForCamera
    }

    /// The device nodes `--list-cameras` looks at: /dev/video* in numeric order, or the script's devices.
    public func devicePaths() -> [String] { paths() }

    /// The ordinal a scripted camera paints into its stripe from now on (the one the take configured); a real
    /// camera paints nothing.
    public func setStripeOrdinal(_ ordinal: UInt8, camera: String) {
        stripeOrdinal(camera).set(ordinal)
    }

    /// Describes one device node for listing (any device, not only configured cameras).
    public func describe(path: String) throws -> V4L2CameraDescription {
        try V4L2CameraDescription.probe(path: path, driver: listingDriver)
    }

    /// Describes the device of a configured camera, through that camera's own driver.
    public func describe(camera: String, path: String) throws -> V4L2CameraDescription {
        try V4L2CameraDescription.probe(path: path, driver: driver(camera))
    }

    /// Opens and configures a configured camera's device for a take (see `V4L2Camera.init`).
    public func open(camera: String, path: String, width: Int, height: Int, periodMicroseconds: Double, codec: VideoCodec,
                     localClock: @escaping @Sendable (Int64) -> Int64) throws -> V4L2Camera {
        try V4L2Camera(path: path, driver: driver(camera), width: width, height: height, periodMicroseconds: periodMicroseconds,
                       codec: codec, localClock: localClock)
    }

    private func driver(_ camera: String) -> any V4L2Driver & Sendable {
        let ordinal = stripeOrdinal(camera)
        return cameras.withLock { cameras in
            if let driver = cameras.drivers[camera] { return driver }
            let driver = driverForCamera(camera, ordinal)
            cameras.drivers[camera] = driver
            return driver
        }
    }

    private func stripeOrdinal(_ camera: String) -> StripeOrdinal {
        cameras.withLock { cameras in
            if let box = cameras.ordinals[camera] { return box }
            let box = StripeOrdinal()
            cameras.ordinals[camera] = box
            return box
        }
    }
}

/// The ordinal one scripted camera paints, set by the node when a take configures the camera and read by the
/// scripted driver's painter on its own thread.
package final class StripeOrdinal: Sendable {
    private let ordinal = Mutex<UInt8>(0)

    package init() {}

    package var value: UInt8 { ordinal.withLock { $0 } }

    package func set(_ value: UInt8) { ordinal.withLock { $0 = value } }
}

extension V4L2CameraDescription {
    /// What the node declares for this camera in its handshake (see `V4L2FormatChoice.cameraFormats`).
    public var handshakeFormats: [CameraFormat] { V4L2FormatChoice.cameraFormats(formats) }

    /// The driver's bus description, e.g. "usb-0000:00:14.0-1".
    public var busInfo: String { capabilities.busInfo }

    /// Why this device cannot be recorded at all (no format coord converts or passes through), or nil.
    public var formatProblem: String? {
        guard handshakeFormats.isEmpty else { return nil }
        let offered = formats.isEmpty ? "none" : formats.map(\.fourcc).joined(separator: ", ")
        return "\(path) offers no format coord can record (it offers \(offered); coord takes MJPG, YUYV, NV12 or YU12)"
    }
}
