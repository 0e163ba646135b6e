#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// 8-bit planar YUV 4:2:0, luma stride = width, chroma stride = width/2 (width,height even). Owns its memory.
///
/// Odd sizes are tolerated (chroma is rounded up) so nothing here traps; the writer rejects them.
// @unchecked: a pooled buffer has one owner at a time (sensor, then recorder, then the pool again).
public final class PlanarFrame: @unchecked Sendable {
    public let width: Int, height: Int
    /// Chroma plane size: (width+1)/2 × (height+1)/2; for even sizes exactly width/2 × height/2.
    public let chromaWidth: Int, chromaHeight: Int
    public let luma: UnsafeMutableBufferPointer<UInt8>
    public let cb: UnsafeMutableBufferPointer<UInt8>
    public let cr: UnsafeMutableBufferPointer<UInt8>
    private let storage: UnsafeMutableRawPointer

    /// Allocates one block for all three planes and fills it with black (luma 16, chroma 128).
    public init(width: Int, height: Int) {
        let width = max(0, width), height = max(0, height)
        self.width = width
        self.height = height
        chromaWidth = (width + 1) / 2
        chromaHeight = (height + 1) / 2
        let lumaCount = width * height, chromaCount = chromaWidth * chromaHeight
        storage = UnsafeMutableRawPointer.allocate(byteCount: max(1, lumaCount + 2 * chromaCount), alignment: 64)
        let base = storage.bindMemory(to: UInt8.self, capacity: lumaCount + 2 * chromaCount)
        luma = UnsafeMutableBufferPointer(start: base, count: lumaCount)
        cb = UnsafeMutableBufferPointer(start: base + lumaCount, count: chromaCount)
        cr = UnsafeMutableBufferPointer(start: base + lumaCount + chromaCount, count: chromaCount)
        if lumaCount > 0 { memset(base, 16, lumaCount) }
        if chromaCount > 0 { memset(base + lumaCount, 128, 2 * chromaCount) }
    }

    deinit { storage.deallocate() }

    /// Copies the pixels of `other`; if sizes differ, only the overlapping top-left region is copied.
    public func copy(from other: PlanarFrame) {
        if other === self { return }
        if other.width == width && other.height == height {
            if let dst = luma.baseAddress, let src = other.luma.baseAddress {
                memcpy(dst, src, luma.count + cb.count + cr.count)  // planes are contiguous in both
            }
            return
        }
        Self.copyPlane(from: other.luma, stride: other.width, to: luma, stride: width,
                       columns: min(width, other.width), rows: min(height, other.height))
        let cols = min(chromaWidth, other.chromaWidth), rows = min(chromaHeight, other.chromaHeight)
        Self.copyPlane(from: other.cb, stride: other.chromaWidth, to: cb, stride: chromaWidth, columns: cols, rows: rows)
        Self.copyPlane(from: other.cr, stride: other.chromaWidth, to: cr, stride: chromaWidth, columns: cols, rows: rows)
    }

    private static func copyPlane(from src: UnsafeMutableBufferPointer<UInt8>, stride srcStride: Int,
                                  to dst: UnsafeMutableBufferPointer<UInt8>, stride dstStride: Int,
                                  columns: Int, rows: Int) {
        guard columns > 0, rows > 0, let s = src.baseAddress, let d = dst.baseAddress else { return }
        for row in 0..<rows { memcpy(d + row * dstStride, s + row * srcStride, columns) }
    }
}
