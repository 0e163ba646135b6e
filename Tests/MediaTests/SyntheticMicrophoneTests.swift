import Foundation
@testable import Capture
import Testing

@Suite("The synthetic microphone's sound and a buffer's level")
struct SyntheticMicrophoneTests {
    /// SYNCCLICK v1 sample by sample, as the contract states it: the faint noise, plus the 4 kHz burst within 1 ms
    /// after every whole second of true time.
    static func reference(atTrue t: Double, noise: inout UInt64) -> Int16 {
        noise ^= noise << 13; noise ^= noise >> 7; noise ^= noise << 17
        var v = Double(Int64(noise % 61) - 30)
        let sinceSecond = t - (t / 1_000_000).rounded(.down) * 1_000_000
        if sinceSecond < SyntheticMicrophone.burstMicroseconds {
            v += SyntheticMicrophone.burstAmplitude * sin(2 * Double.pi * SyntheticMicrophone.burstHertz * sinceSecond / 1e6)
        }
        return Int16(clamping: Int(v.rounded()))
    }

    /// Buffers that cross a whole second (the burst), one that starts inside a burst, and quiet ones: the one-loop
    /// fill gives the reference's noise exactly and its burst to within one step of rounding.
    @Test(arguments: [999_990_000.0, 1_000_000_500.0, 1_500_000_000.0, 12_345_999_200.25])
    func theBufferCarriesTheContractsSoundAcrossWholeSeconds(t0: Double) {
        let step = 1e6 / (48_000 * (1 + 37.5e-6))
        var fast = [Int16](repeating: 0, count: 960), noiseFast: UInt64 = 0x1234_5678_9ABC_DEF1
        SyntheticMicrophone.fill(&fast, fromTrue: t0, step: step, noise: &noiseFast)
        var noiseRef: UInt64 = 0x1234_5678_9ABC_DEF1
        let expected = (0..<960).map { Self.reference(atTrue: t0 + Double($0) * step, noise: &noiseRef) }
        #expect(noiseFast == noiseRef)
        var loud = 0
        for (i, (a, b)) in zip(fast, expected).enumerated() {
            #expect(abs(Int(a) - Int(b)) <= 1, "sample \(i): \(a) against \(b)")
            if abs(Int(b)) > 1000 { loud += 1 }
        }
        // The burst is there when the buffer meets a second's first millisecond, and only then.
        let sinceSecond = t0.truncatingRemainder(dividingBy: 1e6)
        let meetsBurst = sinceSecond < 1000 || sinceSecond + 960 * step > 1e6
        #expect((loud > 0) == meetsBurst)
    }

    @Test func aBuffersPeakIsItsLoudestSampleInDBFS() {
        func level(_ samples: [Int16]) -> Double { AudioBuffer(samples: samples, localTimestamp: 0, firstFrame: 0).peakDBFS }
        #expect(level([]) == -100)
        #expect(level([0, 0, 0]) == -100)
        #expect(abs(level([3, -32767, 12]) - 0) < 1e-9)
        // Int16.min has no positive twin: its magnitude is still read, a hair over full scale.
        #expect(level([.min]) > 0 && level([.min]) < 0.001)
        #expect(abs(level([0, 328, -10]) - 20 * log10(328.0 / 32767)) < 1e-9)
    }
}
