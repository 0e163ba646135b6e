// The wire edge: decoding untrusted bytes, and conversions between core types and the protobuf types.
import CoordCore
import CoordWire
import Foundation
import Testing

private func decodeFailure(_ bytes: [UInt8]) -> NodeFailure? {
    do {
        _ = try Wire.decode(bytes)
        return nil
    } catch {
        return error
    }
}

private func helloEnvelope(_ requestID: UInt64 = 77, coordinator: String = "control-host.example") -> Envelope {
    var hello = Coord_V1_Hello()
    hello.coordinator = coordinator
    return Wire.envelope(requestID, .hello(hello))
}

extension SeededRandom {
    fileprivate mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &self) < p }
    fileprivate mutating func int(_ range: ClosedRange<Int64>) -> Int64 { Int64.random(in: range, using: &self) }
    fileprivate mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self) }
    fileprivate mutating func double(_ range: ClosedRange<Double>) -> Double { Double.random(in: range, using: &self) }
}

@Suite struct WireDecodeTests {
    @Test func encodedEnvelopeDecodesToItself() throws {
        let e = helloEnvelope()
        let decoded = try Wire.decode(Wire.encode(e))
        #expect(decoded == e)
        #expect(decoded.protocolVersion == Wire.protocolVersion)
        #expect(decoded.requestID == 77)
    }

