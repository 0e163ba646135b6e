// The size a kept still's file states: a PNG's IHDR and a baseline TIFF's first IFD (either byte order, SHORT or
// LONG values), and nothing from a file that is neither or is cut short.
import CoordCore
import Testing

@Suite struct StillImageSizeTests {
    @Test func aPNGsHeaderGivesItsSize() {
        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13] + Array("IHDR".utf8)
        png += [0, 0, 0x07, 0x80, 0, 0, 0x04, 0x38, 8, 2, 0, 0, 0]
        #expect(StillImageSize.of(png).map { [$0.width, $0.height] } == [1920, 1080])
        #expect(StillImageSize.of(Array(png.prefix(20))) == nil)
    }

    @Test func aTIFFsFirstIFDGivesItsSizeInEitherByteOrder() {
        // Little-endian, IFD at 8: ImageWidth SHORT 3840, ImageLength LONG 2160.
        let little: [UInt8] = [0x49, 0x49, 42, 0, 8, 0, 0, 0, 2, 0,
                               0, 1, 3, 0, 1, 0, 0, 0, 0x00, 0x0F, 0, 0,
                               1, 1, 4, 0, 1, 0, 0, 0, 0x70, 0x08, 0, 0]
        #expect(StillImageSize.of(little).map { [$0.width, $0.height] } == [3840, 2160])
        let bigEndian: [UInt8] = [0x4D, 0x4D, 0, 42, 0, 0, 0, 8, 0, 2,
                                  1, 0, 0, 3, 0, 0, 0, 1, 0x02, 0x80, 0, 0,
                                  1, 1, 0, 3, 0, 0, 0, 1, 0x01, 0xE0, 0, 0]
        #expect(StillImageSize.of(bigEndian).map { [$0.width, $0.height] } == [640, 480])
        // An IFD past the end, a missing height, or a JPEG: no size.
        #expect(StillImageSize.of([0x49, 0x49, 42, 0, 0xFF, 0, 0, 0]) == nil)
        #expect(StillImageSize.of(Array(little.prefix(22))) == nil)
        #expect(StillImageSize.of([0xFF, 0xD8, 0xFF, 0xE0, 0, 16, 0x4A, 0x46]) == nil)
        #expect(StillImageSize.of([]) == nil)
    }
}
