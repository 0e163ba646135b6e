import CoordCore
import Foundation
import Testing
@testable import Deliverables
@testable import TakeDocuments

/// A manifest that does not decode names the field and what is wrong with it (issue 34 item 7: deliver's "is not a
/// readable coord manifest" for an out-of-range number named no field — Foundation's JSONDecoder says only "The given
/// data was not valid JSON." there).
@Suite struct JSONFieldProblemTests {
    /// The test manifest as JSON, with `edit` applied to its JSONSerialization tree.
    static func manifestJSON(_ edit: (inout [String: Any]) -> Void = { _ in }) throws -> Data {
        var object = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(DeliverPlanTests.manifest())) as? [String: Any])
        edit(&object)
        return try JSONSerialization.data(withJSONObject: object)
    }

    static func setCameraFileBytes(_ value: Any) -> (inout [String: Any]) -> Void {
        { object in
            var cameras = object["cameras"] as! [[String: Any]]
            var files = cameras[1]["files"] as! [[String: Any]]
            files[0]["bytes"] = value
            cameras[1]["files"] = files
            object["cameras"] = cameras
        }
    }

    static func problem(_ data: Data) -> String? {
        do {
            _ = try JSONDecoder().decode(TakeManifest.self, from: data)
            return nil
        } catch {
            return JSONFieldProblem.describe(error, decoding: TakeManifest.self, from: data)
        }
    }

    @Test func theProbeReadsAWholeManifestAsJSONDecoderDoes() throws {
        let data = try Self.manifestJSON()
        let object = try JSONSerialization.jsonObject(with: data)
        let probed = try TakeManifest(from: JSONFieldProblem.Probe(object, path: []))
        #expect(probed == DeliverPlanTests.manifest())
        #expect(Self.problem(data) == nil)
    }

    @Test func aNumberOutOfItsFieldsRangeIsNamedWithItsPath() throws {
        #expect(Self.problem(try Self.manifestJSON(Self.setCameraFileBytes(-1)))
                == "cameras[1].files[0].bytes must be a whole number from 0 to 18446744073709551615 (got -1)")
        #expect(Self.problem(try Self.manifestJSON(Self.setCameraFileBytes(1e30)))
                == "cameras[1].files[0].bytes must be a whole number from 0 to 18446744073709551615 (got 1e+30)")
        #expect(Self.problem(try Self.manifestJSON(Self.setCameraFileBytes(2.5)))
                == "cameras[1].files[0].bytes must be a whole number from 0 to 18446744073709551615 (got 2.5)")
        #expect(Self.problem(try Self.manifestJSON { $0["groups"] = 1e300 })?.hasPrefix("groups must be a whole number from ") == true)
    }

    @Test func aWrongTypeOrAMissingKeyIsNamed() throws {
        #expect(Self.problem(try Self.manifestJSON(Self.setCameraFileBytes("many")))
                == "cameras[1].files[0].bytes must be a whole number from 0 to 18446744073709551615 (got \"many\")")
        #expect(Self.problem(try Self.manifestJSON { $0["groups"] = nil }) == "groups is missing")
        #expect(Self.problem(try Self.manifestJSON { $0["cameras"] = "none" }) == "cameras must be a list (got \"none\")")
        #expect(Self.problem(Data("[1]".utf8)) == "the document must be an object (got a list)")
    }

    @Test func textThatIsNotJSONSaysSoInOneLine() {
        let problem = Self.problem(Data("{\"groups\": 1,".utf8)) ?? ""
        #expect(problem.hasPrefix("it is not JSON"), "\(problem)")
        #expect(!problem.contains("\n"))
    }

    @Test func deliverNamesTheFieldOfAnUnreadableManifest() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("coord-json-problem-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Self.manifestJSON(Self.setCameraFileBytes(1e30)).write(to: directory.appendingPathComponent("manifest.json"))
        do {
            _ = try Deliverer.run(takeDirectory: directory.path, items: [.mov], codec: .prores, status: { _ in })
            Issue.record("deliver accepted a manifest with an out-of-range number")
        } catch let problem as DeliverProblem {
            #expect("\(problem)" == "\(directory.path)/manifest.json is not a readable coord manifest: "
                    + "cameras[1].files[0].bytes must be a whole number from 0 to 18446744073709551615 (got 1e+30).")
        }
    }
}
