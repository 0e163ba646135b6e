"""The console as a logged-in, same-origin service (issue 23 items 1 and 4, CONTRACT §6b), against the real `coord`:
the token on every request, Host and Origin checks, JSON-only state changes, the WebSocket only for the console's own
page, a request timeout for half-open connections, a token file that survives a restart, and exit 2 within 5 s when
the console cannot listen. A real Chromium page served from another origin tries to start a take and cannot."""
from __future__ import annotations

import http.client
import http.server
import json
import os
import shutil
import socket
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from test_console import COORD, ConsoleDemo, read_console_line, websocket_handshake


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """One small local rig with its console: every refusal below must leave it without a take."""
    d = ConsoleDemo(tmp_path_factory.mktemp("console-security"), nodes=1, cameras=1)
    yield d
    d.close()


def raw(demo: ConsoleDemo, method: str, path: str, headers: dict, body: bytes | None = None):
    """One request with exactly these headers (http.client adds no Host, Origin or cookie of its own)."""
    host, port = demo.base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    for name, value in {"Host": f"{host}:{port}", **headers}.items():
        if value is not None:
            connection.putheader(name, value)
    if body is not None:
        connection.putheader("Content-Length", str(len(body)))
    connection.endheaders(body)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, dict(response.getheaders()), data


def error_of(data: bytes) -> str:
    answer = json.loads(data)
    assert set(answer) == {"error"} and answer["error"].endswith("."), answer
    return answer["error"]


def no_take_started(demo: ConsoleDemo):
    """The rig recorded nothing: no current take and no take directory."""
    assert demo.get("/api/takes").get("current") is None
    assert not demo.takes.exists() or not any(demo.takes.iterdir()), list(demo.takes.iterdir())


def test_no_token_is_401_and_each_of_the_three_places_for_it_works(demo):
    bearer = {"Authorization": f"Bearer {demo.token}"}
    for path in ("/", "/api/rig", "/openapi.json", "/metrics", "/api/takes"):
        status, headers, data = raw(demo, "GET", path, {})
        assert status == 401 and "token" in error_of(data), (path, status, data)
    status, _, data = raw(demo, "GET", "/api/rig", {"Authorization": "Bearer " + "0" * len(demo.token)})
    assert status == 401, data
    status, _, data = raw(demo, "GET", "/api/rig", bearer)
    assert status == 200 and "nodes" in json.loads(data)
    status, _, data = raw(demo, "GET", f"/api/rig?token={demo.token}", {})
    assert status == 200 and "nodes" in json.loads(data)
    # The first visit with the token in the URL: a strict, HttpOnly session cookie, and the token leaves the address bar.
    status, headers, _ = raw(demo, "GET", f"/?token={demo.token}", {})
    assert status == 303 and headers["Location"] == "/", headers
    cookie = headers["Set-Cookie"]
    name_value = cookie.split(";")[0]
    assert name_value.endswith("=" + demo.token), cookie
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Expires" not in cookie, cookie
    status, _, data = raw(demo, "GET", "/", {"Cookie": name_value})
    assert status == 200 and b"<html" in data.lower()


@pytest.mark.parametrize("path, content_type, body", [
    ("/api/takes", "text/plain", b'{"name": "plain", "seconds": 1}'),
    ("/api/takes", "text/plain;charset=UTF-8", b'{"name": "plain2", "seconds": 1}'),
    ("/api/takes", "application/x-www-form-urlencoded", b'{"name": "form", "seconds": 1}'),
    ("/api/takes", "multipart/form-data; boundary=x", b'--x--'),
    ("/api/takes", None, b'{"name": "untyped", "seconds": 1}'),
    ("/api/takes/stop", "application/x-www-form-urlencoded", b""),
    ("/api/takes/stop", None, b""),
    ("/api/rig/save", "text/plain", b"{}"),
])
def test_a_post_that_is_not_json_is_415_and_starts_no_take(demo, path, content_type, body):
    status, _, data = raw(demo, "POST", path, {"Authorization": f"Bearer {demo.token}", "Content-Type": content_type}, body)
    assert status == 415 and "application/json" in error_of(data), (status, data)
    no_take_started(demo)


