import Testing
@testable import CoordCore

@Suite struct PressureGaugeTests {
    @Test func thermalLevelsFollowTheTripPoints() {
        func level(_ t: Double) -> PressureLevel {
            PressureGauge.thermal([ThermalZone(name: "cpu-thermal", celsius: t, passiveCelsius: 70, criticalCelsius: 90)]).level
        }
        #expect(level(45) == .nominal)
        #expect(level(61) == .fair)
        #expect(level(70) == .serious)
        #expect(level(79.9) == .serious)
        #expect(level(80) == .critical)
        #expect(level(90) == .shutdown)
        let reading = PressureGauge.thermal([ThermalZone(name: "cpu-thermal", celsius: 82.5, passiveCelsius: 70, criticalCelsius: 90)])
        #expect(reading.factor == "thermal")
        #expect(reading.cause.contains("cpu-thermal") && reading.cause.contains("82.5 °C") && reading.cause.contains("90 °C"))
    }

    @Test func theHottestZoneRelativeToItsTripsWins() {
        let zones = [ThermalZone(name: "gpu", celsius: 60, passiveCelsius: 100, criticalCelsius: 110),
                     ThermalZone(name: "soc", celsius: 58, passiveCelsius: 55, criticalCelsius: 85),
                     ThermalZone(name: "board", celsius: 99)]
        let reading = PressureGauge.thermal(zones)
        #expect(reading.level == .serious)
        #expect(reading.cause.contains("soc"))
    }

    @Test func aZoneWithoutTripPointsSaysNothing() {
        #expect(PressureGauge.thermal([ThermalZone(name: "acpitz", celsius: 120)]).level == .nominal)
        #expect(PressureGauge.thermal([]).level == .nominal)
        // One trip point: the other is 15 °C away.
        #expect(PressureGauge.thermal([ThermalZone(name: "z", celsius: 76, criticalCelsius: 85)]).level == .serious)
        #expect(PressureGauge.thermal([ThermalZone(name: "z", celsius: 85, passiveCelsius: 70)]).level == .shutdown)
    }

    @Test func diskLevelsCountDownToTheReserve() {
        let rate = 2e6  // 2 MB/s
        let reserve = PressureGauge.diskReserveBytes(writeBytesPerSecond: rate)
        #expect(reserve == 16 * 1024 * 1024)
        #expect(PressureGauge.diskReserveBytes(writeBytesPerSecond: 100e6) == 300e6)
        #expect(PressureGauge.disk(freeBytes: reserve + 700 * rate, writeBytesPerSecond: rate).level == .nominal)
        #expect(PressureGauge.disk(freeBytes: reserve + 500 * rate, writeBytesPerSecond: rate).level == .fair)
        #expect(PressureGauge.disk(freeBytes: reserve + 100 * rate, writeBytesPerSecond: rate).level == .serious)
        #expect(PressureGauge.disk(freeBytes: reserve + 20 * rate, writeBytesPerSecond: rate).level == .critical)
        let full = PressureGauge.disk(freeBytes: reserve - 1, writeBytesPerSecond: rate)
        #expect(full.level == .shutdown)
        #expect(full.cause.contains("finalize"))
        // Not writing: only the reserve matters.
        #expect(PressureGauge.disk(freeBytes: reserve + 1, writeBytesPerSecond: 0).level == .nominal)
    }

    @Test func loadAloneIsAtMostFairDropsAreSerious() {
        #expect(PressureGauge.cpu(load: 0.5, droppedFraction: 0).level == .nominal)
        #expect(PressureGauge.cpu(load: 3, droppedFraction: 0).level == .fair)
        #expect(PressureGauge.cpu(load: 0.9, droppedFraction: 0.02).level == .fair)
        let drops = PressureGauge.cpu(load: 1.2, droppedFraction: 0.1)
        #expect(drops.level == .serious && drops.factor == "drops")
    }

    @Test func combineTakesTheWorst() {
        let a = PressureReading(level: .fair, factor: "cpu", cause: "a")
        let b = PressureReading(level: .critical, factor: "disk", cause: "b")
        let c = PressureReading(level: .critical, factor: "thermal", cause: "c")
        #expect(PressureGauge.combine([a, b, c]) == b)
        #expect(PressureGauge.combine([]).level == .nominal)
    }
}

@Suite struct PressureResponderTests {
    static let cameras = [
        PressureResponder.Camera(node: "n1", camera: "hero", priority: 10),
        PressureResponder.Camera(node: "n1", camera: "wide", priority: 0),
        PressureResponder.Camera(node: "n1", camera: "detail", priority: 5),
        PressureResponder.Camera(node: "n2", camera: "cam0", priority: 0),
    ]
    static func reading(_ level: PressureLevel) -> PressureReading { PressureReading(level: level, factor: "thermal", cause: "hot") }

