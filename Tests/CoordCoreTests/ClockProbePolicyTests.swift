import CoordCore
import Testing

@Suite("Clock probe policy and group 0's lead")
struct ClockProbePolicyTests {
    @Test func aClockNotYetKnownIsProbed100TimesASecondWhateverTheRigSize() {
        for nodes in [1, 8, 128, 512] { #expect(ClockProbePolicy.interval(nodes: nodes, known: false) == 10_000) }
    }

    @Test func knownClocksShareABudgetSmallRigsKeep100ASecondAndNoneFallsBelow10() {
        #expect(ClockProbePolicy.interval(nodes: 8, known: true) == 10_000)
        #expect(ClockProbePolicy.interval(nodes: 20, known: true) == 10_000)
        #expect(ClockProbePolicy.interval(nodes: 64, known: true) == 32_000)
        #expect(ClockProbePolicy.interval(nodes: 128, known: true) == 64_000)
        #expect(ClockProbePolicy.interval(nodes: 512, known: true) == 100_000)
    }

    @Test func aClockIsKnownAfterASecondWithinTheTarget() {
        #expect(!ClockProbePolicy.isKnown(probedFor: 999_999, uncertainty: 1, target: 10))
        #expect(!ClockProbePolicy.isKnown(probedFor: 2_000_000, uncertainty: 10.5, target: 10))
        #expect(!ClockProbePolicy.isKnown(probedFor: 2_000_000, uncertainty: nil, target: 10))
        #expect(ClockProbePolicy.isKnown(probedFor: 1_000_000, uncertainty: 10, target: 10))
    }

    @Test func groupZerosLeadGrowsWithSlowAnswersNotWithNodes() {
        #expect(TakeStart.groupZeroLead(slowestConfigure: 5_000) == 2_100_000)
        #expect(TakeStart.groupZeroLead(slowestConfigure: 200_000) == 2_600_000)
        #expect(TakeStart.groupZeroLead(slowestConfigure: 10_000_000) == 5_000_000)
    }
}
