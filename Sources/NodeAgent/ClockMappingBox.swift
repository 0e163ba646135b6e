import CoordCore
import Foundation

/// The node's current clock mapping onto the rig timebase, shared by its cameras: the coordinator keeps
/// tracking the node's clock through the take and sends updates, which apply from the next frame on.
final class ClockMappingBox: @unchecked Sendable {
    private let lock = NSLock()
    private var mapping: ClockMapping
    private(set) var updates = 0

    init(_ mapping: ClockMapping) { self.mapping = mapping }

    var current: ClockMapping {
        lock.lock()
        defer { lock.unlock() }
        return mapping
    }

    func update(_ new: ClockMapping) {
        lock.lock()
        mapping = new
        updates += 1
        lock.unlock()
    }
}
