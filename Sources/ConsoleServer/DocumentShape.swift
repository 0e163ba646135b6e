import Foundation

/// The JSON the console answers, as openapi.yaml says: the generated types leave out a key whose value is absent,
/// but the document lists such keys as required (and nullable), so they are written here as null. Read once from
/// the served document; a key the document does not require stays out.
struct DocumentShape: Sendable {
    indirect enum Shape: Sendable {
        case object(required: [String], properties: [String: Shape])
        case array(Shape)
        case any
    }

    /// Each operation's JSON answer, by status code.
    private let answers: [String: [Int: Shape]]
    /// Each schema of the document, by name.
    private let schemas: [String: Shape]

    static let console = DocumentShape(json: OpenAPIDocument.json)

    init(json: String) {
        let document = (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any] ?? [:]
        let components = document["components"] as? [String: Any] ?? [:]
        let schemaObjects = components["schemas"] as? [String: Any] ?? [:]
        let responseObjects = components["responses"] as? [String: Any] ?? [:]

        func shape(_ schema: Any?, depth: Int = 0) -> Shape {
            // The console's schemas do not nest deeper; a cycle would end here.
            guard depth < 16, let schema = schema as? [String: Any] else { return .any }
            if let ref = schema["$ref"] as? String {
                return shape(schemaObjects[String(ref.split(separator: "/").last ?? "")], depth: depth + 1)
            }
            if let parts = schema["allOf"] as? [Any] {
                var required: [String] = [], properties: [String: Shape] = [:]
                for part in parts {
                    if case .object(let r, let p) = shape(part, depth: depth + 1) {
                        required += r
                        properties.merge(p) { first, _ in first }
                    }
                }
                return .object(required: required, properties: properties)
            }
            if let items = schema["items"] { return .array(shape(items, depth: depth + 1)) }
            let properties = schema["properties"] as? [String: Any] ?? [:]
            let required = schema["required"] as? [String] ?? []
            guard !properties.isEmpty || !required.isEmpty else { return .any }
            return .object(required: required, properties: properties.mapValues { shape($0, depth: depth + 1) })
        }

        var answers: [String: [Int: Shape]] = [:]
        for case let operations as [String: Any] in (document["paths"] as? [String: Any] ?? [:]).values {
            for case let operation as [String: Any] in operations.values {
                guard let id = operation["operationId"] as? String else { continue }
                for (code, response) in operation["responses"] as? [String: Any] ?? [:] {
                    var response = response as? [String: Any] ?? [:]
                    if let ref = response["$ref"] as? String {
                        response = responseObjects[String(ref.split(separator: "/").last ?? "")] as? [String: Any] ?? [:]
                    }
                    let content = response["content"] as? [String: Any] ?? [:]
                    if let status = Int(code), let json = content["application/json"] as? [String: Any] {
                        answers[id, default: [:]][status] = shape(json["schema"])
                    }
                }
            }
        }
        self.answers = answers
        self.schemas = schemaObjects.mapValues { shape($0) }
    }

    /// `json`, the answer of `operation` with `status`, with every key its schema requires.
    func filled(_ json: Data, operation: String, status: Int) -> Data {
        guard let shape = answers[operation]?[status], let value = try? JSONSerialization.jsonObject(with: json) else { return json }
        return Self.serialized(Self.fill(value, shape)) ?? json
    }

    /// `value` (parsed JSON) as schema `name` says, with every key it requires.
    func filled(_ value: Any, schema name: String) -> Any {
        Self.fill(value, schemas[name] ?? .any)
    }

    static func fill(_ value: Any, _ shape: Shape) -> Any {
        switch shape {
        case .any:
            return value
        case .array(let items):
            guard let array = value as? [Any] else { return value }
            return array.map { fill($0, items) }
        case .object(let required, let properties):
            guard var object = value as? [String: Any] else { return value }
            for key in required where object[key] == nil { object[key] = NSNull() }
            for (key, property) in properties {
                if let inner = object[key], !(inner is NSNull) { object[key] = fill(inner, property) }
            }
            return object
        }
    }

    /// Compact JSON with sorted keys, as the console has always answered.
    static func serialized(_ value: Any) -> Data? {
        try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes])
    }
}