def test_a_put_that_is_not_json_is_415(demo):
    status, _, data = raw(demo, "PUT", "/api/controls", {"Authorization": f"Bearer {demo.token}", "Content-Type": "text/plain"},
                          b'{"gain_db": 9}')
    assert status == 415, data
    assert all(c["controls"].get("gain_db") != 9 for c in demo.get("/api/rig")["cameras"])


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://127.0.0.1:1", "http://localhost"])
def test_a_state_change_from_a_foreign_origin_is_403(demo, origin):
    for path in ("/api/takes", "/api/takes/stop", "/api/rig/save"):
        status, _, data = raw(demo, "POST", path, {"Authorization": f"Bearer {demo.token}", "Content-Type": "application/json",
                                                   "Origin": origin}, b'{"name": "foreign", "seconds": 1}')
        assert status == 403 and "origin" in error_of(data), (path, status, data)
    no_take_started(demo)


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1:1", "localhost.evil.example:{port}"])
def test_a_foreign_host_is_403_even_with_the_token(demo, host):
    port = demo.base.rsplit(":", 1)[1]
    for method, path, body in (("GET", "/api/rig", None), ("POST", "/api/takes", b'{"name": "rebound", "seconds": 1}')):
        status, _, data = raw(demo, method, path, {"Host": host.format(port=port), "Authorization": f"Bearer {demo.token}",
                                                   "Content-Type": "application/json"}, body)
        assert status == 403 and "Host" in error_of(data), (host, status, data)
    no_take_started(demo)
    # localhost names this machine: the console on 127.0.0.1 answers to it.
    status, _, _ = raw(demo, "GET", "/api/rig", {"Host": f"localhost:{port}", "Authorization": f"Bearer {demo.token}"})
    assert status == 200


def test_a_websocket_only_for_the_consoles_own_origin_and_token(demo):
    s, answer = websocket_handshake(demo.base, demo.token, origin="http://evil.example")
    s.close()
    assert answer.startswith(b"HTTP/1.1 403"), answer[:200]
    assert b'"error"' in answer and b"WebSocket" in answer, answer
    s, answer = websocket_handshake(demo.base, "0" * len(demo.token))
    s.close()
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    s, answer = websocket_handshake(demo.base, demo.token)
    s.close()
    assert answer.startswith(b"HTTP/1.1 101"), answer[:200]


def test_a_same_origin_json_request_with_the_token_starts_a_take(demo):
    no_take_started(demo)
    status, _, data = raw(demo, "POST", "/api/takes", {"Authorization": f"Bearer {demo.token}", "Content-Type": "application/json",
                                                        "Origin": demo.base}, b'{"name": "allowed", "seconds": 1}')
    assert status == 202, data
    done = demo.wait_take({"done", "partial", "failed"}, timeout=90)
    assert done["state"] == "done", done
    assert (demo.takes / done["take_id"] / "manifest.json").exists()


# ---- a real browser on another origin ----

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")

EVIL_PAGE = """<!doctype html><html><body><iframe name="sink"></iframe><iframe name="sink2"></iframe>
<form id="plain" method="POST" action="{console}/api/takes" enctype="text/plain" target="sink">
  <input name='{{"name": "evil", "seconds": 1, "x": "' value='"}}'></form>
<form id="stop" method="POST" action="{console}/api/takes/stop" target="sink2"></form>
<script>
const console_ = "{console}";
async function attack() {{
  const body = JSON.stringify({{name: "evilfetch", seconds: 1}});
  const tries = [
    fetch(console_ + "/api/takes", {{method: "POST", mode: "no-cors", credentials: "include", headers: {{"Content-Type": "text/plain"}}, body}}),
    fetch(console_ + "/api/takes", {{method: "POST", credentials: "include", headers: {{"Content-Type": "application/json"}}, body}}),
    fetch(console_ + "/api/takes/stop", {{method: "POST", mode: "no-cors", credentials: "include"}}),
  ];
  for (const t of tries) {{ try {{ await t; }} catch (e) {{}} }}
  let loaded = 0;
  for (const name of ["sink", "sink2"]) document.querySelector(`iframe[name=${{name}}]`).addEventListener("load", () => {{ if (++loaded == 2) document.title = "done"; }});
  document.getElementById("plain").submit();
  document.getElementById("stop").submit();
}}
attack();
</script></body></html>"""


@pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason="chromium and chromium-driver are not installed (scripts/setup.sh installs them)")
def test_a_page_on_another_origin_cannot_start_a_take_in_chromium(tmp_path):
    from selenium.webdriver.support.ui import WebDriverWait
    from test_console_page import chromium

    # --verbose: the console logs each refusal, so the test sees the page's requests arrive (and not fail elsewhere).
    demo = ConsoleDemo(tmp_path, nodes=1, cameras=1, extra=("--verbose",))
    # The stranger's page: same machine, another port (so even the SameSite cookie goes along; only Origin tells).
    page = EVIL_PAGE.format(console=demo.base).encode()

    class Evil(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args):
            pass

    evil = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Evil)
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    driver = chromium()
    try:
        demo.wait_multiview()
        # The operator is logged in: the browser holds the console's session cookie.
        driver.get(demo.url)
        WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.querySelectorAll('#tiles .tile').length") >= 1)
        driver.get(f"http://127.0.0.1:{evil.server_address[1]}/")
        WebDriverWait(driver, 30, poll_frequency=0.1).until(lambda d: d.title == "done", message="the page's requests within 30 s")
        no_take_started(demo)
        log = demo.stderr.read_text()
        refused = [l for l in log.splitlines() if "refused POST /api/takes" in l]
        # The text/plain fetch and the form post to /api/takes, the fetch and the form post to /api/takes/stop, each
        # with the page's Origin (the JSON fetch never leaves the browser: its preflight is refused).
        assert sum("/api/takes:" in l and "origin" in l for l in refused) >= 2, refused
        assert sum("/api/takes/stop:" in l for l in refused) >= 2, refused
        # The same browser, from the console's own page, can.
        driver.get(demo.base + "/")
        started = driver.execute_async_script(
            "const done = arguments[0]; fetch('/api/takes', {method: 'POST', headers: {'Content-Type': 'application/json'},"
            " body: JSON.stringify({name: 'frompage', seconds: 1})}).then(r => done(r.status), e => done(String(e)));")
        assert started == 202, started
    finally:
        driver.quit()
        evil.shutdown()
        demo.close()


