#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A cheap moving picture for synthetic cameras: diagonal luma bars that move with the frame counter, tinted per camera.
///
/// Every luma row is a shifted copy of one precomputed ramp and chroma is a flat tint, so painting is memcpy/memset
/// only. The SYNCSTRIPE is painted separately, on top.
public enum TestPattern {
    /// Bars repeat every `period` pixels and move `speed` pixels per frame.
    static let period = 256, speed = 4
    /// Eight hues around the chroma circle (radius 40); camera `ordinal` takes hue `ordinal % 8`.
    static let tints: [(cb: UInt8, cr: UInt8)] = [
        (168, 128), (156, 156), (128, 168), (100, 156), (88, 128), (100, 100), (128, 88), (156, 100),
    ]

    public static func paint(into frame: PlanarFrame, frameCounter: UInt32, ordinal: UInt8) {
        let width = frame.width, height = frame.height
        guard width > 0, height > 0, let luma = frame.luma.baseAddress else { return }
        let shift = Int(frameCounter % UInt32(period)) * speed
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: width + period) { ramp in
            // Triangle wave 16…235 so the bars have soft edges (cheap to encode, like a real scene).
            for i in 0..<ramp.count {
                let phase = i % period
                let tri = phase < period / 2 ? phase : period - phase       // 0…128
                ramp[i] = UInt8(16 + tri * 219 / (period / 2))
            }
            let base = ramp.baseAddress!
            for y in 0..<height {
                memcpy(luma + y * width, base + (y + shift) % period, width)
            }
        }
        let tint = tints[Int(ordinal) % tints.count]
        if let cb = frame.cb.baseAddress, !frame.cb.isEmpty { memset(cb, Int32(tint.cb), frame.cb.count) }
        if let cr = frame.cr.baseAddress, !frame.cr.isEmpty { memset(cr, Int32(tint.cr), frame.cr.count) }
    }
}
