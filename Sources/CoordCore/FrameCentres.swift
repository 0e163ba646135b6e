/// Where each frame of one camera lands on the rig's grid, the arithmetic a recording and a preview share: the
/// frame's exposure centre as the phase loop estimates it, mapped onto the rig timebase by the clock mapping in
/// force now and never going backwards (whatever a clock update did); the group it is nearest and how far off it
/// is; and the frame duration that steers the sensor's frame after next onto the grid.
public struct FrameCentres: Sendable, Equatable {
    public struct Placed: Sendable, Equatable {
        /// Rig µs.
        public var center: Int64
        public var group: Int64
        /// The centre minus its group's grid instant, µs.
        public var phaseError: Int64
        public init(center: Int64, group: Int64, phaseError: Int64) {
            self.center = center; self.group = group; self.phaseError = phaseError
        }
    }

    public let grid: FrameGrid
    /// The last centre placed (rig µs).
    public private(set) var last: Int64?

    public init(grid: FrameGrid) { self.grid = grid }

    /// Places a frame whose centre is `centerLocal` on the node's clock.
    public mutating func place(centerLocal: Double, mapping: ClockMapping) -> Placed {
        var center = Int64(mapping.rig(fromLocal: centerLocal).rounded())
        if let last, center <= last { center = last + 1 }
        last = center
        let group = grid.nearestGroup(to: center)
        return Placed(center: center, group: group, phaseError: center - grid.instant(ofGroup: group))
    }

    /// The frame duration (local µs) to ask of a sensor that can steer, so the frame after next lands on the grid
    /// `phase` is locked onto; `acquiring` while no group is being written yet.
    public static func steer(_ phase: inout PhaseController, mapping: ClockMapping, acquiring: Bool) -> Double {
        phase.steer(toLocal: { mapping.local(fromRig: $0) }, toRig: { mapping.rig(fromLocal: $0) }, acquiring: acquiring)
    }

    /// Group `group` of `grid` on the node's clock, and the grid's period there (local µs): where a source
    /// starts aligned.
    public static func anchor(of grid: FrameGrid, group: Int64, mapping: ClockMapping) -> (instantLocal: Double, periodMicroseconds: Double) {
        let instant = Double(grid.instant(ofGroup: group))
        let first = mapping.local(fromRig: instant)
        return (first, mapping.local(fromRig: instant + grid.exactPeriodMicroseconds) - first)
    }
}
