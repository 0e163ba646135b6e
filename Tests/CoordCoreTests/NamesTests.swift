import Testing
@testable import CoordCore

@Suite struct RigNameTests {
    @Test(arguments: ["a", "node-1", "cam_0", "Node.Local", "A-Z_a-z.0-9", "...", ".hidden", "-", "_",
                      String(repeating: "x", count: 64), String(repeating: "9", count: 64)])
    func validNames(name: String) {
        #expect(RigName.isValid(name))
        #expect(RigName.problem(with: name, kind: "node") == nil)
    }

    @Test(arguments: ["", ".", "..", String(repeating: "x", count: 65), "a/b", "/", "../etc", "a b", " a", "a\t", "a\nb",
                      "café", "名前", "cam😀", "a\\b", "a:b", "a,b", "a\0b", "ａ", "Ω"])
    func invalidNames(name: String) throws {
        #expect(!RigName.isValid(name))
        let sentence = try #require(RigName.problem(with: name, kind: "camera"))
        #expect(sentence.contains("camera name"))
        // The name is repeated with its control characters escaped, so the sentence stays on one line.
        #expect(sentence.contains("\"\(Echo.escapingControls(name))\""))
        #expect(!sentence.contains("\n") && !sentence.contains("\t") && !sentence.contains("\0"))
    }

    @Test func everyAllowedByteAndNoOtherIsAccepted() {
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-".utf8)
        for byte in UInt8(1)...UInt8(127) {
            let name = "a" + String(UnicodeScalar(byte)) + "b"
            #expect(RigName.isValid(name) == allowed.contains(byte), "byte \(byte)")
        }
    }
}

/// `YYYYMMDD-HHMMSS-<name>-<6 lower-case hex>`, checked character by character.
private func looksLikeTakeID(_ s: String, name: String) -> Bool {
    let c = Array(s)
    guard c.count == 23 + name.count else { return false }
    let digits = c[0..<8] + c[9..<15]
    let hex = c[(c.count - 6)...]
    return digits.allSatisfy { $0.isASCII && $0.isNumber } && c[8] == "-" && c[15] == "-"
        && String(c[16..<(16 + name.count)]) == name && c[16 + name.count] == "-"
        && hex.allSatisfy { "0123456789abcdef".contains($0) }
}

@Suite struct TakeIDTests {
    @Test func formatsFieldsWithPaddingAndSixHexDigits() {
        let id = TakeID(year: 2026, month: 3, day: 7, hour: 9, minute: 5, second: 2, name: "scene1", nonce: 0xABC)
        #expect(id.value == "20260307-090502-scene1-000abc")
        #expect(id.description == id.value)
        #expect(TakeID(year: 2026, month: 12, day: 31, hour: 23, minute: 59, second: 59, name: "x", nonce: 0x12_FEDCBA).value
                == "20261231-235959-x-fedcba")
        #expect(TakeID(year: 2026, month: 1, day: 1, hour: 0, minute: 0, second: 0, name: "take-one", nonce: 0).value
                == "20260101-000000-take-one-000000")
    }

    @Test func randomIDsHaveTheContractShapeAndParseBack() throws {
        var rng = SeededRandom(seed: 31)
        let alphabet = Array("abcXYZ019._-")
        for _ in 0..<2_000 {
            let name = String((0..<rng.int(1...20)).map { _ in alphabet[rng.int(0...(alphabet.count - 1))] })
            guard RigName.isValid(name) else { continue }
            let id = TakeID(year: rng.int(1970...2200), month: rng.int(1...12), day: rng.int(1...31), hour: rng.int(0...23),
                            minute: rng.int(0...59), second: rng.int(0...60), name: name, nonce: UInt32.random(in: 0...UInt32.max, using: &rng))
            #expect(looksLikeTakeID(id.value, name: name), "\(id)")
            let parsed = try #require(TakeID(parsing: id.value), "\(id) does not parse")
            #expect(parsed == id)
        }
    }

    /// Any name the coordinator accepts for a take (up to `TakeID.maxNameLength`) gives an id that parses,
    /// and that a node accepts as a take id; a longer one is refused with a sentence naming the limit.
    @Test(arguments: [1, 20, 41])
    func idsFromLongValidNamesParse(length: Int) {
        let name = String(repeating: "n", count: length)
        #expect(TakeID.problem(withName: name) == nil)
        let id = TakeID(year: 2026, month: 1, day: 2, hour: 3, minute: 4, second: 5, name: name, nonce: 0xC0FFEE)
        #expect(TakeID(parsing: id.value) != nil, "a \(length)-character take name gives an id (\(id.value.count) characters) that does not parse")
        #expect(RigName.isValid(id.value))
    }

    @Test(arguments: [42, 64])
    func takeNamesTooLongForAnIDAreRefused(length: Int) throws {
        let problem = try #require(TakeID.problem(withName: String(repeating: "n", count: length)))
        #expect(problem.contains("41"))
    }

    @Test(arguments: [
        "2026030-090502-scene-000abc",    // 7-digit date
        "20260307-0905-scene-000abc",     // 4-digit time
        "20260307-090502-000abc",         // no name
        "20260307-090502-scene-00abc",    // 5 hex
        "20260307-090502-scene-0000abc",  // 7 hex
        "20260307-090502-scene-00zzzz",   // not hex
        "2026O307-090502-scene-000abc",   // letter O in the date
        "20260307-090502-sce ne-000abc",  // space in the name
        "20260307-090502-sc/ne-000abc",   // slash in the name
        "٢٠٢٦٠٣٠٧-090502-scene-000abc",   // non-ASCII digits
        "20260307_090502_scene_000abc",
        "",
    ])
    func malformedIDsDoNotParse(text: String) {
        #expect(TakeID(parsing: text) == nil)
    }

    @Test func anEmptyNameDoesNotParse() {
        #expect(TakeID(parsing: "20260307-090502--000abc") == nil)
    }
}
