/// The console's API as an OpenAPI 3.0 document (placeholder until it lands).
enum ConsoleOpenAPI {
    static let json = #"""
{"openapi": "3.0.3", "info": {"title": "coord console", "version": "1"}, "paths": {}}
"""#
}
