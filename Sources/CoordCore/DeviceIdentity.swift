/// What a camera is, as its driver names it: the manifest's `cameras[].device` (CONTRACT §11, §12).
///
/// A V4L2 camera fills `driver`, `card` and `busInfo` from VIDIOC_QUERYCAP; a GenICam camera `driver: "aravis"`,
/// `transport` ("GigEVision" or "USB3Vision", the manifest's `protocol`), `vendor`, `model` and `serial`; a
/// synthetic camera only `driver: "synthetic"`.
public struct DeviceIdentity: Codable, Equatable, Sendable {
    public var driver: String
    public var card: String?
    public var busInfo: String?
    public var transport: String?
    public var vendor: String?
    public var model: String?
    public var serial: String?
    /// A libcamera camera's pipeline handler ("rpi/pisp", "uvcvideo") and its id as libcamera lists it.
    public var pipeline: String?
    public var cameraID: String?
    /// A V4L2 camera's buffer stamp as the node chose it (issue 36; `device.timestamp`, not a contract key).
    public var timestamp: BufferStampChoice?

    public init(driver: String, card: String? = nil, busInfo: String? = nil, transport: String? = nil,
                vendor: String? = nil, model: String? = nil, serial: String? = nil, pipeline: String? = nil,
                cameraID: String? = nil) {
        self.pipeline = pipeline
        self.cameraID = cameraID
        self.driver = driver
        self.card = card
        self.busInfo = busInfo
        self.transport = transport
        self.vendor = vendor
        self.model = model
        self.serial = serial
    }

    /// A synthetic camera.
    public static let synthetic = DeviceIdentity(driver: "synthetic")

    enum CodingKeys: String, CodingKey {
        case driver, card, busInfo = "bus_info", transport = "protocol", vendor, model, serial, pipeline, cameraID = "id", timestamp
    }
}
