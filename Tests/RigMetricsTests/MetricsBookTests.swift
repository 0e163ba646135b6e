import CoordCore
import RigMetrics
import Testing

@Suite("Metrics book")
struct MetricsBookTests {
    func value(_ text: String, _ prefix: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Double($0.split(separator: " ").last!) }
    }

    func sample(take: String, frames: UInt64) -> NodeMetricsSample {
        var s = NodeMetricsSample(node: "n1")
        s.recording = true
        s.cameras = [.init(camera: "cam0", takeID: take, frames: frames, dups: 1, bytesWritten: frames * 100, phaseErrorMicroseconds: 12)]
        s.takesRecorded = 0
        return s
    }

    @Test func countersAddUpAcrossTakesAndNeverGoBackwards() {
        let book = MetricsBook()
        let series = "coord_node_camera_frames_total{node=\"n1\",camera=\"cam0\"}"
        #expect(value(book.exposition([sample(take: "t1", frames: 30)]), series) == 30)
        #expect(value(book.exposition([sample(take: "t1", frames: 90)]), series) == 90)
        // A second take's own count starts again from zero; the total goes on from 90.
        #expect(value(book.exposition([sample(take: "t2", frames: 10)]), series) == 100)
        #expect(value(book.exposition([sample(take: "t2", frames: 40)]), series) == 130)
        // A count seen lower than before within one take (a stale status) adds nothing.
        #expect(value(book.exposition([sample(take: "t2", frames: 35)]), series) == 130)
    }

    @Test func timesAreInSecondsAndLabelsNameNodeAndCamera() {
        var s = sample(take: "t1", frames: 5)
        s.clockUncertaintyMicroseconds = 4
        s.pressure = .serious
        let text = MetricsBook().exposition([s])
        #expect(value(text, "coord_node_camera_phase_error_seconds{node=\"n1\",camera=\"cam0\"}") == 12e-6)
        #expect(value(text, "coord_node_clock_uncertainty_seconds{node=\"n1\"}") == 4e-6)
        #expect(value(text, "coord_node_pressure_level{node=\"n1\"}") == 3)
        #expect(text.split(separator: "\n").allSatisfy { $0.hasPrefix("#") || $0.hasPrefix("coord_node_") })
    }

    @Test func afterTheTakeThePhaseAndClockAreUnknownNotTheLastFigures() {
        let book = MetricsBook()
        var recording = sample(take: "t1", frames: 5)
        recording.clockUncertaintyMicroseconds = 4
        _ = book.exposition([recording])
        var idle = NodeMetricsSample(node: "n1")
        idle.takesRecorded = 1
        let text = book.exposition([idle])
        #expect(value(text, "coord_node_camera_phase_error_seconds{node=\"n1\",camera=\"cam0\"}")?.isNaN == true)
        #expect(value(text, "coord_node_clock_uncertainty_seconds{node=\"n1\"}")?.isNaN == true)
        // The counters keep their totals.
        #expect(value(text, "coord_node_camera_frames_total{node=\"n1\",camera=\"cam0\"}") == 5)
    }
}
