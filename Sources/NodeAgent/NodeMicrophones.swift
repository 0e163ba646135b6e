import CoordCore
import Foundation
import Logging
import Capture

/// The node's microphones (CONTRACT §9): opened early at configure, recorded beside the cameras from arm; one that
/// cannot start or goes away never fails the take, it is said as an event.
extension NodeAgent {
    /// Opens every microphone for the take; one that cannot start is left out with an event.
    func armMicrophones(_ arming: NodeTake.Arming, directory: URL, grid: FrameGrid, mapping: ClockMappingBox,
                        metadata: [String: String]) -> [MicrophoneRecorder] {
        var made: [MicrophoneRecorder] = []
        for (index, entry) in configuration.microphones.enumerated() {
            let mic = entry.name
            do throws(NodeFailure) {
                let source = warmMics.withLock { $0.removeValue(forKey: mic) } ?? audioSource(entry, index: index)
                let recorder = try MicrophoneRecorder(
                    mic: mic, node: configuration.name, directory: directory, source: source,
                    grid: grid, clock: mapping, metadata: metadata.merging(["coord_mic": mic]) { $1 }, logger: logger,
                    onFinish: { [weak self] in self?.report(.recorderFinished(arming, recorder: mic)) },
                    onEvent: { [weak self] kind, detail in self?.recorderEvent(arming, mic, kind, detail) })
                try recorder.arm()
                made.append(recorder)
            } catch {
                logger.warning("microphone left out of the take", metadata: ["mic": "\(mic)", "why": "\(error.message)"])
                recorderEvent(arming, mic, .microphoneEnded, error.message + " The take goes on without it.")
            }
        }
        return made
    }

    /// Something a recorder did on its own (a camera unplugged, a microphone lost, a write that failed).
    func recorderEvent(_ arming: NodeTake.Arming, _ recorder: String, _ kind: TakeEvent.Kind, _ detail: String) {
        report(.recorderEvent(arming, recorder: recorder, kind, detail, localNow: localNow()))
    }

    /// Opens every microphone for the take just configured (a failure is said again, as an event, at arm).
    func warmUpMicrophones() {
        coolMicrophones()
        for (index, entry) in configuration.microphones.enumerated() {
            let source = audioSource(entry, index: index)
            do {
                try source.start()
                warmMics.withLock { $0[entry.name] = source }
            } catch {
                logger.warning("microphone cannot start", metadata: ["mic": "\(entry.name)", "why": "\(error)"])
            }
        }
    }

    /// Lets go of microphones opened for a take that will not record (aborted, or reconfigured).
    func coolMicrophones() {
        let old = warmMics.withLock { warm -> [any AudioSource] in
            defer { warm = [:] }
            return Array(warm.values)
        }
        old.forEach { $0.stop() }
    }

    func audioSource(_ entry: MicrophoneEntry, index: Int) -> any AudioSource {
        let clock = simulatedClock
        switch entry.device {
        case .synthetic(let ppm):
            var spec = SyntheticMicrophone.Spec(rateErrorPPM: ppm, timestampJitterMicroseconds: configuration.timestampJitterMicroseconds,
                                                seed: configuration.seed &* 2_000_003 &+ UInt64(index))
            spec.endsAfterMicroseconds = entry.endsAfterMicroseconds
            return SyntheticMicrophone(spec: spec) { host in clock.local(fromHost: host) }
        case .alsa(let device):
            return ALSAMicrophone(device: device) { host in clock.local(fromHost: host) }
        }
    }
}
