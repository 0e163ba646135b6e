// A webcam's isochronous reservation crosses the handshake and is checked: a node's NaN, negative or absurd figure
// is refused naming the field, before the budget reads it (issue 36 item 4).
import CoordCore
import CoordWire
import Testing

@Suite struct UsbReservationWireTests {
    private func hello(_ reserved: Double) -> Coord_V1_HelloReply {
        var capabilities = CameraCapabilities(name: "cam0", source: "v4l2", device: "/dev/video0", formats: [
            CameraFormat(pixelFormat: "yuyv422", width: 320, height: 180, minFramePeriodMicroseconds: 33_333, maxFramePeriodMicroseconds: 66_667),
        ], codecs: [.mjpeg], bus: "usb3")
        capabilities.usbReservedBytesPerSecond = reserved
        var h = Coord_V1_HelloReply()
        h.node = "n1"
        h.agentVersion = "1.2.0"
        h.cameras = [capabilities.wire]
        return h
    }

    @Test func theReservationCrossesTheWire() throws {
        let h = hello(24_576_000)
        #expect(h.cameras[0].usbReservedBytesPerS == 24_576_000)
        #expect(CameraCapabilities(wire: try NodeReply.hello(h, from: "node n1").cameras[0]).usbReservedBytesPerSecond == 24_576_000)
        #expect(CameraCapabilities(wire: hello(0).cameras[0]).usbReservedBytesPerSecond == 0)
    }

    @Test(arguments: [Double.nan, -1, .infinity, 2e12])
    func aHostileReservationIsRefusedNamingTheField(value: Double) {
        do throws(FieldFault) {
            _ = try NodeReply.hello(hello(value), from: "node n1")
            Issue.record("\(value) passed")
        } catch {
            #expect(error.field == "HelloReply.cameras[0].usb_reserved_bytes_per_s")
        }
    }
}
