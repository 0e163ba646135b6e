import CoordCore
import Synchronization

/// The node's current clock mapping onto the rig timebase, shared by its cameras: the coordinator keeps
/// tracking the node's clock through the take and sends updates, which apply from the next frame on.
final class ClockMappingBox: Sendable {
    private let state: Mutex<(mapping: ClockMapping, updates: Int)>

    init(_ mapping: ClockMapping) { state = Mutex((mapping, 0)) }

    var current: ClockMapping { state.withLock { $0.mapping } }
    var updates: Int { state.withLock { $0.updates } }

    func update(_ new: ClockMapping) {
        state.withLock { $0 = (new, $0.updates + 1) }
    }
}
