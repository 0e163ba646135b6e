// The node's reading of a USB webcam's isochronous alternate settings from sysfs, on the lab's own bytes: the raw
// descriptors of the gadget with two webcams (two UVC functions, one USB device on dummy_hcd's bus), as
// bench/vmlab_usb_bus.py read them from the guest's /sys/bus/usb/devices/1-1/descriptors (issue 36 item 4).
import CoordCore
import Foundation
import Testing
@testable import NodeAgent

@Suite struct HostProbeUsbIsoTests {
    static let labDescriptors: [UInt8] = {
        let hex = [
        "12010002000000406b1d02010106010203010902c3010401048001080b00020e03000509040000010e0100050d240110",
        "013400006cdc0201011224020101020000000000000000030200000c2405020100400201000000092403030101000200",
        "07058103100008052503100009040100000e0200060e240101730083000300000001001b240401025955593200001000",
        "800000aa00389b7110010000000022240501004001b40000f0d20000e0a50100c201001516050002151605002a2c0a00",
        "22240502008002680100c04b0300809706000807001516050002151605002a2c0a0006240d01010409040101010e0200",
        "0607058305001401080b02020e03000809040200010e0100080d240110013400006cdc02010312240201010200000000",
        "00000000030200000c240502010040020100000009240303010100020007058503100008052503100009040300000e02",
        "00090e240101730088000300000001001b240401025955593200001000800000aa00389b711001000000002224050100",
        "4001b40000f0d20000e0a50100c201001516050002151605002a2c0a0022240502008002680100c04b03008097060008",
        "07001516050002151605002a2c0a0006240d01010409040301010e02000907058805001401",
        ].joined()
        var bytes: [UInt8] = []
        var i = hex.startIndex
        while i < hex.endIndex {
            let j = hex.index(i, offsetBy: 2)
            bytes.append(UInt8(hex[i..<j], radix: 16)!)
            i = j
        }
        return bytes
    }()

    static let device = "sys/devices/platform/dummy_hcd.0/usb1/1-1"

    /// The guest's tree: two uvcvideo capture nodes on the one device, alt 1 in force on the first's stream.
    func labRoot(descriptors: [UInt8] = labDescriptors) throws -> FakeRoot {
        let d = Self.device
        let root = try FakeRoot(files: [
            "\(d)/speed": "480\n", "\(d)/bConfigurationValue": "1\n", "\(d)/busnum": "1\n",
            "\(d)/1-1:1.0/bInterfaceNumber": "00\n", "\(d)/1-1:1.1/bAlternateSetting": " 1\n",
            "\(d)/1-1:1.2/bInterfaceNumber": "02\n", "\(d)/1-1:1.3/bAlternateSetting": " 0\n",
        ], links: [
            "sys/class/video4linux/video2/device": "../../../devices/platform/dummy_hcd.0/usb1/1-1/1-1:1.0",
            "sys/class/video4linux/video4/device": "../../../devices/platform/dummy_hcd.0/usb1/1-1/1-1:1.2",
        ])
        try Data(descriptors).write(to: root.url.appendingPathComponent("\(d)/descriptors"))
        return root
    }

    @Test func eachLabWebcamExpectsItsWholeAlternateSetting() throws {
        let root = try labRoot()
        defer { root.remove() }
        let first = try #require(root.probe.usbIsoStream(forVideoDevice: "/dev/video2"))
        #expect(first.interface == 1 && first.inForce == 1 && first.stream.speed == .high)
        #expect(first.stream.altSettings == [UsbIsoAltSetting(alternateSetting: 1, endpointAddress: 0x83, wMaxPacketSize: 0x1400, bInterval: 1)])
        #expect(first.stream.reservedBytesPerSecond == 24_576_000)
        let second = try #require(root.probe.usbIsoStream(forVideoDevice: "/dev/video4"))
        #expect(second.interface == 3 && second.inForce == 0)
        #expect(second.stream.altSettings.map(\.endpointAddress) == [0x88])
        // Together they claim more than the bus leaves to periodic transfers.
        #expect(first.stream.reservedBytesPerSecond + second.stream.reservedBytesPerSecond > UsbSpeed.high.periodicBytesPerSecond)
        #expect(CameraListing.isochronousLine(first) == "  usb isochronous: interface 1 (high speed), alt 1 3072 B per 125 µs = "
            + "24.6 MB/s; reserves up to 24.6 MB/s of the 48.0 MB/s the bus leaves to periodic transfers; in force: alt 1")
    }

    @Test func aCameraWithoutIsochronousStreamingOrDescriptorsReservesNothing() throws {
        let truncated = try labRoot(descriptors: Array(Self.labDescriptors.prefix(40)))
        defer { truncated.remove() }
        #expect(truncated.probe.usbIsoStream(forVideoDevice: "/dev/video2") == nil)
        #expect(truncated.probe.usbIsoStream(forVideoDevice: "/dev/video9") == nil)
        #expect(truncated.probe.usbIsoStream(forVideoDevice: "..") == nil)
    }
}
