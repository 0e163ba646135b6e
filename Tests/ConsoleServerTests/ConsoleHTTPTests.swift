import CoordCore
@testable import Coordinator
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Testing
@testable import ConsoleServer

/// The console as a browser or script meets it: the real pipeline (gate included) on a loopback port, over an
/// empty rig, through HummingbirdTesting.
@Suite("Console over HTTP")
struct ConsoleHTTPTests {
    static let token = "0123456789abcdef0123456789abcdef"
    typealias Send = @Sendable (_ method: HTTPRequest.Method, _ uri: String, _ headers: HTTPFields, _ body: String?,
                                _ host: String?) async throws -> TestClient.Response

    /// Runs `test` against a console listening on localhost (a port the system picks); each request gets its own
    /// connection, since the gate closes one it refused. `host` overrides the Host header's name.
    func withConsole(_ test: @escaping @Sendable (Send) async throws -> Void) async throws {
        let takes = FileManager.default.temporaryDirectory.appendingPathComponent("coord-console-tests-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: takes) }
        let template = TakeRequest(name: "take", seconds: 1, fps: 30, width: 640, height: 480, codec: .mjpeg, takesDirectory: takes)
        let logger = Logger(label: "console-tests")
        let rig = LiveRig(spec: RigSpec(nodes: []), template: template, logger: logger)
        let app = try ConsoleServer.application(rig: rig, settings: .init(host: "localhost", port: 0, token: Self.token),
                                                bindHost: "localhost", tls: nil, gate: GateInForce(), logger: logger,
                                                onReady: { _ in })
        try await app.test(.live) { client in
            let port = try #require(client.port)
            try await test { method, uri, headers, body, host in
                try await TestClient.withClient(host: "localhost", port: port) { connection in
                    try await connection.execute(.init(uri, method: method, authority: "\(host ?? "localhost"):\(port)", headers: headers,
                                                       body: body.map { ByteBuffer(string: $0) }))
                }
            }
        }
    }

    static var bearer: HTTPFields { [.authorization: "Bearer \(token)"] }
    static var json: HTTPFields { [.authorization: "Bearer \(token)", .contentType: "application/json"] }

    static func object(_ response: TestClient.Response) throws -> [String: Any] {
        let data = Data((response.body ?? ByteBuffer()).readableBytesView)
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any], "\(String(decoding: data, as: UTF8.self))")
    }

    static func sentence(_ response: TestClient.Response) throws -> String {
        try #require(try object(response)["error"] as? String)
    }

    @Test func theGateRefusesNoTokenAForeignHostAndABodyThatIsNotJSON() async throws {
        try await withConsole { send in
            let noToken = try await send(.get, "/api/rig", [:], nil, nil)
            #expect(noToken.head.status.code == 401)
            #expect(try Self.sentence(noToken).contains("needs its token"))

            let foreign = try await send(.get, "/api/rig", Self.bearer, nil, "attacker.example")
            #expect(foreign.head.status.code == 403)
            #expect(try Self.sentence(foreign).contains("attacker.example"))

            var text = Self.bearer
            text[.contentType] = "text/plain"
            let notJSON = try await send(.post, "/api/takes", text, "{}", nil)
            #expect(notJSON.head.status.code == 415)
            #expect(try Self.sentence(notJSON).contains("application/json"))

            var foreignPage = Self.json
            foreignPage[.origin] = "http://attacker.example"
            let fromAnotherPage = try await send(.post, "/api/takes/stop", foreignPage, "{}", nil)
            #expect(fromAnotherPage.head.status.code == 403)
        }
    }

    @Test func theStateOfTheRigAndItsTakesIsJSONWithEveryKeyTheDocumentRequires() async throws {
        try await withConsole { send in
            let rig = try await send(.get, "/api/rig", Self.bearer, nil, nil)
            #expect(rig.head.status.code == 200)
            #expect(rig.head.headerFields[.contentType]?.hasPrefix("application/json") == true)
            let r = try Self.object(rig)
            #expect((r["nodes"] as? [Any])?.isEmpty == true)
            #expect((r["cameras"] as? [Any])?.isEmpty == true)

            // No take: `current` is there, as null.
            let takes = try await send(.get, "/api/takes", Self.bearer, nil, nil)
            #expect(takes.head.status.code == 200)
            #expect(String(buffer: takes.body ?? ByteBuffer()) == #"{"current":null,"takes":[]}"#)

            let multiview = try await send(.get, "/api/multiview", Self.bearer, nil, nil)
            #expect(multiview.head.status.code == 404)
            #expect(try Self.sentence(multiview).contains("no complete frame-matched set yet"))
        }
    }

    @Test func aBadBodyGetsOneSentenceNamingWhatIsWrong() async throws {
        try await withConsole { send in
            let seconds = try await send(.post, "/api/takes", Self.json, #"{"seconds":"long"}"#, nil)
            #expect(seconds.head.status.code == 422)
            #expect(try Self.sentence(seconds) == "the request body is not what this call takes: seconds has the wrong type.")

            let notAnObject = try await send(.post, "/api/takes", Self.json, "[1]", nil)
            #expect(notAnObject.head.status.code == 422)
            #expect(try Self.sentence(notAnObject) == "the request body is not what this call takes: it is not a JSON object.")

            let badName = try await send(.post, "/api/takes", Self.json, #"{"name":"../x"}"#, nil)
            #expect(badName.head.status.code == 422)
            #expect(try Self.sentence(badName) == #"take name "../x" is not allowed: use 1 to 64 of A-Z a-z 0-9 . _ -"#)

            let unknownControl = try await send(.put, "/api/controls", Self.json, #"{"iso":100}"#, nil)
            #expect(unknownControl.head.status.code == 422)
            #expect(try Self.sentence(unknownControl) == "iso is not a camera control: use exposure_us, gain_db, white_balance_k or focus.")

            let wrongType = try await send(.put, "/api/cameras/node-1/cam0/controls", Self.json, #"{"exposure_us":"long"}"#, nil)
            #expect(wrongType.head.status.code == 422)
            #expect(try Self.sentence(wrongType).contains("exposure_us"))

            let noControl = try await send(.put, "/api/controls", Self.json, "{}", nil)
            #expect(noControl.head.status.code == 422)
            #expect(try Self.sentence(noControl).contains("no control given"))

            let unknownCamera = try await send(.put, "/api/cameras/node-9/cam0/controls", Self.json, #"{"gain_db":1}"#, nil)
            #expect(unknownCamera.head.status.code == 404)
            #expect(try Self.sentence(unknownCamera).contains("node-9/cam0"))

            let tooLarge = try await send(.post, "/api/takes", Self.json, #"{"name":""# + String(repeating: "x", count: 70_000) + #""}"#, nil)
            #expect(tooLarge.head.status.code == 413)
            #expect(try Self.sentence(tooLarge) == "the request body is over 64 KiB.")

            let nothingToStop = try await send(.post, "/api/takes/stop", Self.json, "", nil)
            #expect(nothingToStop.head.status.code == 409)
            #expect(try Self.sentence(nothingToStop) == "no take is recording: there is nothing to stop.")
        }
    }

    @Test func theDocumentIsServedAsJSONFromOpenapiYaml() async throws {
        try await withConsole { send in
            let answer = try await send(.get, "/openapi.json", Self.bearer, nil, nil)
            #expect(answer.head.status.code == 200)
            #expect(String(buffer: answer.body ?? ByteBuffer()) == OpenAPIDocument.json)
            let document = try Self.object(answer)
            #expect((document["openapi"] as? String)?.hasPrefix("3.") == true)
            let paths = try #require(document["paths"] as? [String: Any])
            for path in ["/", "/ws", "/api/rig", "/api/multiview", "/api/takes", "/api/takes/stop", "/api/controls",
                         "/api/cameras/{node}/{camera}/controls", "/preview/{node}/{camera}/{file}", "/takes/{take}/{path}",
                         "/metrics", "/openapi.json", "/api/rig/controls.yaml", "/api/rig/rig.yaml", "/api/rig/save"] {
                #expect(paths[path] != nil, "\(path)")
            }
        }
    }
}

/// The document's shape fills what the generated types leave out, and only that.
@Suite("Document shape")
struct DocumentShapeTests {
    @Test func requiredKeysAreWrittenAsNullAndOthersStayOut() throws {
        let take = LiveRig.TakeView(takeId: nil, name: "t", state: .starting, seconds: nil, elapsedS: 0, message: nil, report: nil)
        let answer = Components.Schemas.Takes(current: .init(value1: .init(take)), takes: [])
        let encoded = try JSONEncoder().encode(answer)
        let filled = DocumentShape.console.filled(encoded, operation: "takes", status: 200)
        #expect(String(decoding: filled, as: UTF8.self)
            == #"{"current":{"elapsed_s":0,"message":null,"name":"t","report":null,"seconds":null,"state":"starting","take_id":null},"takes":[]}"#)

        // A microphone's error is not required: absent, it stays out.
        let node = LiveRig.NodeView(name: "n", reachable: false, state: .unreachable, pressure: .nominal,
                                    mics: [.init(mic: "m", levelDbfs: -100, error: nil)])
        let message = ConsoleServer.live(.rig(.init(nodes: [node], cameras: [])))
        #expect(message == #"{"cameras":[],"nodes":[{"clock_uncertainty_us":null,"message":null,"mics":[{"level_dbfs":-100,"mic":"m"}],"name":"n","pressure":"nominal","reachable":false,"state":"unreachable","take_id":null}],"type":"rig"}"#)
    }

    @Test func theStatesAreTheDocumentsEnums() {
        #expect(LiveRig.NodeState.allCases.map(\.rawValue) == Components.Schemas.NodeState.allCases.map(\.rawValue))
        #expect(LiveRig.TakeState.allCases.map(\.rawValue) == Components.Schemas.TakeState.allCases.map(\.rawValue))
        #expect(PressureLevel.allCases.map(\.name) == Components.Schemas.Pressure.allCases.map(\.rawValue))
    }

    @Test func aNodesRefusalOfControlsIsAnHTTPStatusByItsCode() {
        #expect(LiveRig.kind(of: .badConfig) == .invalid)
        #expect(LiveRig.kind(of: .notFound) == .notFound)
        #expect(LiveRig.kind(of: .badState) == .conflict)
        #expect(LiveRig.kind(of: .io) == .invalid)
    }
}
