import CoordCore
import Foundation
import Pixels

/// Makes a camera's preview tiles: the picture scaled down by nearest sample (so the stripe's 8×8 blocks stay
/// sharp-edged and decodable at half width) and encoded as JPEG. One per camera, used by one thread at a time.
public final class PreviewTileMaker {
    private var scaled: PlanarFrame?
    private var encoder: JPEGEncoder?
    private var buffer: UnsafeMutableRawBufferPointer
    private let quality: Int

    /// - Parameter quality: the JPEG quantiser, 1…31 (as `ffmpeg -q:v`); 4 keeps the stripe's two levels apart.
    public init(quality: Int = 4) {
        self.quality = quality
        buffer = .allocate(byteCount: 1 << 20, alignment: 16)
    }

    deinit { buffer.deallocate() }

    /// The tile size for a camera of `width`×`height` asked for `tileWidth` pixels wide: never wider than the
    /// camera, the height following its aspect, both even.
    public static func size(width: Int, height: Int, tileWidth: Int) -> (width: Int, height: Int) {
        PreviewSettings(width: tileWidth, fps: 1).tileSize(width: width, height: height)
    }

    /// One tile of `picture`, `tileWidth` pixels wide, as JPEG bytes.
    public func tile(of picture: PlanarFrame, tileWidth: Int) throws -> [UInt8] {
        let (w, h) = Self.size(width: picture.width, height: picture.height, tileWidth: tileWidth)
        let target: PlanarFrame
        if w == picture.width && h == picture.height {
            target = picture
        } else {
            if scaled?.width != w || scaled?.height != h { scaled = PlanarFrame(width: w, height: h) }
            target = scaled!
            Self.samplePlane(picture.luma, picture.width, picture.height, into: target.luma, w, h)
            Self.samplePlane(picture.cb, picture.chromaWidth, picture.chromaHeight, into: target.cb, target.chromaWidth, target.chromaHeight)
            Self.samplePlane(picture.cr, picture.chromaWidth, picture.chromaHeight, into: target.cr, target.chromaWidth, target.chromaHeight)
        }
        if encoder?.width != w || encoder?.height != h { encoder = try JPEGEncoder(width: w, height: h, quality: quality) }
        // A JPEG of a w×h picture at these quantisers stays well under the raw size; grow the buffer if ever needed.
        let worst = w * h * 3 + 4096
        if buffer.count < worst {
            buffer.deallocate()
            buffer = .allocate(byteCount: worst, alignment: 16)
        }
        let count = try encoder!.encode(target, into: buffer)
        return Array(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
    }

    /// Nearest-sample scaling of one plane: each output pixel takes the source pixel under its centre.
    public static func samplePlane(_ source: UnsafeMutableBufferPointer<UInt8>, _ sw: Int, _ sh: Int,
                       into target: UnsafeMutableBufferPointer<UInt8>, _ tw: Int, _ th: Int) {
        guard sw > 0, sh > 0, tw > 0, th > 0, let src = source.baseAddress, let dst = target.baseAddress else { return }
        let columns = (0..<tw).map { min(sw - 1, ((2 * $0 + 1) * sw) / (2 * tw)) }
        columns.withUnsafeBufferPointer { columns in
            for y in 0..<th {
                let row = src + min(sh - 1, ((2 * y + 1) * sh) / (2 * th)) * sw
                let out = dst + y * tw
                for x in 0..<tw { out[x] = row[columns[x]] }
            }
        }
    }
}
