@testable import Coordinator
import CoordCore
import Foundation
import Testing

/// The rig file's `take.fps` as a rational (CONTRACT §13): read from disk through the YAML reader.
@Suite("Rig file frame rates")
struct RigFileRateTests {
    func load(_ fps: String) throws -> RigFile {
        let dir = try E2E.makeScratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let url = dir.appendingPathComponent("rig.yaml")
        try "nodes:\n  - {name: a, endpoint: tcp://h:1}\ntake:\n  fps: \(fps)\n".write(to: url, atomically: true, encoding: .utf8)
        return try RigFile.load(url.path)
    }

    @Test(arguments: [("30", "30"), ("29.97", "30000/1001"), ("30000/1001", "30000/1001"), ("\"24000/1001\"", "24000/1001"),
                      ("59.94", "60000/1001"), ("23.976", "24000/1001"), ("50/2", "25")])
    func aRateLoadsAsItsRational(written: String, rate: String) throws {
        let take = try load(written).spec.take
        #expect(take.rate?.description == rate)
        #expect(take.fps == take.rate?.nominal)
    }

    @Test(arguments: ["29.98", "30000/0", "0/1001", "1/2", "fast", "241"])
    func anythingElseIsOneSentenceWithItsLine(written: String) {
        do {
            let file = try load(written)
            Issue.record("loaded \(written): \(file.spec.take)")
        } catch let error as CoordError {
            #expect(error.kind == .usage && error.message.contains("take.fps") && error.message.contains("line 4"), "\(error.message)")
            #expect(!error.message.contains("\n"))
        } catch {
            Issue.record("\(error)")
        }
    }
}