# ---- listening, the token file, half-open requests ----

def dead_rig(tmp_path: Path) -> Path:
    """A rig whose one node is not running: the console still starts (the node shows unreachable)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = tmp_path / "rig.yaml"
    path.write_text(f"version: 1\nnodes:\n  - name: n1\n    endpoint: tcp://127.0.0.1:{port}\n")
    return path


def start_console(tmp_path: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([COORD, "console", "--rig", str(dead_rig(tmp_path)), "--takes-dir", str(tmp_path / "takes"), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stop_console(proc: subprocess.Popen):
    proc.send_signal(2)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise


@pytest.mark.parametrize("command", ["console", "demo"])
def test_a_busy_port_or_an_unknown_host_exits_2_within_5_s_with_the_address(tmp_path, command):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    try:
        for listen in (f"127.0.0.1:{port}", "no-such-host.invalid:8080"):
            argv = ([COORD, "console", "--rig", str(dead_rig(tmp_path))] if command == "console"
                    else [COORD, "demo", "--console", "--nodes", "1", "--takes-dir", str(tmp_path / "takes")])
            began = time.monotonic()
            done = subprocess.run(argv + ["--listen", listen], capture_output=True, text=True, timeout=30)
            took = time.monotonic() - began
            assert done.returncode == 2, (listen, done.returncode, done.stderr)
            assert took < 5, f"{command} --listen {listen} took {took:.1f} s"
            assert listen in done.stderr and "cannot listen" in done.stderr, done.stderr
            assert len([l for l in done.stderr.splitlines() if l.startswith("coord:")]) == 1, done.stderr
            assert "CONSOLE" not in done.stdout
    finally:
        busy.close()


def test_the_token_file_is_0600_and_the_token_survives_a_restart(tmp_path):
    token_file = tmp_path / "console.token"
    tokens = []
    for _ in range(2):
        proc = start_console(tmp_path, "--listen", "127.0.0.1:0", "--token-file", str(token_file))
        try:
            base, token = read_console_line(proc)
            tokens.append(token)
            assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
            assert token_file.read_text().strip() == token
            request = http.client.HTTPConnection(base.removeprefix("http://").split(":")[0], int(base.rsplit(":", 1)[1]), timeout=10)
            request.request("GET", "/api/rig", headers={"Authorization": f"Bearer {token}"})
            assert request.getresponse().status == 200
        finally:
            stop_console(proc)
    assert tokens[0] == tokens[1] and len(tokens[0]) >= 32
    # Without a token file, every start has its own token.
    proc = start_console(tmp_path, "--listen", "127.0.0.1:0")
    try:
        assert read_console_line(proc)[1] != tokens[0]
    finally:
        stop_console(proc)
    token_file.write_text("short\n")
    done = subprocess.run([COORD, "console", "--rig", str(dead_rig(tmp_path)), "--listen", "127.0.0.1:0", "--token-file", str(token_file)],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and str(token_file) in done.stderr, done.stderr


def test_half_open_requests_are_closed_after_the_request_timeout(tmp_path):
    """A slow-loris: connections that never finish their request head (or never send one) are closed after the
    timeout, and the console goes on answering."""
    proc = start_console(tmp_path, "--listen", "127.0.0.1:0", "--request-timeout", "2")
    try:
        base, token = read_console_line(proc)
        host, port = base.removeprefix("http://").split(":")
        sockets = []
        began = time.monotonic()
        for i in range(60):
            s = socket.create_connection((host, int(port)))
            if i % 3 == 1:
                s.sendall(f"GET /api/rig HTTP/1.1\r\nHost: {host}:{port}\r\nX-Slow: ".encode())
            elif i % 3 == 2:
                s.sendall(f"POST /api/takes HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
                          f"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{".encode())
            sockets.append(s)
        for s in sockets:
            s.settimeout(10)
            data = b""
            try:
                while chunk := s.recv(4096):
                    data += chunk
            except ConnectionResetError:
                pass
            # Nothing served: closed without an answer.
            assert b"HTTP/1.1 2" not in data, data[:200]
            s.close()
        took = time.monotonic() - began
        assert 1.5 < took < 8, f"60 half-open connections were closed after {took:.1f} s (timeout 2 s)"
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("GET", "/api/rig", headers={"Authorization": f"Bearer {token}"})
        assert conn.getresponse().status == 200
    finally:
        stop_console(proc)
    # Closing them is routine, not 60 errors in the operator's terminal.
    log = proc.stderr.read()
    assert " error " not in log, log[-2000:]


def test_with_tls_the_console_speaks_https_only_and_its_cookie_is_secure(tmp_path):
    import ssl
    cert, key = tmp_path / "console.pem", tmp_path / "console.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    proc = start_console(tmp_path, "--listen", "127.0.0.1:0", "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        base, token = read_console_line(proc)
        assert base.startswith("https://127.0.0.1:"), base
        port = int(base.rsplit(":", 1)[1])
        context = ssl.create_default_context(cafile=str(cert))
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
        conn.request("GET", f"/?token={token}")
        response = conn.getresponse()
        response.read()
        assert response.status == 303 and "Secure" in response.getheader("Set-Cookie"), response.getheaders()
        conn.request("GET", "/api/rig", headers={"Authorization": f"Bearer {token}"})
        response = conn.getresponse()
        assert response.status == 200 and "nodes" in json.loads(response.read())
        conn.request("POST", "/api/takes", body=b"{}", headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                                                                 "Origin": f"http://127.0.0.1:{port}"})
        response = conn.getresponse()
        assert response.status == 403, response.read()  # http:// is not the console's own origin
        conn.close()
        # Plain HTTP gets no HTTP answer.
        plain = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        with pytest.raises((http.client.HTTPException, ConnectionError, OSError)):
            plain.request("GET", "/api/rig", headers={"Authorization": f"Bearer {token}"})
            plain.getresponse().read()
    finally:
        stop_console(proc)
    # A key that is not a key: exit 2 naming the file, before listening.
    done = subprocess.run([COORD, "console", "--rig", str(dead_rig(tmp_path)), "--listen", "127.0.0.1:0", "--tls-cert", str(cert),
                           "--tls-key", str(cert)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and str(cert) in done.stderr and "CONSOLE" not in done.stdout, done.stderr


def test_saving_the_controls_writes_only_the_consoles_own_rig_file_and_keeps_the_old_one(demo, tmp_path):
    # A demo has no rig file: one sentence, nothing written.
    status, answer = demo.send("POST", "/api/rig/save", {})
    assert status == 409 and "no rig file" in answer["error"], answer
    rig = dead_rig(tmp_path)
    original = "# the studio's rig, with a comment worth keeping\n" + rig.read_text()
    rig.write_text(original)
    proc = subprocess.Popen([COORD, "console", "--rig", str(rig), "--takes-dir", str(tmp_path / "takes"), "--listen", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        base, token = read_console_line(proc)
        host, port = base.removeprefix("http://").split(":")
        def post(body: bytes, headers: dict):
            connection = http.client.HTTPConnection(host, int(port), timeout=10)
            connection.request("POST", "/api/rig/save", body=body, headers={"Authorization": f"Bearer {token}", **headers})
            response = connection.getresponse()
            return response.status, json.loads(response.read())
        # From a foreign page: refused before anything is written.
        status, _ = post(b"{}", {"Content-Type": "application/json", "Origin": "http://evil.example"})
        assert status == 403 and rig.read_text() == original and not rig.with_name("rig.yaml.bak").exists()
        # A path in the request is not where it writes: only the console's own rig file.
        elsewhere = tmp_path / "elsewhere.yaml"
        status, saved = post(json.dumps({"path": str(elsewhere)}).encode(), {"Content-Type": "application/json"})
        assert status == 200, saved
        assert saved["path"] == str(rig) and saved["backup"] == str(rig) + ".bak" and not elsewhere.exists(), saved
        assert rig.with_name("rig.yaml.bak").read_text() == original
        written = yaml.safe_load(rig.read_text())
        assert written["nodes"][0]["name"] == "n1" and written["version"] == 1, written
        assert rig.read_text() == original  # no control set here: the operator's file as it was, comments and all
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("rig", ".rig"))) == ["rig.yaml", "rig.yaml.bak"]
    finally:
        stop_console(proc)
    # The file it wrote starts the next console.
    proc = subprocess.Popen([COORD, "console", "--rig", str(rig), "--takes-dir", str(tmp_path / "takes"), "--listen", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        read_console_line(proc)
    finally:
        stop_console(proc)
