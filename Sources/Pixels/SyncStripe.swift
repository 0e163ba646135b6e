#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// SYNCSTRIPE v1 (CONTRACT §5): ground truth painted into the top-left 104×64 luma pixels of a synthetic frame.
///
/// 13 columns × 8 rows of 8×8 blocks, block b at column b % 13, row b / 13; luma 235 = 1, 16 = 0; bits MSB first
/// over 13 bytes: 0xA5, ordinal, frame counter (u32 BE), true exposure-centre µs (u48 BE), CRC-8 of the first 12.
public struct SyncStripe: Equatable, Sendable {
    public var ordinal: UInt8
    public var frameCounter: UInt32
    /// Only the low 48 bits are carried; a decoded stripe always has 0 ≤ value < 2⁴⁸.
    public var trueCenterMicroseconds: Int64

    public static let magic: UInt8 = 0xA5
    public static let byteCount = 13
    public static let columns = 13, rows = 8, blockSize = 8
    /// Painted area in luma pixels.
    public static let width = columns * blockSize, height = rows * blockSize
    public static let oneLuma: UInt8 = 235, zeroLuma: UInt8 = 16
    /// A block reads as 1 when the mean of its central 4×4 pixels exceeds this.
    public static let threshold = 125
    public static let uint48Mask: Int64 = (1 << 48) - 1

    public init(ordinal: UInt8, frameCounter: UInt32, trueCenterMicroseconds: Int64) {
        self.ordinal = ordinal
        self.frameCounter = frameCounter
        self.trueCenterMicroseconds = trueCenterMicroseconds
    }

    /// CRC-8, polynomial 0x07, init 0, not reflected, no final xor (CRC-8/SMBUS).
    public static func crc8(_ bytes: some Sequence<UInt8>) -> UInt8 {
        var crc: UInt8 = 0
        for byte in bytes {
            crc ^= byte
            for _ in 0..<8 { crc = crc & 0x80 != 0 ? (crc << 1) ^ 0x07 : crc << 1 }
        }
        return crc
    }

    /// The 13 bytes, in stripe order.
    public func bytes() -> [UInt8] {
        let t = UInt64(bitPattern: trueCenterMicroseconds & Self.uint48Mask)
        var out: [UInt8] = [
            Self.magic, ordinal,
            UInt8(truncatingIfNeeded: frameCounter >> 24), UInt8(truncatingIfNeeded: frameCounter >> 16),
            UInt8(truncatingIfNeeded: frameCounter >> 8), UInt8(truncatingIfNeeded: frameCounter),
            UInt8(truncatingIfNeeded: t >> 40), UInt8(truncatingIfNeeded: t >> 32), UInt8(truncatingIfNeeded: t >> 24),
            UInt8(truncatingIfNeeded: t >> 16), UInt8(truncatingIfNeeded: t >> 8), UInt8(truncatingIfNeeded: t),
        ]
        out.append(Self.crc8(out))
        return out
    }

    /// Paints the stripe (luma blocks) and sets the 52×32 chroma samples under it to 128; clipped to the frame.
    public func paint(into frame: PlanarFrame) {
        let bytes = self.bytes()
        let cols = min(Self.width, frame.width)
        guard cols > 0, let luma = frame.luma.baseAddress else { return }
        // One 104-pixel row per block row, copied into its 8 pixel rows.
        var row = [UInt8](repeating: Self.zeroLuma, count: Self.width)
        for blockRow in 0..<Self.rows {
            let y0 = blockRow * Self.blockSize
            if y0 >= frame.height { break }
            for column in 0..<Self.columns {
                let bit = blockRow * Self.columns + column
                let isOne = bytes[bit >> 3] & (0x80 >> UInt8(bit & 7)) != 0
                let value = isOne ? Self.oneLuma : Self.zeroLuma
                for x in (column * Self.blockSize)..<((column + 1) * Self.blockSize) { row[x] = value }
            }
            row.withUnsafeBufferPointer { src in
                for y in y0..<min(y0 + Self.blockSize, frame.height) {
                    memcpy(luma + y * frame.width, src.baseAddress!, cols)
                }
            }
        }
        let chromaCols = min(Self.width / 2, frame.chromaWidth)
        let chromaRows = min(Self.height / 2, frame.chromaHeight)
        guard chromaCols > 0, let cb = frame.cb.baseAddress, let cr = frame.cr.baseAddress else { return }
        for y in 0..<chromaRows {
            memset(cb + y * frame.chromaWidth, 128, chromaCols)
            memset(cr + y * frame.chromaWidth, 128, chromaCols)
        }
    }

    /// Decode from a luma plane (stride given) by thresholding the mean of each block's central 4×4 pixels at 125;
    /// nil unless the plane holds the whole stripe and the magic and CRC match.
    public static func decode(luma: UnsafeBufferPointer<UInt8>, stride: Int) -> SyncStripe? {
        guard stride >= width, luma.count >= (height - 1) * stride + width else { return nil }
        var bytes = [UInt8](repeating: 0, count: byteCount)
        for bit in 0..<(columns * rows) {
            let x0 = (bit % columns) * blockSize + 2, y0 = (bit / columns) * blockSize + 2
            var sum = 0
            for y in y0..<(y0 + 4) {
                let base = y * stride + x0
                sum += Int(luma[base]) + Int(luma[base + 1]) + Int(luma[base + 2]) + Int(luma[base + 3])
            }
            if sum > threshold * 16 { bytes[bit >> 3] |= 0x80 >> UInt8(bit & 7) }
        }
        guard bytes[0] == magic, crc8(bytes[0..<12]) == bytes[12] else { return nil }
        var counter: UInt32 = 0
        for i in 2..<6 { counter = counter << 8 | UInt32(bytes[i]) }
        var t: Int64 = 0
        for i in 6..<12 { t = t << 8 | Int64(bytes[i]) }
        return SyncStripe(ordinal: bytes[1], frameCounter: counter, trueCenterMicroseconds: t)
    }
}
