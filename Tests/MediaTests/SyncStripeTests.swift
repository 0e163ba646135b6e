import Testing
@testable import Pixels

@Suite struct SyncStripeTests {
    @Test func crc8MatchesSMBusCheckValue() {
        #expect(SyncStripe.crc8(Array("123456789".utf8)) == 0xF4)
        #expect(SyncStripe.crc8([]) == 0)
    }

    @Test func bytesAreLaidOutBigEndianWithCRC() {
        let stripe = SyncStripe(ordinal: 7, frameCounter: 0x0102_0304, trueCenterMicroseconds: 0x0A0B_0C0D_0E0F)
        let bytes = stripe.bytes()
        #expect(bytes.count == 13)
        #expect(Array(bytes[0..<12]) == [0xA5, 7, 1, 2, 3, 4, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F])
        #expect(bytes[12] == SyncStripe.crc8(bytes[0..<12]))
    }

    @Test(arguments: [
        SyncStripe(ordinal: 0, frameCounter: 0, trueCenterMicroseconds: 0),
        SyncStripe(ordinal: 1, frameCounter: 1, trueCenterMicroseconds: 1_234_567_890),
        SyncStripe(ordinal: 255, frameCounter: .max, trueCenterMicroseconds: (1 << 48) - 1),
        SyncStripe(ordinal: 0x5A, frameCounter: 0xDEAD_BEEF, trueCenterMicroseconds: 0x8000_0000_0001),
    ])
    func paintThenDecodeRoundTrips(stripe: SyncStripe) {
        let frame = PlanarFrame(width: 320, height: 240)
        TestPattern.paint(into: frame, frameCounter: stripe.frameCounter, ordinal: stripe.ordinal)
        stripe.paint(into: frame)
        let decoded = SyncStripe.decode(luma: UnsafeBufferPointer(frame.luma), stride: frame.width)
        #expect(decoded == stripe)
    }

