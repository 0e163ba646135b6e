import Testing
@testable import CoordCore

/// vivid at 320x180 offers 60, 50, 40, 30, 25, 15, 12, 10, 5, 4, 2 and 1 fps; the steered camera runs 30.
private let vividPeriods: [Double] = [60, 50, 40, 30, 25, 15, 12, 10, 5, 4, 2, 1].map { 1_000_000 / $0 }
private let period = 1_000_000.0 / 30

/// A camera that keeps its phase until told to step, seen through noisy timestamps (uniform ±noise).
private func run(startPhase: Double, noise: Double, frames: Int, seed: UInt64,
                 steering: inout PhaseSteering) -> (phase: Double, steps: Int, history: [Double]) {
    var rng = SeededRandom(seed: seed)
    var phase = startPhase
    var history: [Double] = []
    for _ in 0..<frames {
        let seen = phase + (Double(rng.next() >> 11) / Double(1 << 53) * 2 - 1) * noise
        history.append(phase)
        if case .rePhase(let p, let shift) = steering.observe(phaseErrorMicroseconds: seen) {
            #expect(abs(p - period - shift) < 1e-6)
            phase = PhaseSteering.wrap(phase + shift, period: period)
        }
    }
    return (phase, steering.steps, history)
}

@Test func offeredPeriodsNearTheNominalOneAreTheSteps() {
    let steering = PhaseSteering(periodMicroseconds: period, offeredPeriods: vividPeriods)
    // 1/60 (half a period) to 1/25; 1/15 would leave a group empty, 1/30 is the camera's own.
    #expect(steering.alternativePeriods.map { ($0).rounded() } == [16_667, 20_000, 25_000, 40_000])
    #expect(steering.canStep)
}

@Test func everyStartPhaseIsBroughtWithinAFifthOfAFrame() {
    for i in 0..<40 {
        let start = (Double(i) / 40 - 0.5) * period
        var steering = PhaseSteering(periodMicroseconds: period, offeredPeriods: vividPeriods)
        let result = run(startPhase: start, noise: 5_000, frames: 300, seed: UInt64(i + 1), steering: &steering)
        // A tenth of a frame is the aim; a step is only taken when it gains half a tenth, and the noisy median
        // may stop it a little outside: a fifth of a frame is the bound.
        #expect(abs(result.phase) < period / 5, "start \(start) ended at \(result.phase)")
        #expect(result.steps <= 6, "start \(start) took \(result.steps) steps")
    }
}

@Test func aPhaseWithinToleranceIsLeftAloneDespiteNoise() {
    var steering = PhaseSteering(periodMicroseconds: period, offeredPeriods: vividPeriods)
    let result = run(startPhase: 1_000, noise: 8_000, frames: 600, seed: 7, steering: &steering)
    #expect(result.steps == 0)
    #expect(result.phase == 1_000)
}

@Test func aCameraThatOffersNoOtherIntervalIsNeverSteered() {
    var steering = PhaseSteering(periodMicroseconds: period, offeredPeriods: [period, period * 2])
    #expect(!steering.canStep)
    let result = run(startPhase: 15_000, noise: 0, frames: 100, seed: 3, steering: &steering)
    #expect(result.steps == 0)
}

@Test func noStepIsTakenWhenNoneBringsThePhaseClearlyNearer() {
    // Only 1/25 (+6.7 ms) is offered: a phase of +10 ms would go to +16.7, so it stays.
    var steering = PhaseSteering(periodMicroseconds: period, offeredPeriods: [40_000])
    let result = run(startPhase: 10_000, noise: 0, frames: 100, seed: 5, steering: &steering)
    #expect(result.steps == 0)
    // −10 ms goes to −3.3 ms in one step.
    var other = PhaseSteering(periodMicroseconds: period, offeredPeriods: [40_000])
    let moved = run(startPhase: -10_000, noise: 0, frames: 100, seed: 5, steering: &other)
    #expect(moved.steps == 1)
    #expect(abs(moved.phase + 10_000 - 6_667) < 1)
}

@Test func aPhaseAtHalfAPeriodSeenOnBothSidesOfTheWrapIsStillStepped() {
    // True phase 16 ms (the wrap is at ±16.7): noise puts frames on both sides; a plain median would see ~0.
    var steering = PhaseSteering(periodMicroseconds: period, offeredPeriods: vividPeriods)
    let result = run(startPhase: 16_000, noise: 4_000, frames: 300, seed: 9, steering: &steering)
    #expect(abs(result.phase) < period / 5, "ended at \(result.phase)")
    #expect(result.steps <= 3, "took \(result.steps) steps")
}

@Test func phaseWrapsIntoHalfAPeriod() {
    #expect(PhaseSteering.wrap(20_000, period: period).rounded() == -13_333)
    #expect(PhaseSteering.wrap(-20_000, period: period).rounded() == 13_333)
    #expect(PhaseSteering.wrap(100_000 + 5, period: period).rounded() == 5)
}
