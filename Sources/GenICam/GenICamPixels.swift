import Media

/// The GenICam pixel formats coord records (PFNC names and codes), each converted to the writers' yuv420p.
public enum GenICamPixelFormat: String, CaseIterable, Equatable, Sendable {
    case mono8 = "Mono8"
    case mono16 = "Mono16"
    case rgb8 = "RGB8"
    case bayerRG8 = "BayerRG8"
    case bayerGR8 = "BayerGR8"
    case bayerGB8 = "BayerGB8"
    case bayerBG8 = "BayerBG8"

    /// The PFNC code a buffer carries (`arv_buffer_get_image_pixel_format`).
    public var code: UInt32 {
        switch self {
        case .mono8: return 0x0108_0001
        case .mono16: return 0x0110_0007
        case .rgb8: return 0x0218_0014
        case .bayerGR8: return 0x0108_0008
        case .bayerRG8: return 0x0108_0009
        case .bayerGB8: return 0x0108_000A
        case .bayerBG8: return 0x0108_000B
        }
    }

    /// A format by the name a camera lists it under; older cameras still say `RGB8Packed`.
    public init?(name: String) {
        if name == "RGB8Packed" { self = .rgb8; return }
        self.init(rawValue: name)
    }

    public init?(code: UInt32) {
        guard let format = Self.allCases.first(where: { $0.code == code }) else { return nil }
        self = format
    }

    /// Bytes per pixel in the buffer.
    public var bytesPerPixel: Int {
        switch self {
        case .mono16: return 2
        case .rgb8: return 3
        default: return 1
        }
    }

    /// Bytes one `width`×`height` image takes on the wire (what a link carries per frame).
    public func imageBytes(width: Int, height: Int) -> Int { width * height * bytesPerPixel }

    /// Which colour the top-left 2×2 cell holds where (0 red, 1 green, 2 blue), row by row; nil for non-Bayer.
    var bayerCell: [Int]? {
        switch self {
        case .bayerRG8: return [0, 1, 1, 2]
        case .bayerGR8: return [1, 0, 2, 1]
        case .bayerGB8: return [1, 2, 0, 1]
        case .bayerBG8: return [2, 1, 1, 0]
        default: return nil
        }
    }

    /// The format to ask a camera for among those it offers: Bayer first (a third of RGB8's bytes on the link), then
    /// RGB8, then mono, 8 bits before 16 (the writers take 8 bits),
    /// nil when none is recordable.
    public static func preferred(among offered: [String]) -> GenICamPixelFormat? {
        let usable = Set(offered.compactMap { GenICamPixelFormat(name: $0) })
        let order: [GenICamPixelFormat] = [.bayerRG8, .bayerGR8, .bayerGB8, .bayerBG8, .rgb8, .mono8, .mono16]
        return order.first(where: usable.contains)
    }

    /// The name to set `PixelFormat` to, as the camera spells it among `offered`.
    public func name(among offered: [String]) -> String {
        if self == .rgb8, !offered.contains("RGB8"), offered.contains("RGB8Packed") { return "RGB8Packed" }
        return rawValue
    }
}

/// GenICam images to yuv420p (BT.601, limited range, as the V4L2 conversions): mono as grey, RGB8 with its chroma
/// averaged over each 2×2 block, Bayer demosaiced bilinearly (each colour the mean of its neighbours in 3×3).
public enum GenICamConversion {
    /// Converts one image of `frame`'s size; false, leaving `frame` untouched, when `bytes` is too short for it.
    @discardableResult
    public static func convert(_ bytes: UnsafeRawBufferPointer, format: GenICamPixelFormat, into frame: PlanarFrame) -> Bool {
        let width = frame.width, height = frame.height
        guard width > 0, height > 0, bytes.count >= format.imageBytes(width: width, height: height),
              let src = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
              let y = frame.luma.baseAddress, let cb = frame.cb.baseAddress, let cr = frame.cr.baseAddress else { return false }
        let cw = frame.chromaWidth, ch = frame.chromaHeight
        switch format {
        case .mono8, .mono16:
            let step = format.bytesPerPixel
            for i in 0..<(width * height) {
                // Mono16 is little-endian (PFNC): its high byte carries the picture.
                let v = step == 2 ? src[2 * i + 1] : src[i]
                y[i] = lumaOfGrey(v)
            }
            cb.update(repeating: 128, count: cw * ch)
            cr.update(repeating: 128, count: cw * ch)
        case .rgb8:
            convertRGB(width: width, height: height, y: y, cb: cb, cr: cr, cw: cw) { x, row in
                let p = src + 3 * (row * width + x)
                return (Int(p[0]), Int(p[1]), Int(p[2]))
            }
        case .bayerRG8, .bayerGR8, .bayerGB8, .bayerBG8:
            let cell = format.bayerCell!
            convertRGB(width: width, height: height, y: y, cb: cb, cr: cr, cw: cw) { x, row in
                var sum = (0, 0, 0), count = (0, 0, 0)
                for dy in -1...1 {
                    let yy = row + dy
                    guard yy >= 0, yy < height else { continue }
                    for dx in -1...1 {
                        let xx = x + dx
                        guard xx >= 0, xx < width else { continue }
                        let v = Int(src[yy * width + xx])
                        switch cell[(yy & 1) * 2 + (xx & 1)] {
                        case 0: sum.0 += v; count.0 += 1
                        case 1: sum.1 += v; count.1 += 1
                        default: sum.2 += v; count.2 += 1
                        }
                    }
                }
                // The pixel's own colour is exact, the others the mean of their neighbours (bilinear).
                let own = cell[(row & 1) * 2 + (x & 1)], v = Int(src[row * width + x])
                let r = own == 0 ? v : sum.0 / max(count.0, 1)
                let g = own == 1 ? v : sum.1 / max(count.1, 1)
                let b = own == 2 ? v : sum.2 / max(count.2, 1)
                return (r, g, b)
            }
        }
        return true
    }

    static func lumaOfGrey(_ v: UInt8) -> UInt8 { UInt8(16 + (Int(v) * 219 + 127) / 255) }

    /// BT.601 limited range from full-range RGB: luma per pixel, chroma from each 2×2 block's mean colour.
    private static func convertRGB(width: Int, height: Int, y: UnsafeMutablePointer<UInt8>, cb: UnsafeMutablePointer<UInt8>,
                                   cr: UnsafeMutablePointer<UInt8>, cw: Int, pixel: (Int, Int) -> (Int, Int, Int)) {
        var sums = [(Int, Int, Int, Int)](repeating: (0, 0, 0, 0), count: cw)
        for row in 0..<height {
            for x in 0..<width {
                let (r, g, b) = pixel(x, row)
                y[row * width + x] = UInt8(clamping: 16 + (66 * r + 129 * g + 25 * b + 128) >> 8)
                let s = sums[x / 2]
                sums[x / 2] = (s.0 + r, s.1 + g, s.2 + b, s.3 + 1)
            }
            if row % 2 == 1 || row == height - 1 {
                let crow = row / 2
                for cx in 0..<cw {
                    let s = sums[cx], n = max(s.3, 1)
                    let r = s.0 / n, g = s.1 / n, b = s.2 / n
                    cb[crow * cw + cx] = UInt8(clamping: 128 + (-38 * r - 74 * g + 112 * b + 128) >> 8)
                    cr[crow * cw + cx] = UInt8(clamping: 128 + (112 * r - 94 * g - 18 * b + 128) >> 8)
                    sums[cx] = (0, 0, 0, 0)
                }
            }
        }
    }
}
