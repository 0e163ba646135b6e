import Testing
@testable import CoordCore

/// The refusal a call throws, or nil if it went through.
private func refusal(_ body: () throws -> Void) -> NodeFailure? {
    do {
        try body()
        return nil
    } catch let failure as NodeFailure {
        return failure
    } catch {
        Issue.record("not a NodeFailure: \(error)")
        return nil
    }
}

@Suite struct NodeTakeMachineTests {
    @Test func happyPathThroughEveryState() throws {
        var m = NodeTakeMachine()
        #expect(m.state == .idle && m.takeID == nil)
        try m.configure(takeID: "T1", at: 0)
        #expect(m.state == .configured && m.takeID == "T1")
        try m.arm(takeID: "T1")
        #expect(m.state == .armed)
        try m.start(takeID: "T1")
        #expect(m.state == .recording)
        try m.stop(takeID: "T1")           // a stop request does not change state by itself
        #expect(m.state == .recording)
        m.finish()
        #expect(m.state == .finished)
        try m.stop(takeID: "T1")           // a repeated stop after the finish is accepted
        try m.configure(takeID: "T2", at: 0)      // the next take
        #expect(m.state == .configured && m.takeID == "T2")
    }

    @Test func anotherTakeIsRefusedWhileAConfiguredOneHoldsTheNode() throws {
        var m = NodeTakeMachine()
        try m.configure(takeID: "T1", at: 1_000_000)
        try m.configure(takeID: "T1", at: 1_500_000)  // the same take again: its own coordinator retrying
        let lease = NodeTakeMachine.configureLeaseMicroseconds
        let refused = try #require(refusal { try m.configure(takeID: "T2", at: 1_000_000 + lease - 1) })
        #expect(refused.code == .badState && refused.message.contains("T1") && refused.message.contains("T2"), "\(refused)")
        #expect(m.takeID == "T1")
    }

    @Test func reconfiguringAfterTheLeaseReplacesTheTake() throws {
        var m = NodeTakeMachine()
        try m.configure(takeID: "T1", at: 0)
        try m.configure(takeID: "T2", at: NodeTakeMachine.configureLeaseMicroseconds)
        #expect(m.takeID == "T2" && m.state == .configured)
        let f = try #require(refusal { try m.arm(takeID: "T1") })
        #expect(f.message.contains("T1") && f.message.contains("T2"))
    }

    @Test func finishOnlyEndsARecording() throws {
        var m = NodeTakeMachine()
        m.finish()
        #expect(m.state == .idle)
        try m.configure(takeID: "T", at: 0)
        try m.arm(takeID: "T")
        m.finish()
        #expect(m.state == .armed)
    }

    @Test func abortReturnsToIdleFromAnyStateAndForgetsTheTake() throws {
        for steps in 0...4 {
            var m = NodeTakeMachine()
            try m.configure(takeID: "T", at: 0)
            if steps >= 1 { try m.arm(takeID: "T") }
            if steps >= 2 { try m.start(takeID: "T") }
            if steps >= 3 { m.finish() }
            if steps >= 4 { m.fail() }
            try m.abort(takeID: "T")
            #expect(m.state == .idle && m.takeID == nil, "after \(steps) steps")
            #expect(refusal { try m.arm(takeID: "T") } != nil)
        }
    }

    @Test func failedNodeRefusesToArmOrStartButCanBeReconfigured() throws {
        var m = NodeTakeMachine()
        try m.configure(takeID: "T", at: 0)
        m.fail()
        #expect(m.state == .failed)
        let arm = try #require(refusal { try m.arm(takeID: "T") })
        #expect(arm.code == .badState && arm.message.contains("T") && arm.message.contains("failed"))
        try m.configure(takeID: "T3", at: 0)
        #expect(m.state == .configured)
    }

