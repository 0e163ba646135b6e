import LibAV
import TakeDocuments

/// `coord deliver`'s `.mov` and `.wav` files, made by LibAV's `QuickTimeExport` (the libav funnel): this side only turns
/// a job into what it needs.
public enum QuickTimeWriter {
    /// Writes `job`'s `.mov` to `output` (a temporary name; the caller renames it). `progress` gets the bytes of the
    /// source consumed since its last call.
    public static func writeMov(_ job: MovJob, from input: String, to output: String, progress: (Int64) -> Void) throws {
        let mode: QuickTimeExport.VideoMode = switch job.mode {
        case .copy: .copy
        case .proresProxy: .proresProxy
        case .proresLT: .proresLT
        case .prores: .prores
        case .proresHQ: .proresHQ
        case .h264: .h264
        }
        var movie = QuickTimeExport.Movie(node: job.node, camera: job.camera, source: job.source, mode: mode, frames: job.frames,
                                          fps: job.fps, timecode: job.timecode, reel: job.reel)
        movie.rate = job.rationalRate
        do { try QuickTimeExport.writeMov(movie, from: input, to: output, progress: progress) } catch {
            throw DeliverFailure(error.sentence)
        }
    }

    /// Writes `job`'s Broadcast WAV: `bext` TimeReference and origination, then exactly `job.samples` samples from
    /// group 0's instant (silence where the recording does not reach); the caller appends the iXML chunk.
    public static func writeWav(_ job: WavJob, from input: String, to output: String, progress: (Int64) -> Void) throws {
        let sound = QuickTimeExport.Sound(node: job.node, mic: job.mic, source: job.source, streamIndex: job.streamIndex,
                                          sampleRate: job.sampleRate, channels: job.channels, skipSamples: job.skipSamples,
                                          samples: job.samples, timeReference: job.timeReference,
                                          originationDate: job.originationDate, originationTime: job.originationTime)
        do { try QuickTimeExport.writeWav(sound, from: input, to: output, progress: progress) } catch {
            throw DeliverFailure(error.sentence)
        }
    }
}
