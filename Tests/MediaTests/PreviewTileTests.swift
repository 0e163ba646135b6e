import LibAV
import Pixels
import Testing

@Suite("Preview tiles")
struct PreviewTileTests {
    @Test(arguments: [(640, 480, 480, 480, 360), (1920, 1080, 480, 480, 270), (320, 240, 480, 320, 240), (1280, 720, 641, 640, 360)])
    func tileSizesFollowTheCamerasAspectAndAreEven(w: Int, h: Int, asked: Int, tw: Int, th: Int) {
        let size = PreviewTileMaker.size(width: w, height: h, tileWidth: asked)
        #expect(size.width == tw && size.height == th)
    }

    @Test func aTileIsAJPEGOfTheTileSizeAndKeepsTheStripesTwoLevels() throws {
        let picture = PlanarFrame(width: 640, height: 480)
        // A stripe-like pattern: 8×8 blocks alternating 235 and 16 in the top-left 104×64.
        for y in 0..<64 { for x in 0..<104 { picture.luma[y * 640 + x] = ((x / 8 + y / 8) % 2 == 0) ? 235 : 16 } }
        let maker = PreviewTileMaker()
        let jpeg = try maker.tile(of: picture, tileWidth: 320)
        #expect(jpeg.prefix(2) == [0xFF, 0xD8])
        #expect(jpeg.suffix(2) == [0xFF, 0xD9])
        // The scaled plane itself (before JPEG): each block's centre keeps its level at half width.
        let scaled = PlanarFrame(width: 320, height: 240)
        PreviewTileMaker.samplePlane(picture.luma, 640, 480, into: scaled.luma, 320, 240)
        for row in 0..<8 { for col in 0..<13 {
            let expected: UInt8 = (row + col) % 2 == 0 ? 235 : 16
            #expect(scaled.luma[(row * 4 + 2) * 320 + col * 4 + 2] == expected)
        } }
    }
}
