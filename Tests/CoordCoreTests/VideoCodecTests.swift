import CoordCore
import Testing

@Suite struct VideoCodecTests {
    @Test func aNameInAnyCaseIsItsCodec() {
        #expect(VideoCodec(named: "MJPEG") == .mjpeg)
        #expect(VideoCodec(named: "ffv1") == .ffv1)
        #expect(VideoCodec(named: "H264") == .h264)
        #expect(VideoCodec(named: "prores") == nil)
        #expect(VideoCodec(rawValue: "MJPEG") == nil)
    }

    @Test func onlyH264PredictsBetweenFrames() {
        #expect(VideoCodec.allCases.filter { !$0.isIntra } == [.h264])
    }

    @Test func theRigFileAndTheSentenceListTheSameCodecs() {
        #expect(RigSpec.codecs == ["mjpeg", "ffv1", "h264"])
        #expect(VideoCodec.spelled == "mjpeg, ffv1 or h264")
    }
}
