import CoordCore
import Foundation

/// What is wrong with a JSON document that does not decode as a type, naming the field (`files[2].bytes must be a
/// whole number from 0 to 18446744073709551615 (got -1)`). Foundation's JSONDecoder says only "The given data was
/// not valid JSON." for a number out of its field's range, with no path; this decodes the document again through
/// JSONSerialization and a decoder that knows where it is, so the operator learns which field to look at.
public enum JSONFieldProblem {
    /// The problem with `data` as a `T`, as a clause without a closing full stop; `error` is what JSONDecoder threw.
    public static func describe<T: Decodable>(_ error: Error, decoding type: T.Type, from data: Data) -> String {
        let object: Any
        do { object = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]) } catch {
            let detail = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String
            return "it is not JSON" + (detail.map { " (\(Echo.short($0)))" } ?? "")
        }
        do {
            _ = try T(from: Probe(object, path: []))
        } catch let failure as Failure {
            return failure.clause
        } catch {
            return clause(of: error)  // the type's own check, thrown with the probe's path
        }
        // The probe found nothing wrong: say what the decoder said.
        return clause(of: error)
    }

    /// A DecodingError in a sentence's words (DecodingProblem's), anything else cut short.
    static func clause(of error: Error) -> String {
        guard let error = error as? DecodingError else { return Echo.short("\(error)") }
        return DecodingProblem.sentence(error)
    }

    /// `files[2].bytes`; the document itself when the path is empty.
    static func field(_ path: [CodingKey]) -> String {
        var text = ""
        for key in path {
            if let index = key.intValue, key.stringValue.hasPrefix("Index ") || key.stringValue == "\(index)" {
                text += "[\(index)]"
            } else {
                text += text.isEmpty ? Echo.short(key.stringValue) : "." + Echo.short(key.stringValue)
            }
        }
        return text.isEmpty ? "the document" : text
    }

    struct Failure: Error {
        let clause: String
    }

    struct Index: CodingKey {
        var intValue: Int?
        var stringValue: String { "Index \(intValue ?? 0)" }
        init(intValue: Int) { self.intValue = intValue }
        init?(stringValue: String) { return nil }
    }

    private static let booleanType = Swift.type(of: NSNumber(value: true))

    /// The value as the document wrote it, short.
    static func shown(_ value: Any) -> String {
        if value is NSNull { return "null" }
        if let number = value as? NSNumber {
            if Swift.type(of: number) == booleanType { return number.boolValue ? "true" : "false" }
            return number.description
        }
        if let text = value as? String { return "\"\(Echo.short(text))\"" }
        if value is [Any] { return "a list" }
        if value is [String: Any] { return "an object" }
        return "something else"
    }

    static func mismatch(_ path: [CodingKey], _ expected: String, _ value: Any) -> Failure {
        Failure(clause: "\(field(path)) must be \(expected) (got \(shown(value)))")
    }

    /// A Decoder over JSONSerialization's tree that throws `Failure` naming the field.
    struct Probe: Decoder {
        let value: Any
        let codingPath: [CodingKey]
        var userInfo: [CodingUserInfoKey: Any] { [:] }
        init(_ value: Any, path: [CodingKey]) { self.value = value; self.codingPath = path }

        func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
            guard let object = value as? [String: Any] else { throw mismatch(codingPath, "an object", value) }
            return KeyedDecodingContainer(Keyed<Key>(object: object, codingPath: codingPath))
        }

        func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
            guard let list = value as? [Any] else { throw mismatch(codingPath, "a list", value) }
            return Unkeyed(list: list, codingPath: codingPath)
        }

        func singleValueContainer() throws -> any SingleValueDecodingContainer { Single(value: value, codingPath: codingPath) }
    }

    struct Single: SingleValueDecodingContainer {
        let value: Any
        let codingPath: [CodingKey]

        func decodeNil() -> Bool { value is NSNull }

        func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
            let expected = "a whole number from \(T.min) to \(T.max)"
            guard let number = value as? NSNumber, Swift.type(of: number) != booleanType else { throw mismatch(codingPath, expected, value) }
            if let v = number as? Int64, let t = T(exactly: v) { return t }
            if let v = number as? UInt64, let t = T(exactly: v) { return t }
            throw mismatch(codingPath, expected, value)
        }

        func decode(_ type: Bool.Type) throws -> Bool {
            guard let number = value as? NSNumber, Swift.type(of: number) == booleanType else { throw mismatch(codingPath, "true or false", value) }
            return number.boolValue
        }
        func decode(_ type: String.Type) throws -> String {
            guard let text = value as? String else { throw mismatch(codingPath, "a string", value) }
            return text
        }
        func decode(_ type: Double.Type) throws -> Double {
            guard let number = value as? NSNumber, Swift.type(of: number) != booleanType else { throw mismatch(codingPath, "a number", value) }
            return number.doubleValue
        }
        func decode(_ type: Float.Type) throws -> Float {
            let v = try decode(Double.self)
            guard abs(v) <= Double(Float.greatestFiniteMagnitude) else { throw mismatch(codingPath, "a number within ±\(Float.greatestFiniteMagnitude)", value) }
            return Float(v)
        }
        func decode(_ type: Int.Type) throws -> Int { try integer(type) }
        func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
        func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
        func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
        func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
        func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
        func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
        func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
        func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
        func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }
        func decode<T: Decodable>(_ type: T.Type) throws -> T { try T(from: Probe(value, path: codingPath)) }
    }

    struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let object: [String: Any]
        let codingPath: [CodingKey]
        var allKeys: [Key] { object.keys.compactMap { Key(stringValue: $0) } }

        func contains(_ key: Key) -> Bool { object[key.stringValue] != nil }

        func child(_ key: Key) throws -> Probe {
            guard let value = object[key.stringValue] else { throw Failure(clause: "\(field(codingPath + [key])) is missing") }
            return Probe(value, path: codingPath + [key])
        }

        func decodeNil(forKey key: Key) throws -> Bool { try child(key).value is NSNull }
        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try type.init(from: child(key)) }
        func decode(_ type: String.Type, forKey key: Key) throws -> String { try type.init(from: child(key)) }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try type.init(from: child(key)) }
        func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try type.init(from: child(key)) }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try type.init(from: child(key)) }
        func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try type.init(from: child(key)) }
        func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try type.init(from: child(key)) }
        func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try type.init(from: child(key)) }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try type.init(from: child(key)) }
        func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try type.init(from: child(key)) }
        func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try type.init(from: child(key)) }
        func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try type.init(from: child(key)) }
        func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try type.init(from: child(key)) }
        func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try type.init(from: child(key)) }
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try T(from: child(key)) }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
            try child(key).container(keyedBy: type)
        }
        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { try child(key).unkeyedContainer() }
        func superDecoder() throws -> any Decoder { Probe(object, path: codingPath) }
        func superDecoder(forKey key: Key) throws -> any Decoder { try child(key) }
    }

    struct Unkeyed: UnkeyedDecodingContainer {
        let list: [Any]
        let codingPath: [CodingKey]
        var currentIndex = 0
        var count: Int? { list.count }
        var isAtEnd: Bool { currentIndex >= list.count }

        init(list: [Any], codingPath: [CodingKey]) { self.list = list; self.codingPath = codingPath }

        mutating func next() throws -> Probe {
            let path = codingPath + [Index(intValue: currentIndex)]
            guard !isAtEnd else { throw Failure(clause: "\(field(path)) is missing (the list is too short)") }
            defer { currentIndex += 1 }
            return Probe(list[currentIndex], path: path)
        }

        mutating func decodeNil() throws -> Bool {
            guard !isAtEnd, list[currentIndex] is NSNull else { return false }
            currentIndex += 1
            return true
        }
        mutating func decode(_ type: Bool.Type) throws -> Bool { try type.init(from: next()) }
        mutating func decode(_ type: String.Type) throws -> String { try type.init(from: next()) }
        mutating func decode(_ type: Double.Type) throws -> Double { try type.init(from: next()) }
        mutating func decode(_ type: Float.Type) throws -> Float { try type.init(from: next()) }
        mutating func decode(_ type: Int.Type) throws -> Int { try type.init(from: next()) }
        mutating func decode(_ type: Int8.Type) throws -> Int8 { try type.init(from: next()) }
        mutating func decode(_ type: Int16.Type) throws -> Int16 { try type.init(from: next()) }
        mutating func decode(_ type: Int32.Type) throws -> Int32 { try type.init(from: next()) }
        mutating func decode(_ type: Int64.Type) throws -> Int64 { try type.init(from: next()) }
        mutating func decode(_ type: UInt.Type) throws -> UInt { try type.init(from: next()) }
        mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try type.init(from: next()) }
        mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try type.init(from: next()) }
        mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try type.init(from: next()) }
        mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try type.init(from: next()) }
        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try T(from: next()) }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
            try next().container(keyedBy: type)
        }
        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try next().unkeyedContainer() }
        mutating func superDecoder() throws -> any Decoder { try next() }
    }
}