    @Test func seriousSlowsTheLowestPriorityCameraOfThatNodeOnly() {
        var r = PressureResponder(policy: PressurePolicy(), cameras: Self.cameras)
        #expect(r.observe(node: "n1", reading: Self.reading(.fair), now: 0).isEmpty)
        let d = r.observe(node: "n1", reading: Self.reading(.serious), now: 1_000_000)
        #expect(d.count == 1)
        #expect(d.first?.camera == "wide" && d.first?.action == .slow(recordEvery: 2))
        #expect(d.first?.sentence.contains("n1/wide") == true && d.first?.sentence.contains("serious") == true)
        // Staying serious acts again only after repeat_seconds, on the next camera.
        #expect(r.observe(node: "n1", reading: Self.reading(.serious), now: 5_000_000).isEmpty)
        let again = r.observe(node: "n1", reading: Self.reading(.serious), now: 11_000_000)
        #expect(again.first?.camera == "detail")
        #expect(r.cameras.first { $0.camera == "cam0" }?.recordEvery == 1)
    }

    @Test func aSlowedCameraComesBackOnceItsNodeHasBeenCalmForRestoreSeconds() {
        var r = PressureResponder(policy: PressurePolicy(), cameras: Self.cameras)
        #expect(r.observe(node: "n1", reading: Self.reading(.serious), now: 1_000_000).first?.action == .slow(recordEvery: 2))
        // Calm, but not yet for 5 s; a serious reading in between starts the wait over.
        #expect(r.observe(node: "n1", reading: Self.reading(.nominal), now: 2_000_000).isEmpty)
        #expect(r.observe(node: "n1", reading: Self.reading(.fair), now: 6_000_000).isEmpty)
        // Rising again acts again: the next camera is slowed too.
        #expect(r.observe(node: "n1", reading: Self.reading(.serious), now: 6_500_000).first?.camera == "detail")
        #expect(r.observe(node: "n1", reading: Self.reading(.nominal), now: 7_000_000).isEmpty)
        #expect(r.observe(node: "n1", reading: Self.reading(.nominal), now: 11_900_000).isEmpty)
        let back = r.observe(node: "n1", reading: Self.reading(.nominal), now: 12_000_000)
        #expect(back.map(\.camera) == ["wide", "detail"] && back.allSatisfy { $0.action == .restore(recordEvery: 1) }, "\(back)")
        #expect(back.first?.sentence.contains("calm for 5.0 s") == true, "\(back)")
        #expect(r.cameras.first { $0.camera == "wide" }?.recordEvery == 1)
        #expect(r.observe(node: "n1", reading: Self.reading(.nominal), now: 30_000_000).isEmpty, "restored once")
    }

    @Test func aRestoreReturnsACappedCameraToItsCapNotToEveryGroup() {
        var r = PressureResponder(policy: PressurePolicy(slowRecordEvery: 4),
                                  cameras: [PressureResponder.Camera(node: "n1", camera: "c", priority: 0, recordEvery: 2)])
        #expect(r.observe(node: "n1", reading: Self.reading(.serious), now: 0).first?.action == .slow(recordEvery: 4))
        _ = r.observe(node: "n1", reading: Self.reading(.nominal), now: 1_000_000)
        #expect(r.observe(node: "n1", reading: Self.reading(.nominal), now: 10_000_000).first?.action == .restore(recordEvery: 2))
    }

    @Test func criticalDisablesButNeverTheLastCamera() {
        var r = PressureResponder(policy: PressurePolicy(), cameras: Self.cameras)
        #expect(r.observe(node: "n1", reading: Self.reading(.critical), now: 0).first?.camera == "wide")
        #expect(r.observe(node: "n1", reading: Self.reading(.critical), now: 10_000_000).first?.camera == "detail")
        #expect(r.observe(node: "n1", reading: Self.reading(.critical), now: 20_000_000).isEmpty, "hero is the last camera of n1")
        #expect(r.observe(node: "n2", reading: Self.reading(.critical), now: 0).isEmpty, "cam0 is n2's only camera")
    }

    @Test func aRiseActsAtOnceAndTheConfiguredActionIsUsed() {
        var r = PressureResponder(policy: PressurePolicy(serious: .none, critical: .slow, slowRecordEvery: 4), cameras: Self.cameras)
        #expect(r.observe(node: "n1", reading: Self.reading(.serious), now: 0).isEmpty)
        let d = r.observe(node: "n1", reading: Self.reading(.critical), now: 100_000)
        #expect(d.first?.action == .slow(recordEvery: 4))
        #expect(r.observe(node: "n1", reading: Self.reading(.nominal), now: 200_000).isEmpty)
        #expect(r.level(of: "n1") == .nominal)
    }
}