    /// Each refusal is .badState (or .notFound for an abort of another take) and names the requested take and,
    /// when the take matches, the state that forbids the request.
    @Test func wrongStateRefusalsNameTheTakeAndTheState() throws {
        // arm when only idle
        var m = NodeTakeMachine()
        var f = try #require(refusal { try m.arm(takeID: "take-A") })
        #expect(f.code == .badState)
        #expect(f.message.contains("take-A") && f.message.contains("no configured take"), "\(f)")

        // start when configured (not armed)
        try m.configure(takeID: "take-A", at: 0)
        f = try #require(refusal { try m.start(takeID: "take-A") })
        #expect(f.code == .badState)
        #expect(f.message.contains("take-A") && f.message.contains("configured") && f.message.contains("armed"), "\(f)")

        // stop when configured
        f = try #require(refusal { try m.stop(takeID: "take-A") })
        #expect(f.message.contains("take-A") && f.message.contains("configured"), "\(f)")
        #expect(m.state == .configured)

        // arm twice
        try m.arm(takeID: "take-A")
        f = try #require(refusal { try m.arm(takeID: "take-A") })
        #expect(f.message.contains("take-A") && f.message.contains("armed"), "\(f)")

        // stop while armed
        f = try #require(refusal { try m.stop(takeID: "take-A") })
        #expect(f.message.contains("take-A") && f.message.contains("armed") && f.message.contains("recording"), "\(f)")

        // configure another take while armed, then while recording
        f = try #require(refusal { try m.configure(takeID: "take-B", at: 0) })
        #expect(f.code == .badState)
        #expect(f.message.contains("take-B") && f.message.contains("take-A") && f.message.contains("armed"), "\(f)")
        #expect(m.takeID == "take-A" && m.state == .armed)
        try m.start(takeID: "take-A")
        f = try #require(refusal { try m.configure(takeID: "take-B", at: 0) })
        #expect(f.message.contains("take-B") && f.message.contains("take-A") && f.message.contains("recording"), "\(f)")

        // start twice
        f = try #require(refusal { try m.start(takeID: "take-A") })
        #expect(f.message.contains("take-A") && f.message.contains("recording"), "\(f)")
        #expect(m.state == .recording)
    }

    @Test func otherTakeRefusalsNameBothTakes() throws {
        var m = NodeTakeMachine()
        try m.configure(takeID: "take-A", at: 0)
        for verb in ["arm", "start", "stop"] {
            func call(_ m: inout NodeTakeMachine) throws(NodeFailure) {
                switch verb {
                case "arm": try m.arm(takeID: "take-B")
                case "start": try m.start(takeID: "take-B")
                default: try m.stop(takeID: "take-B")
                }
            }
            let f = try #require(refusal { try call(&m) })
            #expect(f.code == .badState)
            #expect(f.message.contains(verb) && f.message.contains("take-B") && f.message.contains("take-A"), "\(f)")
            #expect(m.state == .configured && m.takeID == "take-A")
        }
        let abort = try #require(refusal { try m.abort(takeID: "take-B") })
        #expect(abort.code == .notFound)
        #expect(abort.message.contains("take-B") && abort.message.contains("take-A"), "\(abort)")
        #expect(m.state == .configured)

        var idle = NodeTakeMachine()
        let none = try #require(refusal { try idle.abort(takeID: "take-Z") })
        #expect(none.code == .notFound && none.message.contains("take-Z") && none.message.contains("none"), "\(none)")
    }

    @Test func failureDescriptionIsTheMessage() {
        let f = NodeFailure(.io, "disk full on node n1.")
        #expect(f.description == "disk full on node n1.")
    }

    @Test func aCollectedFinishedTakeLeavesTheNodeIdleAndNothingElseDoes() throws {
        var m = NodeTakeMachine()
        try m.configure(takeID: "T1", at: 0)
        try m.arm(takeID: "T1")
        try m.start(takeID: "T1")
        m.collected(takeID: "T1")          // still recording: its files are not final
        #expect(m.state == .recording && m.takeID == "T1")
        m.finish()
        m.collected(takeID: "T0")          // another take's collection
        #expect(m.state == .finished && m.takeID == "T1")
        m.collected(takeID: "T1")
        #expect(m.state == .idle && m.takeID == nil)
    }
}
