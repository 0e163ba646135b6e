import Foundation
import Testing
@testable import CoordCore

@Suite struct CommandLineFailureTests {
    @Test func aProgramsOwnFailure() {
        let f = CommandLineFailure(program: "coord-node", sentence: "no such node file /etc/x.yaml.", status: 2)
        #expect(f.line == "coord-node: no such node file /etc/x.yaml.\n" && f.status == 2)
    }

    @Test func aParserErrorIsUsageWithAPointerToHelp() {
        let usage = CommandLineFailure(program: "coord", parserMessage: "Unknown option '--frobnicate'", isUsage: true)
        #expect(usage.line == "coord: Unknown option '--frobnicate' (see coord --help)\n" && usage.status == 2)
        let other = CommandLineFailure(program: "coord-node", parserMessage: "it broke", isUsage: false)
        #expect(other.line == "coord-node: it broke\n" && other.status == 1)
    }

    @Test func anEchoedWordIsCutShort() {
        let long = String(repeating: "x", count: 500)
        let f = CommandLineFailure(program: "coord", parserMessage: "Unknown option '--\(long)' and " + String(repeating: "y ", count: 100), isUsage: true)
        #expect(f.line.utf8.count < 500 && f.line.contains("bytes)"), "\(f.line)")
    }
}

@Suite struct DecodingProblemTests {
    struct Take: Decodable {
        struct Camera: Decodable { var name: String; var fps: Int }
        var name: String
        var cameras: [Camera]
    }

    func sentence(_ json: String) -> String? {
        do {
            _ = try JSONDecoder().decode(Take.self, from: Data(json.utf8))
            return nil
        } catch let error as DecodingError {
            return DecodingProblem.sentence(error)
        } catch {
            return "\(error)"
        }
    }

    @Test func namesTheKeyAndWhatIsWrong() {
        #expect(sentence(#"{"cameras": []}"#) == "the key name is missing")
        #expect(sentence(#"{"name": "t", "cameras": [{"name": "c"}]}"#) == "the key cameras[0].fps is missing")
        #expect(sentence(#"{"name": "t", "cameras": [{"name": "c", "fps": "fast"}]}"#) == "the value of cameras[0].fps has the wrong type")
        #expect(sentence(#"{"name": null, "cameras": []}"#) == "the value of name has the wrong type")
        #expect(sentence("{not json") == "it is not valid JSON")
        #expect(sentence(#"{"name": "t", "cameras": []}"#) == nil)
    }

    @Test func aPathAsAReaderWritesIt() {
        struct Key: CodingKey {
            var stringValue: String, intValue: Int?
            init(_ s: String) { stringValue = s; intValue = nil }
            init(_ i: Int) { stringValue = "Index \(i)"; intValue = i }
            init?(stringValue: String) { self.init(stringValue) }
            init?(intValue: Int) { self.init(intValue) }
        }
        #expect(DecodingProblem.path([Key("nodes"), Key(1), Key("endpoint")]) == "nodes[1].endpoint")
        #expect(DecodingProblem.path([Key(0), Key("name")]) == "[0].name")
        #expect(DecodingProblem.path([]) == "")
    }
}
