import CoordCore
import Foundation
import HTTPTypes
import OpenAPIRuntime

/// Between the generated server and the handlers: `Accept` is not checked, a request body is read whole up to
/// 64 KiB (413 past it), a body the generated types cannot decode is answered 422 with one sentence naming what is
/// wrong, and every JSON answer gets the keys the document requires (DocumentShape).
struct ConsoleBodies: ServerMiddleware {
    static let limit = 64 << 10
    let shape: DocumentShape

    func intercept(_ request: HTTPRequest, body: HTTPBody?, metadata: ServerRequestMetadata, operationID: String,
                   next: @Sendable (HTTPRequest, HTTPBody?, ServerRequestMetadata) async throws -> (HTTPResponse, HTTPBody?))
        async throws -> (HTTPResponse, HTTPBody?)
    {
        // The API answers JSON whatever a client says it accepts.
        var request = request
        request.headerFields[.accept] = nil
        let sends = request.method == .post || request.method == .put
        var data = Data()
        var body = body
        if sends {
            do {
                data = try await Data(collecting: body ?? HTTPBody(), upTo: Self.limit)
            } catch {
                return Self.answer(.contentTooLarge, "the request body is over 64 KiB.")
            }
            // No body is the empty object; stopping a take ignores its body.
            body = data.isEmpty || operationID == "stopTake" ? nil : HTTPBody(data)
        }
        let response: HTTPResponse, answer: HTTPBody?
        do {
            (response, answer) = try await next(request, body, metadata)
        } catch {
            guard sends else { throw error }
            return Self.answer(.unprocessableContent, Self.sentence(operationID, data, error))
        }
        guard let answer, response.headerFields[.contentType]?.hasPrefix("application/json") == true else { return (response, answer) }
        let json = shape.filled(try await Data(collecting: answer, upTo: 64 << 20), operation: operationID, status: response.status.code)
        var filled = response
        filled.headerFields[.contentType] = "application/json"
        filled.headerFields[.contentLength] = "\(json.count)"
        return (filled, HTTPBody(json))
    }

    static func answer(_ status: HTTPResponse.Status, _ sentence: String) -> (HTTPResponse, HTTPBody?) {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return (HTTPResponse(status: status, headerFields: headers), HTTPBody(errorJSON(sentence)))
    }

    static func errorJSON(_ sentence: String) -> Data {
        (try? JSONSerialization.data(withJSONObject: ["error": sentence], options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
    }

    /// Why a body was refused, in the words of the call it was sent to.
    static func sentence(_ operationID: String, _ data: Data, _ error: any Error) -> String {
        switch operationID {
        case "setControls", "setControlsEverywhere":
            return controlsProblem(data) ?? "the controls are not what this call takes: \(decodingSentence(error))."
        default:
            return "the request body is not what this call takes: \(decodingSentence(error))."
        }
    }

    /// A controls body must be a JSON object of only the four control keys, with their JSON types.
    static func controlsProblem(_ data: Data) -> String? {
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            return "the controls must be a JSON object with any of exposure_us, gain_db, white_balance_k, focus."
        }
        let known = Set(CameraControls.Name.allCases.map(\.rawValue))
        if let unknown = object.keys.sorted().first(where: { !known.contains($0) }) {
            return "\(Echo.short(unknown)) is not a camera control: use exposure_us, gain_db, white_balance_k or focus."
        }
        do {
            _ = try JSONDecoder().decode(CameraControls.self, from: data)
            return nil
        } catch {
            return "the controls are not what this call takes: \(decodingSentence(error))."
        }
    }

    /// What a decoding error says is wrong, naming the key.
    static func decodingSentence(_ error: any Error) -> String {
        let underlying = (error as? ServerError)?.underlyingError ?? error
        switch underlying as? DecodingError {
        case .typeMismatch(_, let c), .valueNotFound(_, let c), .dataCorrupted(let c):
            let path = c.codingPath.map(\.stringValue).joined(separator: ".")
            return path.isEmpty ? "it is not a JSON object" : "\(path) has the wrong type"
        case .keyNotFound(let key, _): return "\(key.stringValue) is missing"
        default: return "it is not JSON"
        }
    }
}
