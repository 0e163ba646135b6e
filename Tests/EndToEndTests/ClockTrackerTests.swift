import CoordCore
import Testing
@testable import Coordinator

@Suite struct ClockTrackerHoldTests {
    func mapping(_ uncertainty: Double) -> ClockMapping {
        ClockMapping(offsetMicroseconds: 0, uncertaintyMicroseconds: uncertainty)
    }

    @Test func aFarLessCertainEstimateIsHeldBackForAWhile() {
        #expect(ClockTracker.shouldHold(mapping(4), insteadOf: mapping(900), heldFor: 1_000_000))
        #expect(ClockTracker.shouldHold(mapping(10), insteadOf: mapping(31), heldFor: 4_999_999))
    }

    @Test func aComparableEstimateIsSent() {
        #expect(!ClockTracker.shouldHold(mapping(4), insteadOf: mapping(11), heldFor: 1_000_000))
        #expect(!ClockTracker.shouldHold(mapping(4), insteadOf: mapping(19), heldFor: 1_000_000), "under 20 µs is always fine")
        #expect(!ClockTracker.shouldHold(mapping(10), insteadOf: mapping(29), heldFor: 1_000_000))
    }

    @Test func nothingIsHeldForMoreThanFiveSeconds() {
        #expect(!ClockTracker.shouldHold(mapping(4), insteadOf: mapping(900), heldFor: 5_000_000))
    }
}