    @Test func paintSetsStripeLumaAndNeutralChroma() {
        let frame = PlanarFrame(width: 128, height: 72)
        TestPattern.paint(into: frame, frameCounter: 3, ordinal: 2)
        SyncStripe(ordinal: 2, frameCounter: 3, trueCenterMicroseconds: 4).paint(into: frame)
        // Block 0 is the MSB of 0xA5 (1), block 1 is 0.
        #expect(frame.luma[0] == 235 && frame.luma[7 * 128 + 7] == 235)
        #expect(frame.luma[8] == 16)
        for y in 0..<32 { for x in 0..<52 { #expect(frame.cb[y * 64 + x] == 128 && frame.cr[y * 64 + x] == 128) } }
        // Outside the stripe the tint is untouched.
        #expect(frame.cb[52] != 128 || frame.cr[52] != 128)
    }

    @Test func decodeRejectsACorruptedBit() {
        let frame = PlanarFrame(width: 160, height: 120)
        let stripe = SyncStripe(ordinal: 3, frameCounter: 42, trueCenterMicroseconds: 987_654_321)
        stripe.paint(into: frame)
        #expect(SyncStripe.decode(luma: UnsafeBufferPointer(frame.luma), stride: 160) == stripe)
        // Flip block 60 (a bit of the time field): the CRC no longer matches.
        let x0 = (60 % 13) * 8, y0 = (60 / 13) * 8
        let flipped: UInt8 = frame.luma[y0 * 160 + x0] == 235 ? 16 : 235
        for y in y0..<(y0 + 8) { for x in x0..<(x0 + 8) { frame.luma[y * 160 + x] = flipped } }
        #expect(SyncStripe.decode(luma: UnsafeBufferPointer(frame.luma), stride: 160) == nil)
    }

    @Test func decodeRejectsWrongMagicAndShortPlanes() {
        let frame = PlanarFrame(width: 104, height: 64)
        #expect(SyncStripe.decode(luma: UnsafeBufferPointer(frame.luma), stride: 104) == nil)  // all black: magic 0
        #expect(SyncStripe.decode(luma: UnsafeBufferPointer(rebasing: frame.luma[0..<100]), stride: 104) == nil)
        #expect(SyncStripe.decode(luma: UnsafeBufferPointer(frame.luma), stride: 50) == nil)
    }

    @Test func grainKeepsTheStripeAndChangesEverythingElse() {
        let stripe = SyncStripe(ordinal: 2, frameCounter: 77, trueCenterMicroseconds: 123_456_789)
        let clean = PlanarFrame(width: 320, height: 240), grained = PlanarFrame(width: 320, height: 240)
        var state: UInt64 = 12345
        for frame in [clean, grained] {
            TestPattern.paint(into: frame, frameCounter: 77, ordinal: 2)
            if frame === grained { TestPattern.addGrain(to: frame, amplitude: 24, state: &state) }
            stripe.paint(into: frame)
        }
        #expect(SyncStripe.decode(luma: UnsafeBufferPointer(grained.luma), stride: 320) == stripe)
        var lumaDiffers = 0, lumaOutside = 0
        for y in 0..<240 {
            for x in 0..<320 {
                let i = y * 320 + x
                if x < SyncStripe.width && y < SyncStripe.height {
                    #expect(grained.luma[i] == clean.luma[i])       // the stripe area stays bit-exact
                } else {
                    lumaOutside += 1
                    if grained.luma[i] != clean.luma[i] { lumaDiffers += 1 }
                    #expect((16...235).contains(grained.luma[i]))
                }
            }
        }
        // Amplitude 24 draws from 49 values: about 1 sample in 49 stays as it was.
        #expect(lumaDiffers > lumaOutside * 9 / 10)
        for y in 0..<120 { for x in 0..<160 where x < 52 && y < 32 {
            #expect(grained.cb[y * 160 + x] == 128 && grained.cr[y * 160 + x] == 128)
        } }
        #expect(Array(grained.cb) != Array(clean.cb) && Array(grained.cr) != Array(clean.cr))
        // Amplitude 0 changes nothing.
        let again = PlanarFrame(width: 320, height: 240)
        again.copy(from: clean)
        TestPattern.addGrain(to: again, amplitude: 0, state: &state)
        #expect(Array(again.luma) == Array(clean.luma))
    }

    @Test func paintClipsToSmallFrames() {
        let frame = PlanarFrame(width: 40, height: 20)
        SyncStripe(ordinal: 1, frameCounter: 2, trueCenterMicroseconds: 3).paint(into: frame)
        #expect(frame.luma[0] == 235)
    }
}

@Suite struct PlanarFrameTests {
    @Test func planesHaveTheContractedSizes() {
        let frame = PlanarFrame(width: 64, height: 48)
        #expect(frame.luma.count == 64 * 48)
        #expect(frame.cb.count == 32 * 24 && frame.cr.count == 32 * 24)
        #expect(frame.luma.allSatisfy { $0 == 16 } && frame.cb.allSatisfy { $0 == 128 })
    }

    @Test func copyDuplicatesAllPlanes() {
        let a = PlanarFrame(width: 64, height: 48), b = PlanarFrame(width: 64, height: 48)
        TestPattern.paint(into: a, frameCounter: 9, ordinal: 1)
        b.copy(from: a)
        #expect(Array(a.luma) == Array(b.luma) && Array(a.cb) == Array(b.cb) && Array(a.cr) == Array(b.cr))
    }

    @Test func testPatternMovesWithTheCounter() {
        let a = PlanarFrame(width: 64, height: 48), b = PlanarFrame(width: 64, height: 48)
        TestPattern.paint(into: a, frameCounter: 0, ordinal: 0)
        TestPattern.paint(into: b, frameCounter: 1, ordinal: 0)
        #expect(Array(a.luma) != Array(b.luma))
        let c = PlanarFrame(width: 64, height: 48)
        TestPattern.paint(into: c, frameCounter: 0, ordinal: 1)
        #expect(Array(a.cb) != Array(c.cb) || Array(a.cr) != Array(c.cr))
        #expect(a.luma.allSatisfy { (16...235).contains($0) })
    }
}
