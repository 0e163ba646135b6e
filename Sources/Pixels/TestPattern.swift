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

    /// How the picture looks through the sensor's controls: luma scaled by `gain` (exposure × gain, 1 = as
    /// painted) and the tint moved by `warmth` (white balance: positive is warmer). The stripe is painted after.
    public struct Look: Equatable, Sendable {
        public var gain: Double = 1
        public var warmth: Int = 0
        public init(gain: Double = 1, warmth: Int = 0) { self.gain = gain; self.warmth = warmth }
    }

    public static func paint(into frame: PlanarFrame, frameCounter: UInt32, ordinal: UInt8, look: Look = Look()) {
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
            if look.gain != 1 {
                for i in 0..<ramp.count {
                    let v = (Double(ramp[i]) - 16) * look.gain + 16
                    ramp[i] = UInt8(max(16, min(235, v.rounded())))
                }
            }
            let base = ramp.baseAddress!
            for y in 0..<height {
                memcpy(luma + y * width, base + (y + shift) % period, width)
            }
        }
        let tint = tints[Int(ordinal) % tints.count]
        let cbValue = max(16, min(240, Int(tint.cb) - look.warmth)), crValue = max(16, min(240, Int(tint.cr) + look.warmth))
        if let cb = frame.cb.baseAddress, !frame.cb.isEmpty { memset(cb, Int32(cbValue), frame.cb.count) }
        if let cr = frame.cr.baseAddress, !frame.cr.isEmpty { memset(cr, Int32(crValue), frame.cr.count) }
    }

    /// The largest grain amplitude a synthetic camera accepts (`coord-node --synthetic-grain`).
    public static let maxGrain = 64

    /// Adds sensor-like noise to a painted frame: every luma sample moves by a uniform draw from
    /// −amplitude…+amplitude and every chroma sample by a quarter of that (clamped to 16…235 and 16…240), so the
    /// picture compresses like camera footage rather than like the clean pattern. The top-left SYNCSTRIPE area
    /// (104×64 luma, 52×32 chroma) is left untouched, bit for bit. `state` is a xorshift64 state (never 0):
    /// one 64-bit draw gives eight samples, so this costs about a nanosecond per pixel.
    public static func addGrain(to frame: PlanarFrame, amplitude: Int, state: inout UInt64) {
        let amplitude = min(max(amplitude, 0), maxGrain)
        guard amplitude > 0 else { return }
        if state == 0 { state = 0x9E37_79B9_7F4A_7C15 }
        grainPlane(frame.luma, width: frame.width, height: frame.height, skipWidth: SyncStripe.width,
                   skipHeight: SyncStripe.height, amplitude: amplitude, ceiling: 235, state: &state)
        let chroma = max(1, amplitude / 4)
        let skipW = SyncStripe.width / 2, skipH = SyncStripe.height / 2
        grainPlane(frame.cb, width: frame.chromaWidth, height: frame.chromaHeight, skipWidth: skipW, skipHeight: skipH,
                   amplitude: chroma, ceiling: 240, state: &state)
        grainPlane(frame.cr, width: frame.chromaWidth, height: frame.chromaHeight, skipWidth: skipW, skipHeight: skipH,
                   amplitude: chroma, ceiling: 240, state: &state)
    }

    /// Noise over one plane (stride = width), leaving the top-left skipWidth × skipHeight samples as they are.
    private static func grainPlane(_ plane: UnsafeMutableBufferPointer<UInt8>, width: Int, height: Int, skipWidth: Int,
                                   skipHeight: Int, amplitude: Int, ceiling: Int32, state: inout UInt64) {
        guard width > 0, height > 0, let base = plane.baseAddress, plane.count >= width * height else { return }
        // A byte b maps to (b · span) >> 8 − amplitude: uniform enough over −amplitude…+amplitude, no division.
        let span = UInt32(2 * amplitude + 1), offset = Int32(amplitude)
        var s = state
        for y in 0..<height {
            let x0 = y < skipHeight ? min(skipWidth, width) : 0
            let row = base + y * width
            var x = x0
            while x < width {
                // xorshift64 (Marsaglia): three shifts and xors per 64 bits of noise.
                s ^= s << 13; s ^= s >> 7; s ^= s << 17
                var word = s
                let end = min(x + 8, width)
                while x < end {
                    let noise = Int32(truncatingIfNeeded: (UInt32(truncatingIfNeeded: word & 0xFF) &* span) >> 8) &- offset
                    let v = Int32(row[x]) &+ noise
                    row[x] = UInt8(truncatingIfNeeded: v < 16 ? 16 : (v > ceiling ? ceiling : v))
                    word >>= 8
                    x += 1
                }
            }
        }
        state = s
    }
}
