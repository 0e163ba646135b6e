import CoordCore
import Foundation
import Capture

/// A camera or a microphone recording a take: the node starts, stops, abandons and waits for them alike. What
/// each records from (a synthetic sensor, a V4L2 device, an ALSA capture device) is its source, below this.
protocol TakeRecorder: AnyObject, Sendable {
    /// The camera's or microphone's name (its files are named after it).
    var name: String { get }
    var kind: RecorderKind { get }
    /// Writes groups [group, stop); stop nil means until `stop(at:)`.
    func start(group: Int64, stop: Int64?)
    func stop(at group: Int64)
    /// Stops without finishing the take's groups (an abort, or a shutdown).
    func abandonRecording()
    /// Waits until the files are final (or the deadline passes); true if they are.
    func waitUntilFinished(deadline: DispatchTime) -> Bool
}

/// What a recorder is, for what only one kind has (a camera's adjustments, each kind's status).
enum RecorderKind {
    case camera(CameraRecorder)
    case microphone(MicrophoneRecorder)
}

extension CameraRecorder: TakeRecorder {
    var name: String { settings.camera }
    var kind: RecorderKind { .camera(self) }
}

extension MicrophoneRecorder: TakeRecorder {
    var name: String { mic }
    var kind: RecorderKind { .microphone(self) }
}

extension Array where Element == any TakeRecorder {
    /// The cameras among the recorders.
    var cameras: [CameraRecorder] {
        compactMap { if case .camera(let camera) = $0.kind { camera } else { nil } }
    }
}
