import Capture
import CoordCore

// A camera bound to a node's trigger output (CONTRACT §17): FrameStart triggered from the node file's input and
// edge for the take, and its trigger features put back as they were after it.
extension GenICamCamera.Features {
    /// The FrameStart trigger's features as the camera had them.
    struct TriggerState: Equatable {
        var selector: String?
        var mode: String?
        var source: String?
        var activation: String?
    }

    func triggerState() -> TriggerState {
        let selector = string("TriggerSelector")
        if available("TriggerSelector") { try? setString("TriggerSelector", "FrameStart") }
        let state = TriggerState(selector: selector, mode: string("TriggerMode"), source: string("TriggerSource"),
                                 activation: string("TriggerActivation"))
        if let selector, selector != "FrameStart" { try? setString("TriggerSelector", selector) }
        return state
    }

    /// Sets FrameStart to be triggered by `trigger`'s source and edge; returns the camera's TriggerDelay (µs), if any.
    func applyTrigger(_ trigger: CameraTrigger) throws -> Double? {
        guard available("TriggerMode") else { throw CameraSourceError("\(deviceID) has no TriggerMode: it cannot be triggered by an output") }
        if available("TriggerSelector") { try setString("TriggerSelector", "FrameStart") }
        try setString("TriggerSource", trigger.source)
        if available("TriggerActivation") { try setString("TriggerActivation", trigger.activation) }
        try setString("TriggerMode", "On")
        return available("TriggerDelay") ? try? float("TriggerDelay") : (available("TriggerDelayAbs") ? try? float("TriggerDelayAbs") : nil)
    }

    /// Puts the FrameStart trigger back as `state` had it (best effort: the take is over).
    func restoreTrigger(_ state: TriggerState) {
        if available("TriggerSelector") { try? setString("TriggerSelector", "FrameStart") }
        if let mode = state.mode { try? setString("TriggerMode", mode) }
        if let source = state.source { try? setString("TriggerSource", source) }
        if let activation = state.activation { try? setString("TriggerActivation", activation) }
        if let selector = state.selector { try? setString("TriggerSelector", selector) }
    }
}
