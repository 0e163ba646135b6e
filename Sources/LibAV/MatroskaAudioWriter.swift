#if canImport(Glibc)
import Glibc
#endif

/// Writes 16-bit PCM sound into a Matroska audio file (`.mka`) through the `Muxer`: no encoder, each packet the
/// samples as they are, its timestamp the index of its first sample (the time base is one sample), so the file
/// holds exactly the samples given and its duration is their count over the rate.
///
/// Not thread-safe: one writer is driven by one thread.
public final class MatroskaAudioWriter {
    public let path: String
    public let sampleRate: Int
    public let channels: Int
    /// Sample frames written so far (one sample per channel each).
    public private(set) var framesWritten: Int64 = 0

    private var muxer: Muxer?
    private var finished = false

    public init(path: String, sampleRate: Int, channels: Int, metadata: [String: String] = [:]) throws {
        self.path = path
        self.sampleRate = sampleRate
        self.channels = channels
        do {
            guard (8000...192_000).contains(sampleRate), (1...8).contains(channels) else {
                throw MediaError.invalid("create", path: path,
                                         "a sample rate of \(sampleRate) Hz with \(channels) channel(s) is not supported (8000-192000 Hz, 1-8 channels)")
            }
            let muxer = try Muxer(path: path)
            self.muxer = muxer
            try muxer.addAudioStream(sampleRate: sampleRate, channels: channels)
            try muxer.setMetadata(metadata)
            try muxer.open(clusterMilliseconds: 1000)
        } catch {
            finished = true
            let created = muxer?.createdFile == true
            release()
            if created { unlink(path) }
            throw error
        }
    }

    deinit { release() }

    /// Appends interleaved samples (a whole number of frames).
    public func write(_ samples: UnsafeBufferPointer<Int16>) throws {
        guard !finished, let muxer, muxer.headerWritten else {
            throw MediaError.invalid("write to", path: path, "the recording is already finished")
        }
        let frames = samples.count / channels
        guard frames > 0, samples.baseAddress != nil else { return }
        let bytes = UnsafeRawBufferPointer(start: samples.baseAddress, count: frames * channels * 2)
        try muxer.write(bytes, pts: framesWritten, duration: Int64(frames), timeBase: TimeBase(num: 1, den: Int32(sampleRate)),
                        keep: false, allocating: "write sound to", writing: "write sound to")
        framesWritten += Int64(frames)
    }

    public func write(_ samples: [Int16]) throws {
        try samples.withUnsafeBufferPointer { try write($0) }
    }

    /// The disk is full (the file could not hold the space it keeps to be finished in): take no more sound and
    /// `finish` now; every sample written so far is kept.
    public var isShortOfSpace: Bool { muxer?.isShortOfSpace ?? false }

    /// Writes the trailer and closes the file. Idempotent.
    public func finish() throws {
        if finished { return }
        finished = true
        defer { release() }
        try muxer?.finish()
    }

    private func release() {
        muxer?.release()
        muxer = nil
    }
}
