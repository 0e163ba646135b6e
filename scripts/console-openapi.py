#!/usr/bin/env python3
"""Writes Sources/ConsoleServer/OpenAPI.swift: the console's OpenAPI 3.0 document (validated with
openapi-spec-validator before it is written). Run after changing the console's API:
    $(scripts/python-env.sh) scripts/console-openapi.py
"""
from pathlib import Path
import json
def ref(n): return {"$ref": f"#/components/schemas/{n}"}
def jsonbody(schema): return {"content": {"application/json": {"schema": schema}}}
def resp(desc, schema=None):
    r = {"description": desc}
    if schema: r.update(jsonbody(schema))
    return r
err = lambda d: resp(d, ref("Error"))
name_pattern = "^[A-Za-z0-9._-]{1,64}$"
nullable = lambda s: {**s, "nullable": True}
controls_props = {
    "exposure_us": {"type": "integer", "minimum": 1, "maximum": 10000000},
    "gain_db": {"type": "number", "minimum": -100, "maximum": 1000},
    "white_balance_k": {"type": "integer", "minimum": 1000, "maximum": 15000},
    "focus": {"type": "number", "minimum": 0, "maximum": 1},
}
schemas = {
    "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string", "description": "one sentence"}}},
    "Controls": {"type": "object", "additionalProperties": False, "minProperties": 1, "properties": controls_props,
                 "description": "Any subset of a camera's picture controls. A V4L2 camera's gain_db is its own raw gain value (V4L2 gives gain no unit)."},
    "ControlValues": {"type": "object", "properties": controls_props},
    "CameraControls": {"type": "object", "required": ["node", "camera", "controls"], "properties": {
        "node": {"type": "string"}, "camera": {"type": "string"}, "controls": ref("ControlValues")}},
    "Node": {"type": "object", "required": ["name", "reachable", "state", "pressure"], "properties": {
        "name": {"type": "string"}, "reachable": {"type": "boolean"},
        "state": {"type": "string", "enum": ["idle", "configured", "armed", "recording", "finished", "failed", "unreachable", "unknown"]},
        "pressure": {"type": "string", "enum": ["nominal", "fair", "serious", "critical", "shutdown"]},
        "clock_uncertainty_us": nullable({"type": "number"}), "take_id": nullable({"type": "string"}), "message": nullable({"type": "string"}),
        "mics": {"type": "array", "description": "the node's microphones while a take runs (CONTRACT §9): the level meter",
                 "items": ref("Mic")}}},
    "Mic": {"type": "object", "required": ["mic", "level_dbfs"], "properties": {
        "mic": {"type": "string"}, "level_dbfs": {"type": "number", "description": "peak of the newest 10 ms, dBFS (-100: silence)"},
        "error": nullable({"type": "string"})}},
    "Camera": {"type": "object", "required": ["node", "camera", "width", "height", "fps", "controls", "drops"], "properties": {
        "node": {"type": "string"}, "camera": {"type": "string"}, "width": {"type": "integer"}, "height": {"type": "integer"},
        "fps": {"type": "integer"}, "controls": ref("ControlValues"), "drops": {"type": "integer"},
        "phase_error_us": nullable({"type": "integer"})}},
    "Rig": {"type": "object", "required": ["nodes", "cameras"], "properties": {
        "nodes": {"type": "array", "items": ref("Node")}, "cameras": {"type": "array", "items": ref("Camera")}}},
    "Tile": {"type": "object", "required": ["node", "camera", "missing", "drops"], "properties": {
        "node": {"type": "string"}, "camera": {"type": "string"}, "group": nullable({"type": "integer"}),
        "center_us": nullable({"type": "integer"}), "image": nullable({"type": "string", "description": "URL of the tile's JPEG, relative to the console"}),
        "missing": {"type": "boolean"}, "phase_error_us": nullable({"type": "integer"}), "drops": {"type": "integer"}}},
    "Multiview": {"type": "object", "required": ["group", "center_us", "complete", "tiles"], "properties": {
        "group": {"type": "integer"}, "center_us": {"type": "integer"}, "complete": {"type": "boolean"},
        "take_id": nullable({"type": "string"}), "tiles": {"type": "array", "items": ref("Tile")}}},
    "Take": {"type": "object", "required": ["name", "state", "elapsed_s"], "properties": {
        "take_id": nullable({"type": "string"}), "name": {"type": "string"},
        "state": {"type": "string", "enum": ["starting", "recording", "stopping", "collecting", "done", "partial", "failed"]},
        "seconds": nullable({"type": "number"}), "elapsed_s": {"type": "number"},
        "message": nullable({"type": "string"}), "report": nullable({"type": "string"})}},
    "TakeEntry": {"type": "object", "required": ["take_id", "name", "status", "started"], "properties": {
        "take_id": {"type": "string"}, "name": {"type": "string"}, "status": {"type": "string"},
        "started": {"type": "string"}, "report": nullable({"type": "string"})}},
    "Takes": {"type": "object", "required": ["takes"], "properties": {
        "current": nullable(ref("Take")) if False else {"allOf": [ref("Take")], "nullable": True},
        "takes": {"type": "array", "items": ref("TakeEntry")}}},
    "TakeRequest": {"type": "object", "additionalProperties": False, "properties": {
        "name": {"type": "string", "pattern": name_pattern},
        "seconds": {"type": "number", "exclusiveMinimum": True, "minimum": 0, "maximum": 86400}}},
    "AllControls": {"type": "object", "required": ["cameras"], "properties": {
        "cameras": {"type": "array", "items": ref("CameraControls")}, "refused": {"type": "array", "items": {"type": "string"}}}},
}
p_node = {"name": "node", "in": "path", "required": True, "schema": {"type": "string"}}
p_camera = {"name": "camera", "in": "path", "required": True, "schema": {"type": "string"}}
paths = {
    "/": {"get": {"summary": "The console page", "operationId": "page",
                  "responses": {"200": {"description": "the page", "content": {"text/html": {"schema": {"type": "string"}}}}}}},
    "/api/rig": {"get": {"summary": "Every node and camera", "operationId": "rig", "responses": {"200": resp("the rig", ref("Rig"))}}},
    "/api/rig/controls.yaml": {"get": {"summary": "Every camera's controls as the nodes: part of a rig file", "operationId": "controlsYAML",
                                       "responses": {"200": {"description": "YAML", "content": {"application/yaml": {"schema": {"type": "string"}}}}}}},
    "/api/multiview": {"get": {"summary": "The newest complete frame-matched set", "operationId": "multiview",
                               "responses": {"200": resp("every camera's tile of one group", ref("Multiview")),
                                             "404": err("no complete set yet")}}},
    "/preview/{node}/{camera}/{file}": {"get": {"summary": "One tile's JPEG", "operationId": "tile",
        "parameters": [p_node, p_camera, {"name": "file", "in": "path", "required": True, "schema": {"type": "string"}, "description": "GROUP.jpg"}],
        "responses": {"200": {"description": "the tile", "content": {"image/jpeg": {"schema": {"type": "string", "format": "binary"}}}},
                      "404": err("no such tile (kept for the last 64 groups)")}}},
    "/api/cameras/{node}/{camera}/controls": {"put": {"summary": "Set one camera's controls", "operationId": "setControls",
        "parameters": [p_node, p_camera], "requestBody": {"required": True, **jsonbody(ref("Controls"))},
        "responses": {"200": resp("the values the camera applied", ref("CameraControls")),
                      "404": err("no such camera"), "409": err("its node is unreachable"),
                      "413": err("body over 64 KiB"),
                      "422": err("a control the camera lacks or a value out of its range (names camera, control and range)")}}},
    "/api/controls": {"put": {"summary": "Apply the same controls to every camera", "operationId": "setControlsEverywhere",
        "requestBody": {"required": True, **jsonbody(ref("Controls"))},
        "responses": {"200": resp("every camera's applied values", ref("AllControls")),
                      "413": err("body over 64 KiB"),
                      "422": err("one sentence per camera that refused (the others applied)")}}},
    "/api/takes": {
        "get": {"summary": "The take running and the take directories", "operationId": "takes", "responses": {"200": resp("takes", ref("Takes"))}},
        "post": {"summary": "Start a take as coord start-take does", "operationId": "startTake",
                 "requestBody": {"required": False, **jsonbody(ref("TakeRequest"))},
                 "responses": {"202": resp("the take, starting", ref("Take")), "409": err("a take is already running"),
                               "413": err("body over 64 KiB"), "422": err("a bad name or seconds")}}},
    "/api/takes/stop": {"post": {"summary": "Stop the take on one group, as coord stop-take does", "operationId": "stopTake",
                                 "requestBody": {"required": False, **jsonbody({"type": "object", "description": "ignored; send {}"})},
                                 "responses": {"202": resp("the take, stopping", ref("Take")), "409": err("no take is recording")}}},
    "/takes/{take}/{path}": {"get": {"summary": "A file of a take directory, node folders included (its report page, manifest, box1/cam0.mkv, …), streamed",
        "operationId": "takeFile",
        "parameters": [{"name": "take", "in": "path", "required": True, "schema": {"type": "string"}},
                       {"name": "path", "in": "path", "required": True,
                        "description": "the file's path in the take directory: 1 to 4 names of A-Z a-z 0-9 . _ - separated by /",
                        "schema": {"type": "string"}}],
        "responses": {"200": {"description": "the file", "content": {"text/html": {"schema": {"type": "string"}},
                                                                     "application/json": {"schema": {}},
                                                                     "text/csv": {"schema": {"type": "string"}},
                                                                     "video/x-matroska": {"schema": {"type": "string", "format": "binary"}},
                                                                     "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}},
                      "404": err("no such file")}}},
    "/metrics": {"get": {"summary": "Prometheus text exposition of the rig: coord_node_* series per node and camera (CONTRACT §7)",
                         "operationId": "metrics",
                         "responses": {"200": {"description": "Prometheus text format 0.0.4",
                                               "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
    "/openapi.json": {"get": {"summary": "This document", "operationId": "openapi",
                              "responses": {"200": {"description": "OpenAPI 3.0", "content": {"application/json": {"schema": {"type": "object"}}}}}}},
}
# CONTRACT §6b: every operation needs the token and passes the gate before any handling.
paths["/"]["get"]["responses"]["303"] = {"description": "the first visit with ?token=: sets the session cookie and redirects to /",
                                         "headers": {"Set-Cookie": {"schema": {"type": "string"}, "description": "coord_console_PORT=TOKEN; Path=/; HttpOnly; SameSite=Strict"}}}
for path, operations in paths.items():
    for method, operation in operations.items():
        operation["responses"]["401"] = err("no token, or a wrong one")
        operation["responses"]["403"] = err("a Host this console does not listen on, or (a state change or the WebSocket) another page's Origin")
        if method in ("post", "put"):
            operation["responses"]["415"] = err("the body is not Content-Type: application/json")
security_schemes = {
    "bearer": {"type": "http", "scheme": "bearer", "description": "the token the CONSOLE line printed"},
    "cookie": {"type": "apiKey", "in": "cookie", "name": "coord_console_PORT",
               "description": "the session cookie the first visit with ?token= sets (PORT: the console's port)"},
    "query": {"type": "apiKey", "in": "query", "name": "token", "description": "the token in the URL"},
}
doc = {"openapi": "3.0.3", "info": {"title": "coord console", "version": "1.2",
       "description": "The live console's JSON API (CONTRACT §6, §6b). Every request carries the console's token; a request "
                      "whose Host is not the console's address, or a state change or WebSocket from another page's Origin, "
                      "is refused with 403; a POST or PUT must be application/json (415). Live changes also arrive over the "
                      "WebSocket at /ws (see docs/console-api.md)."},
       "security": [{"bearer": []}, {"cookie": []}, {"query": []}],
       "paths": paths, "components": {"schemas": schemas, "securitySchemes": security_schemes}}
text = json.dumps(doc, indent=1, ensure_ascii=False)
from openapi_spec_validator import validate
validate(doc)
swift = '/// The console\'s API as an OpenAPI 3.0 document, served at /openapi.json (generated by scripts/console-openapi.py).\nenum ConsoleOpenAPI {\n    static let json = #"""\n' + text + '\n"""#\n}\n'
open(Path(__file__).resolve().parents[1] / "Sources/ConsoleServer/OpenAPI.swift", "w").write(swift)
print("ok", len(text))
