import CoordCore
import Capture

/// Everything the node agent changes after it started, in rooms by what changes together, each behind its own
/// `Mutex` on `NodeAgent` (`takeRoom`, `servingRoom`, `pressureRoom`, `controlsRoom`, `previewRoom`, `warmMics`).
/// Only `withLock` reaches them, nothing slow (a device opening, a file checksummed) runs while one is held, and
/// no room's lock is ever taken while another's is held.
enum NodeAgentState {
    /// The take's pure instance and the recorders and clock it opens and lets go: one decision changes the take's
    /// machine and its recorders together, so they share a lock.
    struct Take {
        var take: NodeTake
        /// The take's recorders, cameras and microphones alike, once its arm's devices are open.
        var recorders: [any TakeRecorder] = [] {
            willSet { retire(recorders) }
        }
        /// Each camera's counts from the takes whose recorders are gone: the metrics count over the process's life
        /// (kept here because a recorders change adds to them).
        var pastCameraCounts: [String: NodeMetricsSample.Camera] = [:]
        /// The clock mapping the recorders read every frame (nil while no take's devices are open).
        var clock: ClockMappingBox?

        init(take: NodeTake) { self.take = take }

        /// Adds the counts of recorders about to go to the process's totals.
        private mutating func retire(_ old: [any TakeRecorder]) {
            for recorder in old.cameras {
                let p = recorder.snapshot
                var c = pastCameraCounts[recorder.settings.camera] ?? NodeMetricsSample.Camera(camera: recorder.settings.camera, takeID: "")
                c.frames += UInt64(max(0, p.frames))
                c.dups += UInt64(max(0, p.dropped))
                c.drops += UInt64(max(0, p.sensorSkips))
                c.bytesWritten += p.bytesWritten
                pastCameraCounts[recorder.settings.camera] = c
            }
        }

        /// The shell's part of a directive, done under the lock with the take's change (the rest is carried out after).
        mutating func apply(_ directives: [NodeTake.Directive]) {
            for directive in directives {
                switch directive {
                case .configured, .openDevices, .abandonRecorders:
                    recorders = []
                    clock = nil
                default:
                    break
                }
            }
        }
    }

    /// File serving to collection: the takes being checksummed and what was served (metrics, chunk buffers).
    struct Serving {
        /// Takes whose files are being checksummed on the index queue, and why one could not be (said once to the
        /// next list request, which then tries again).
        var indexing: Set<String> = []
        var indexFailures: [String: String] = [:]
        /// Bytes of take files served to collection (the metrics).
        var bytesServed: UInt64 = 0
        /// When the last chunk was read (host µs); nil once its buffers were returned after a collection.
        var lastChunkServed: Int64?
    }

    /// The pressure sampling's pace and its last resources (the monitor itself lives on the pressure queue).
    struct Pressure {
        var lastSample: Int64 = 0
        var resources = NodeResources()
    }

    /// The operator's camera controls and the open cameras they are set on and read back from: a set and a
    /// read-back each change the values and what is open together.
    struct Controls {
        /// The operator's controls per camera (what each camera opens with), and the cameras open now that take them.
        var controls: [String: CameraControls] = [:]
        var openCameras: [String: OpenCamera] = [:]
        /// Each camera's controls as last read back from it while open, and when (host µs): what Status reports.
        var controlsRead: [String: (at: Int64, controls: CameraControls)] = [:]
        /// Cameras whose controls are being read back now (one read at a time each).
        var controlsReading: Set<String> = []

        /// A Configure's controls become what its cameras open with.
        mutating func apply(_ directives: [NodeTake.Directive]) {
            for case .configured(_, let cameras) in directives {
                for s in cameras where !s.controls.isEmpty {
                    controls[s.camera] = (controls[s.camera] ?? CameraControls()).updated(with: s.controls)
                }
            }
        }
    }

    /// A camera open now (preview or take); the camera itself takes `apply` from any thread.
    struct OpenCamera {
        weak var camera: (any ControllableCamera & Sendable)?
    }

    /// The cameras open for preview only while no take holds them.
    struct PreviewRun {
        var cameras: [PreviewCamera]
        var key: PreviewKey
        var clock: ClockMappingBox
        var leaseUntil: Int64
        /// The grid the cameras are steered onto (a Snap's groups are on it).
        var grid: FrameGrid? = nil
        /// The operator's free-running trigger train on the preview's grid (NodePreviewTrain.swift): ends with the run.
        var train: [TriggerGenerator] = []
    }

    /// What a preview was opened for: a StartPreview asking the same renews it.
    struct PreviewKey: Equatable {
        var settings: [CameraSettings]
        var t0: Int64
        var period: Int64
    }
}
