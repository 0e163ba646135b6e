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
        #expect(!ClockProbePolicy.isKnown(probedFor: .microseconds(999_999), uncertainty: 1, target: 10))
        #expect(!ClockProbePolicy.isKnown(probedFor: .microseconds(2_000_000), uncertainty: 10.5, target: 10))
        #expect(!ClockProbePolicy.isKnown(probedFor: .microseconds(2_000_000), uncertainty: nil, target: 10))
        #expect(ClockProbePolicy.isKnown(probedFor: .microseconds(1_000_000), uncertainty: 10, target: 10))
    }

    @Test func groupZerosLeadGrowsWithSlowAnswersNotWithNodes() {
        #expect(TakeStart.groupZeroLead(slowestConfigure: 5_000) == 2_100_000)
        #expect(TakeStart.groupZeroLead(slowestConfigure: 200_000) == 2_600_000)
        #expect(TakeStart.groupZeroLead(slowestConfigure: 10_000_000) == 5_000_000)
        #expect(TakeStart.groupZeroLead(slowestConfigure: 5_000, nodes: 64) == 2_100_000, "a quick rig: the 0.1 s floor")
    }

    /// The flake of a 64-node debug demo on a loaded machine (issue 27): configure answered in ~0.5 s, arming took
    /// 1.7 s, past a lead of 2 s + 1× configure. Room of 3× configure covers it; a coordinator that armed before
    /// sizes the room from that arming, scaled to the nodes it arms now, and a quick earlier arming does not
    /// shrink the room below 3× configure.
    @Test func groupZerosLeadGrowsWithWhatArmingTook() {
        let flake = TakeStart.groupZeroLead(slowestConfigure: 560_000, nodes: 64)
        #expect(flake == 2_000_000 + 1_680_000)
        #expect(flake - 200_000 > 1_678_000 + 1_500_000, "the 1.7 s arming ends well before group 0 less its 0.2 s margin")
        let armed = TakeStart.Arming(nodes: 64, took: 1_700_000)
        #expect(TakeStart.groupZeroLead(slowestConfigure: 100_000, nodes: 64, previous: armed) == 2_000_000 + 2_550_000)
        // Twice the nodes: twice the room, within the 3 s cap.
        #expect(TakeStart.groupZeroLead(slowestConfigure: 100_000, nodes: 128, previous: armed) == 5_000_000)
        // A release rig that armed 64 nodes in 40 ms: still 2.1 s.
        let quick = TakeStart.Arming(nodes: 64, took: 40_000)
        #expect(TakeStart.groupZeroLead(slowestConfigure: 14_000, nodes: 64, previous: quick) == 2_100_000)
        #expect(TakeStart.groupZeroLead(slowestConfigure: 300_000, nodes: 64, previous: quick) == 2_900_000)
        // Fewer nodes than last time: not scaled down below what the last arming took.
        #expect(TakeStart.groupZeroLead(slowestConfigure: 10_000, nodes: 8, previous: armed) == 2_000_000 + 2_550_000)
    }

    @Test func aClockKnownLessWellGetsMoreOfTheBudgetAndTheRigStaysWithinIt() {
        #expect(ClockProbePolicy.weight(uncertainty: 5, target: 10) == 1)
        #expect(ClockProbePolicy.weight(uncertainty: 10, target: 10) == 4)
        #expect(ClockProbePolicy.weight(uncertainty: 1, target: 10) == 0.25)
        #expect(ClockProbePolicy.weight(uncertainty: nil, target: 10) == 4)
        #expect(ClockProbePolicy.weight(uncertainty: .nan, target: 10) == 4)
        // Equal claims: the even share.
        #expect(ClockProbePolicy.interval(weight: 1, rigWeights: 64, nodes: 64) == ClockProbePolicy.interval(nodes: 64, known: true))
        // 60 clocks known well (¼ each), 4 poorly (4 each): the four get 100 a second, the others what is left.
        let weights = [Double](repeating: 0.25, count: 60) + [Double](repeating: 4, count: 4)
        let total = weights.reduce(0, +)
        let poor = ClockProbePolicy.interval(weight: 4, rigWeights: total, nodes: 64)
        let good = ClockProbePolicy.interval(weight: 0.25, rigWeights: total, nodes: 64)
        #expect(poor == ClockProbePolicy.burstInterval)
        #expect(good > ClockProbePolicy.interval(nodes: 64, known: true))
        let perSecond = weights.map { 1e6 / Double(ClockProbePolicy.interval(weight: $0, rigWeights: total, nodes: 64)) }.reduce(0, +)
        #expect(perSecond <= ClockProbePolicy.rigBudgetPerSecond + 1)
        // No clock falls below 10 a second, however many share the budget.
        #expect(ClockProbePolicy.interval(weight: 0.25, rigWeights: 0.25 + 4 * 511, nodes: 512) == ClockProbePolicy.slowestInterval)
    }
}
