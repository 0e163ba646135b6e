import CoordCore
import Testing

@Suite struct NodeStateTests {
    @Test func theMachineAndTheConductorSpeakOfOneState() {
        #expect(NodeTakeMachine.State.self == NodeState.self)
        #expect(TakeConductor.NodeState.self == NodeState.self)
    }

    @Test func eachStateReadsAsTheWordCoordStatusShows() {
        #expect(NodeState.allCases.map(\.name) == ["idle", "configured", "armed", "recording", "finished", "failed"])
        #expect(NodeState.allCases.allSatisfy { NodeState(rawValue: $0.name) == $0 })
    }
}
