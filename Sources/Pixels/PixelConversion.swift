#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The raw pixel layouts a V4L2 camera delivers that the recorder converts to yuv420p before encoding.
public enum RawPixelLayout: String, Equatable, Sendable, CaseIterable {
    /// Packed 4:2:2, Y0 U Y1 V (V4L2 `YUYV`), what every UVC webcam offers.
    case yuyv = "YUYV"
    /// Semi-planar 4:2:0: the Y plane, then interleaved U V (V4L2 `NV12`), common on CSI cameras.
    case nv12 = "NV12"
    /// Planar 4:2:0 (V4L2 `YU12`), already the writer's layout.
    case yu12 = "YU12"

    /// Bytes one image of `width`×`height` needs at least, with `bytesPerLine` (0: the tight stride).
    public func minimumBytes(width: Int, height: Int, bytesPerLine: Int) -> Int {
        let stride = bytesPerLine > 0 ? bytesPerLine : tightStride(width: width)
        switch self {
        case .yuyv: return stride * height
        case .nv12: return stride * height + stride * ((height + 1) / 2)
        case .yu12: return stride * height + 2 * ((stride + 1) / 2) * ((height + 1) / 2)
        }
    }

    /// The luma (or packed) line length without padding.
    public func tightStride(width: Int) -> Int { self == .yuyv ? width * 2 : width }
}

/// Conversions between the raw layouts and `PlanarFrame` (yuv420p). Plain loops over raw pointers: no C library.
public enum PixelConversion {
    /// Converts one raw image into `frame` (same size); false, leaving `frame` untouched, when `bytes` is too
    /// short for the image. 4:2:2 chroma is averaged over each pair of lines.
    @discardableResult
    public static func convert(_ bytes: UnsafeRawBufferPointer, layout: RawPixelLayout, bytesPerLine: Int,
                               into frame: PlanarFrame) -> Bool {
        let width = frame.width, height = frame.height
        let stride = bytesPerLine > 0 ? bytesPerLine : layout.tightStride(width: width)
        // YUYV pairs pixels, so its width is even (V4L2 never offers another).
        guard width > 0, height > 0, layout != .yuyv || width % 2 == 0, stride >= layout.tightStride(width: width),
              bytes.count >= layout.minimumBytes(width: width, height: height, bytesPerLine: stride),
              let src = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
              let y = frame.luma.baseAddress, let cb = frame.cb.baseAddress, let cr = frame.cr.baseAddress else { return false }
        let cw = frame.chromaWidth, ch = frame.chromaHeight
        switch layout {
        case .yuyv:
            for row in 0..<height {
                let line = src + row * stride
                let out = y + row * width
                for x in 0..<width { out[x] = line[2 * x] }
            }
            for crow in 0..<ch {
                let a = src + (2 * crow) * stride
                let b = src + min(2 * crow + 1, height - 1) * stride
                let outB = cb + crow * cw, outR = cr + crow * cw
                for cx in 0..<cw {
                    // Pixel pair cx: Y0 U Y1 V.
                    let i = 4 * cx
                    outB[cx] = UInt8((UInt16(a[i + 1]) + UInt16(b[i + 1]) + 1) / 2)
                    outR[cx] = UInt8((UInt16(a[i + 3]) + UInt16(b[i + 3]) + 1) / 2)
                }
            }
        case .nv12:
            for row in 0..<height { memcpy(y + row * width, src + row * stride, width) }
            let uv = src + stride * height
            for crow in 0..<ch {
                let line = uv + crow * stride
                let outB = cb + crow * cw, outR = cr + crow * cw
                for cx in 0..<cw {
                    outB[cx] = line[2 * cx]
                    outR[cx] = line[2 * cx + 1]
                }
            }
        case .yu12:
            for row in 0..<height { memcpy(y + row * width, src + row * stride, width) }
            let cstride = (stride + 1) / 2
            let u = src + stride * height, v = u + cstride * ch
            for crow in 0..<ch {
                memcpy(cb + crow * cw, u + crow * cstride, cw)
                memcpy(cr + crow * cw, v + crow * cstride, cw)
            }
        }
        return true
    }

    /// Packs `frame` as YUYV (each chroma line used for both of its luma lines) into `out`; returns the bytes
    /// written, 0 when `out` is too small. What a scripted YUYV camera delivers.
    public static func packYUYV(_ frame: PlanarFrame, into out: UnsafeMutableRawBufferPointer) -> Int {
        let width = frame.width, height = frame.height
        let needed = width * 2 * height
        guard width > 0, height > 0, width % 2 == 0, out.count >= needed,
              let dst = out.baseAddress?.assumingMemoryBound(to: UInt8.self),
              let y = frame.luma.baseAddress, let cb = frame.cb.baseAddress, let cr = frame.cr.baseAddress else { return 0 }
        let cw = frame.chromaWidth
        for row in 0..<height {
            let line = dst + row * width * 2
            let luma = y + row * width
            let b = cb + (row / 2) * cw, r = cr + (row / 2) * cw
            for cx in 0..<(width / 2) {
                line[4 * cx] = luma[2 * cx]
                line[4 * cx + 1] = b[cx]
                line[4 * cx + 2] = luma[2 * cx + 1]
                line[4 * cx + 3] = r[cx]
            }
        }
        return needed
    }
}
