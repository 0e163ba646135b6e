import Capture
import Foundation
import LibAV
import Pixels
import V4L2
import V4L2Simulator

extension V4L2Access {
    /// Every V4L2 access through `ScriptedV4L2Driver` with the JSON script at `url` (`coord-node-scripted
    /// --v4l2-script`, tests only): no real device is touched. Each camera gets its own driver, whose frames carry the real test
    /// pattern and the SYNCSTRIPE (true exposure centre = start of exposure + exposure / 2, and the ordinal the
    /// take configured for that camera), as YUYV or as a real JPEG for MJPG, so the recorder's conversion and
    /// passthrough paths are both exercised. Throws one sentence naming the file when the script cannot be used.
    public static func scripted(url: URL, seed: UInt64) throws -> V4L2Access {
        let script = try ScriptedV4L2Driver.load(url)
        let paths = script.devices.keys.sorted { a, b in
            let na = Int(a.reversed().prefix { $0.isNumber }.reversed().map(String.init).joined()) ?? -1
            let nb = Int(b.reversed().prefix { $0.isNumber }.reversed().map(String.init).joined()) ?? -1
            return na != nb ? na < nb : a < b
        }
        let listingPainter = ScriptedPainter(ordinal: StripeOrdinal())
        let listing = ScriptedV4L2Driver(script: script, seed: seed, painter: listingPainter.paint)
        return V4L2Access(isScripted: true, devicePaths: { paths }, listingDriver: listing) { _, ordinal in
            let painter = ScriptedPainter(ordinal: ordinal)
            return ScriptedV4L2Driver(script: script, seed: seed, painter: painter.paint)
        }
    }
}

/// Paints one scripted camera's frames: the moving test pattern and the SYNCSTRIPE, packed as the device's
/// format asks. Its driver calls it only under the driver's own lock (`ScriptedV4L2Driver.locked`), one frame at a
/// time, so it needs no lock and is not Sendable.
package final class ScriptedPainter {
    private let ordinal: StripeOrdinal
    private var picture: PlanarFrame?
    private var jpeg: JPEGEncoder?

    package init(ordinal: StripeOrdinal) {
        self.ordinal = ordinal
    }

    /// Fills `frame.buffer`; returns the bytes used (0 for a format it cannot paint, as an empty buffer).
    package func paint(_ frame: ScriptedV4L2Driver.Frame) -> Int {
        if picture?.width != frame.width || picture?.height != frame.height {
            picture = PlanarFrame(width: frame.width, height: frame.height)
        }
        guard let picture else { return 0 }
        let ordinal = self.ordinal.value
        TestPattern.paint(into: picture, frameCounter: frame.sequence, ordinal: ordinal)
        SyncStripe(ordinal: ordinal, frameCounter: frame.sequence,
                   trueCenterMicroseconds: frame.startOfExposureUs + frame.exposureUs / 2).paint(into: picture)
        switch frame.fourcc {
        case "YUYV":
            return PixelConversion.packYUYV(picture, into: frame.buffer)
        case _ where V4L2FormatChoice.jpegFourccs.contains(frame.fourcc):
            do {
                if jpeg?.width != frame.width || jpeg?.height != frame.height {
                    jpeg = try JPEGEncoder(width: frame.width, height: frame.height)
                }
                return try jpeg!.encode(picture, into: frame.buffer)
            } catch {
                return 0
            }
        default:
            return 0
        }
    }
}
