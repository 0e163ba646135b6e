import Pixels

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
/// averaged over each 2×2 block, Bayer demosaiced per 2×2 cell — each pixel keeps its own colour and takes the
/// missing ones from its cell (red, blue, the mean of the two greens), the cell's mean colour is its chroma. Plain
/// pointer loops over whole cells: the recorder converts every frame, in debug builds too.
public enum GenICamConversion {
    /// Converts one image of `frame`'s size (even width and height, as the rig's sizes are); false, leaving `frame`
    /// untouched, when `bytes` is too short for it.
    @discardableResult
    public static func convert(_ bytes: UnsafeRawBufferPointer, format: GenICamPixelFormat, into frame: PlanarFrame) -> Bool {
        let width = frame.width, height = frame.height
        guard width > 0, height > 0, width % 2 == 0, height % 2 == 0, bytes.count >= format.imageBytes(width: width, height: height),
              let src = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
              let y = frame.luma.baseAddress, let cb = frame.cb.baseAddress, let cr = frame.cr.baseAddress else { return false }
        let cw = frame.chromaWidth, ch = frame.chromaHeight
        switch format {
        case .mono8, .mono16:
            let table = greyLuma
            let step = format.bytesPerPixel, high = step - 1
            // Mono16 is little-endian (PFNC): its high byte carries the picture.
            for i in 0..<(width * height) { y[i] = table[Int(src[step * i + high])] }
            cb.update(repeating: 128, count: cw * ch)
            cr.update(repeating: 128, count: cw * ch)
        case .rgb8:
            for cy in 0..<ch {
                for cx in 0..<cw {
                    var sr = 0, sg = 0, sb = 0
                    for dy in 0..<2 {
                        let row = 2 * cy + dy
                        for dx in 0..<2 {
                            let x = 2 * cx + dx
                            let p = src + 3 * (row * width + x)
                            let r = Int(p[0]), g = Int(p[1]), b = Int(p[2])
                            y[row * width + x] = luma(r, g, b)
                            sr += r; sg += g; sb += b
                        }
                    }
                    cb[cy * cw + cx] = blueDifference(sr >> 2, sg >> 2, sb >> 2)
                    cr[cy * cw + cx] = redDifference(sr >> 2, sg >> 2, sb >> 2)
                }
            }
        case .bayerRG8, .bayerGR8, .bayerGB8, .bayerBG8:
            // Offsets in the cell (0 top-left, 1 top-right, 2 bottom-left, 3 bottom-right) of red, blue and the greens.
            let cell = format.bayerCell!
            let ri = cell.firstIndex(of: 0)!, bi = cell.firstIndex(of: 2)!
            let g1 = cell.firstIndex(of: 1)!, g2 = cell.lastIndex(of: 1)!
            let offsets = [0, 1, width, width + 1]
            let ro = offsets[ri], bo = offsets[bi], g1o = offsets[g1], g2o = offsets[g2]
            for cy in 0..<ch {
                for cx in 0..<cw {
                    let top = 2 * cy * width + 2 * cx
                    let p = src + top
                    let r = Int(p[ro]), b = Int(p[bo]), ga = Int(p[g1o]), gb = Int(p[g2o])
                    let g = (ga + gb + 1) >> 1
                    y[top + ro] = luma(r, g, b)
                    y[top + bo] = luma(r, g, b)
                    y[top + g1o] = luma(r, ga, b)
                    y[top + g2o] = luma(r, gb, b)
                    cb[cy * cw + cx] = blueDifference(r, g, b)
                    cr[cy * cw + cx] = redDifference(r, g, b)
                }
            }
        }
        return true
    }

    /// Limited-range luma of each grey level.
    static let greyLuma: [UInt8] = (0..<256).map { UInt8(16 + ($0 * 219 + 127) / 255) }

    @inline(__always) static func luma(_ r: Int, _ g: Int, _ b: Int) -> UInt8 {
        UInt8(truncatingIfNeeded: 16 + (66 * r + 129 * g + 25 * b + 128) >> 8)
    }
    @inline(__always) static func blueDifference(_ r: Int, _ g: Int, _ b: Int) -> UInt8 {
        UInt8(truncatingIfNeeded: 128 + (-38 * r - 74 * g + 112 * b + 128) >> 8)
    }
    @inline(__always) static func redDifference(_ r: Int, _ g: Int, _ b: Int) -> UInt8 {
        UInt8(truncatingIfNeeded: 128 + (112 * r - 94 * g - 18 * b + 128) >> 8)
    }
}