    /// A first byte whose wire type is 6 or 7 cannot start any protobuf message.
    @Test func randomBytesWithAnInvalidWireTypeAreMalformed() throws {
        var rng = SeededRandom(seed: 1)
        for _ in 0..<500 {
            var bytes = (0..<rng.int(1...400)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            bytes[0] = (bytes[0] & 0x78) | (rng.chance(0.5) ? 6 : 7)
            let failure = try #require(decodeFailure(bytes), "\(bytes.prefix(8))")
            #expect(failure.code == .malformed, "\(failure)")
            #expect(failure.message.contains("\(bytes.count) bytes"), "\(failure)")
        }
    }

    /// Arbitrary random bytes are never accepted as a message of our version.
    @Test func arbitraryRandomBytesAreRefused() throws {
        var rng = SeededRandom(seed: 2)
        var malformed = 0
        for _ in 0..<1_000 {
            let bytes = (0..<rng.int(1...200)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let failure = try #require(decodeFailure(bytes), "random bytes decoded: \(bytes)")
            #expect(failure.code == .malformed || failure.code == .versionMismatch, "\(failure)")
            if failure.code == .malformed { malformed += 1 }
        }
        #expect(malformed > 900)
    }

    @Test func truncatedMessagesAreMalformed() throws {
        let full = Wire.encode(helloEnvelope())
        // The body is the envelope's last field; every cut inside it leaves a length-delimited field short.
        let headerOnly = Wire.encode(Wire.envelope(77, .hello(Coord_V1_Hello())))
        #expect(full.count > headerOnly.count + 2)
        for cut in (headerOnly.count + 1)..<full.count {
            let failure = try #require(decodeFailure(Array(full.prefix(cut))), "cut at \(cut) of \(full.count) decoded")
            #expect(failure.code == .malformed, "cut at \(cut): \(failure)")
        }
        // A varint cut in half is malformed too.
        let failure = try #require(decodeFailure([0x10, 0xFF]))
        #expect(failure.code == .malformed)
    }

    @Test func overOneMebibyteIsTooLarge() throws {
        var chunk = Coord_V1_Chunk()
        chunk.path = "n/cam0.mkv"
        chunk.data = Data(repeating: 0xAB, count: 1 << 20)
        let bytes = Wire.encode(Wire.envelope(5, .chunk(chunk)))
        #expect(bytes.count > 1 << 20)
        let failure = try #require(decodeFailure(bytes))
        #expect(failure.code == .tooLarge)
        #expect(failure.message.contains("\(bytes.count)") && failure.message.contains("\(1 << 20)"), "\(failure)")

        let garbage = [UInt8](repeating: 0xFF, count: (1 << 20) + 1)
        #expect(decodeFailure(garbage)?.code == .tooLarge)
    }

    @Test func exactlyOneMebibyteIsNotTooLarge() throws {
        var chunk = Coord_V1_Chunk()
        chunk.path = "n/cam0.mkv"
        // Size the payload so the whole envelope is exactly 1 MiB.
        chunk.data = Data(repeating: 0x5A, count: (1 << 20) - 100)
        let overhead = Wire.encode(Wire.envelope(5, .chunk(chunk))).count - chunk.data.count
        let size = (1 << 20) - overhead
        chunk.data = Data(repeating: 0x5A, count: size)
        let bytes = Wire.encode(Wire.envelope(5, .chunk(chunk)))
        try #require(bytes.count == 1 << 20, "could not hit exactly 1 MiB (\(bytes.count))")
        let decoded = try Wire.decode(bytes)
        #expect(decoded.chunk.data.count == size)
    }

    @Test func otherVersionIsAVersionMismatchNamingBothVersions() throws {
        var e = helloEnvelope(4_242)
        e.protocolVersion = 2
        let bytes = Wire.encode(e)
        let failure = try #require(decodeFailure(bytes))
        #expect(failure.code == .versionMismatch)
        #expect(failure.message.contains("version 2"), "\(failure)")
        #expect(failure.message.contains("version \(Wire.protocolVersion)"), "\(failure)")
        #expect(Wire.protocolVersion != 2)
        // The request id survives parsing, so the refusal can be matched by the peer.
        #expect(try Wire.parse(bytes).requestID == 4_242)

        var unset = helloEnvelope()
        unset.protocolVersion = 0
        #expect(decodeFailure(Wire.encode(unset))?.code == .versionMismatch)
    }

    @Test func errorEnvelopeCarriesTheFailure() throws {
        let codes: [NodeFailure.Code] = [.malformed, .unknownMessage, .versionMismatch, .tooLarge, .badState, .badConfig, .notFound, .io, .internal]
        for code in codes {
            let failure = NodeFailure(code, "something about \(code).")
            let decoded = try Wire.decode(Wire.encode(Wire.error(9, failure)))
            #expect(decoded.requestID == 9)
            guard case .error(let wire) = decoded.body else {
                Issue.record("not an error body: \(decoded)")
                continue
            }
            #expect(NodeFailure(wire: wire) == failure)
            #expect(NodeFailure.Code(wire: code.wire) == code)
        }
    }
}

@Suite struct WireConversionTests {
    @Test func cameraSettingsRoundTrip() throws {
        var rng = SeededRandom(seed: 3)
        for _ in 0..<300 {
            let s = CameraSettings(camera: "cam\(rng.int(0...99))", ordinal: rng.int(0...255), width: rng.int(2...8_192),
                                   height: rng.int(2...8_192), fps: rng.int(1...240), codec: VideoCodec.allCases[rng.int(0...2)])
            #expect(try CameraSettings(wire: s.wire) == s)
            let reparsed = try Coord_V1_CameraConfig(serializedBytes: try s.wire.serializedBytes() as [UInt8])
            #expect(try CameraSettings(wire: reparsed) == s)
        }
    }

    @Test func cameraCapabilitiesRoundTrip() throws {
        var rng = SeededRandom(seed: 4)
        for i in 0..<200 {
            let formats = (0..<rng.int(0...6)).map { _ in
                CameraFormat(pixelFormat: ["yuyv422", "mjpeg", "yuv420p"][rng.int(0...2)], width: rng.int(104...4_096),
                             height: rng.int(64...2_160), minFramePeriodMicroseconds: rng.int(Int64(1_000)...100_000),
                             maxFramePeriodMicroseconds: rng.int(Int64(100_000)...10_000_000))
            }
            let c = CameraCapabilities(name: "cam\(i)", source: i % 2 == 0 ? "v4l2" : "synthetic",
                                       device: i % 2 == 0 ? "/dev/video\(i)" : "", formats: formats,
                                       codecs: Array(VideoCodec.allCases.prefix(rng.int(0...3))))
            #expect(CameraCapabilities(wire: c.wire) == c)
            let reparsed = try Coord_V1_CameraInfo(serializedBytes: try c.wire.serializedBytes() as [UInt8])
            #expect(CameraCapabilities(wire: reparsed) == c)
        }
    }

    @Test func aCodecTheBuildDoesNotKnowIsLeftOutOfAnOfferAndNamedInASetting() throws {
        var info = Coord_V1_CameraInfo()
        info.name = "cam0"
        info.codecs = ["vp9", "mjpeg", "H264"]
        #expect(CameraCapabilities(wire: info).codecs == [.mjpeg])
        var config = CameraSettings(camera: "cam0", ordinal: 0, width: 640, height: 480, fps: 25, codec: .ffv1).wire
        config.codec = "prores"
        let failure = try #require(throws: NodeFailure.self) { try CameraSettings(wire: config) }
        #expect(failure.message == "camera cam0: unknown codec \"prores\" (a node records mjpeg, ffv1 or h264).")
    }

    @Test func clockMappingRoundTripsToTheMicrosecond() throws {
        var rng = SeededRandom(seed: 5)
        for _ in 0..<500 {
            let m = ClockMapping(offsetMicroseconds: Double(rng.int(Int64(-4_000_000_000)...4_000_000_000)), ratePPM: rng.double(-500...500),
                                 referenceLocal: rng.int(Int64(-1_000_000_000_000)...1_000_000_000_000),
                                 uncertaintyMicroseconds: rng.double(0...1_000))
            #expect(ClockMapping(wire: m.wire) == m)
            let reparsed = try Coord_V1_ClockMapping(serializedBytes: try m.wire.serializedBytes() as [UInt8])
            #expect(ClockMapping(wire: reparsed) == m)

            // The wire carries the offset in whole µs: a fractional offset comes back within half a µs.
            var fractional = m
            fractional.offsetMicroseconds += rng.double(-0.49...0.49)
            let back = ClockMapping(wire: fractional.wire)
            #expect(abs(back.offsetMicroseconds - fractional.offsetMicroseconds) <= 0.5)
            #expect(back.ratePPM == fractional.ratePPM && back.referenceLocal == fractional.referenceLocal)
        }
    }

    @Test func manifestFileRoundTrip() throws {
        let files = [
            TakeManifest.File(path: "node-a/cam0.mkv", bytes: 123_456_789_012, sha256: String(repeating: "0123456789abcdef", count: 4)),
            TakeManifest.File(path: "node-a/cam0.frames.csv", bytes: 0, sha256: ""),
            TakeManifest.File(path: "n/c.mkv", bytes: .max, sha256: String(repeating: "f", count: 64)),
        ]
        for f in files {
            #expect(TakeManifest.File(wire: f.wire) == f)
            let reparsed = try Coord_V1_FileInfo(serializedBytes: try f.wire.serializedBytes() as [UInt8])
            #expect(TakeManifest.File(wire: reparsed) == f)
        }
    }
}
