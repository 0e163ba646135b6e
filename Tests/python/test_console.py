"""The live console (issue 12, CONTRACT §6) end to end: `coord demo --console` with real coord-node processes, real
ZeroMQ preview sockets, the HTTP API and the WebSocket. Every tile image is decoded (the SYNCSTRIPE, read at the
tile's scale by this file's own decoder) so the frame matching is checked against ground truth, not against what
coord says about itself."""
from __future__ import annotations

import base64
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
COORD = os.environ.get("COORD", str(ROOT / ".build/debug/coord"))

_spec = importlib.util.spec_from_file_location("check_take", ROOT / "scripts/check-take.py")
check_take = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_take)


CONSOLE_RE = re.compile(r"^CONSOLE (https?://[^/\s]+)/\?token=([A-Za-z0-9._~-]+)$")


def read_console_line(proc: subprocess.Popen) -> tuple[str, str]:
    """The console's base URL and token from its one CONSOLE line on stdout (CONTRACT §6b)."""
    line = proc.stdout.readline().strip()
    match = CONSOLE_RE.match(line)
    assert match, f"the console printed {line!r}"
    return match.group(1), match.group(2)


class ConsoleDemo:
    def __init__(self, tmp_path: Path, nodes: int = 3, cameras: int = 2, extra: tuple = ()):
        self.takes = tmp_path / "takes"
        self.stderr = tmp_path / "coord.err"
        self.proc = subprocess.Popen(
            [COORD, "demo", "--console", "--listen", "127.0.0.1:0", "--nodes", str(nodes),
             "--cameras-per-node", str(cameras), "--takes-dir", str(self.takes), "--seed", "7", *extra],
            stdout=subprocess.PIPE, stderr=open(self.stderr, "w"), text=True)
        self.base, self.token = read_console_line(self.proc)
        self.url = f"{self.base}/?token={self.token}"
        self.cameras = nodes * cameras

    @property
    def auth(self) -> dict:
        return {"Authorization": f"Bearer {self.token}"}

    def get(self, path: str):
        with urllib.request.urlopen(urllib.request.Request(self.base + path, headers=self.auth), timeout=10) as r:
            body = r.read()
            return json.loads(body) if r.headers.get("Content-Type", "").startswith("application/json") else body

    def send(self, method: str, path: str, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=b"{}" if data is None else data, method=method,
                                         headers={"Content-Type": "application/json", **self.auth})
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def wait_multiview(self, after_group=None, take_id=None, timeout=30.0):
        deadline = time.monotonic() + timeout
        said = "a set of an earlier group"
        while time.monotonic() < deadline:
            try:
                mv = self.get("/api/multiview")
                if (after_group is None or mv["group"] != after_group) and (take_id is None or mv.get("take_id") == take_id):
                    return mv
            except urllib.error.HTTPError as e:
                said = f"{e.code} {e.read().decode(errors='replace')}"
            time.sleep(0.05)
        # What the console said last, and its log's end: enough to tell a silent node from groups that never match.
        log = self.stderr.read_text(errors="replace").splitlines()[-25:] if self.stderr.exists() else []
        try:
            nodes = [{k: n.get(k) for k in ("name", "reachable", "state", "message", "clock_uncertainty_us")}
                     for n in self.get("/api/rig")["nodes"]]
        except Exception as e:   # noqa: BLE001 - the diagnosis must not hide the failure
            nodes = repr(e)
        raise AssertionError(f"no new complete set within {timeout} s; the console last answered {said}; "
                             f"its nodes: {nodes}; its log ends:\n" + "\n".join(log))

    def wait_take(self, states, timeout=60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            current = self.get("/api/takes")["current"]
            if current and current["state"] in states:
                return current
            time.sleep(0.2)
        raise AssertionError(f"the take did not reach {states} within {timeout} s: {current}")

    def close(self):
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise


@pytest.fixture
def demo(tmp_path):
    d = ConsoleDemo(tmp_path)
    yield d
    d.close()


@pytest.fixture(scope="module")
def shared_demo(tmp_path_factory):
    """One console for the tests that change nothing (refusals)."""
    d = ConsoleDemo(tmp_path_factory.mktemp("console"))
    yield d
    d.close()


def tile_stripe(jpeg: bytes, camera_width: int):
    """Decodes the stripe from a tile JPEG at the tile's scale: block (row, col) centre sampled at its scaled place."""
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", "-", "-f", "rawvideo", "-pix_fmt", "gray", "-"],
                         input=jpeg, capture_output=True, check=True).stdout
    probe = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=width,height", "-of", "csv=p=0", "-"],
                           input=jpeg, capture_output=True, check=True).stdout.decode().strip().split(",")
    w, h = int(probe[0]), int(probe[1])
    image = np.frombuffer(raw, np.uint8).reshape(h, w)
    scale = w / camera_width
    bits = []
    for b in range(104):
        row, col = divmod(b, 13)
        y, x = int((row * 8 + 4) * scale), int((col * 8 + 4) * scale)
        bits.append(1 if image[y, x] > 125 else 0)
    data = np.packbits(np.array(bits, np.uint8)).tobytes()
    if data[0] != 0xA5 or check_take.crc8(data[:12]) != data[12]:
        return None
    return data[1], int.from_bytes(data[6:12], "big")


def check_set(demo: ConsoleDemo, mv: dict, widths: dict):
    assert mv["complete"] is True
    assert len(mv["tiles"]) == demo.cameras
    groups = {t["group"] for t in mv["tiles"]}
    assert groups == {mv["group"]}, f"one set mixes groups {groups}"
    truths, ordinals = [], set()
    for t in mv["tiles"]:
        jpeg = demo.get("/" + t["image"])
        decoded = tile_stripe(jpeg, widths[(t["node"], t["camera"])])
        assert decoded is not None, f"the stripe of {t['node']}/{t['camera']} group {t['group']} does not decode"
        ordinal, truth = decoded
        ordinals.add(ordinal)
        truths.append(truth)
    assert len(ordinals) == demo.cameras, f"tiles are not {demo.cameras} distinct cameras: ordinals {ordinals}"
    return max(truths) - min(truths)


def test_the_multiview_serves_frame_matched_sets_whose_true_centres_agree(demo):
    mv = demo.wait_multiview()
    rig = demo.get("/api/rig")
    assert len(rig["nodes"]) == 3 and all(n["reachable"] for n in rig["nodes"])
    widths = {(c["node"], c["camera"]): c["width"] for c in rig["cameras"]}
    assert len(widths) == 6
    spreads = []
    for _ in range(20):
        mv = demo.wait_multiview(after_group=mv["group"])
        spreads.append(check_set(demo, mv, widths))
    # Every set's true exposure centres (from the stripes) within 1 ms of each other.
    assert max(spreads) <= 1000, f"true centre spreads {spreads} µs"


def test_the_page_is_self_contained_and_the_api_is_described(shared_demo):
    demo = shared_demo
    page = demo.get("/").decode()
    assert "<html" in page.lower()
    # Nothing from the network: no absolute http(s) URL is loaded by the page.
    assert not re.search(r"""(src|href)\s*=\s*["']https?://""", page)
    spec = demo.get("/openapi.json")
    assert spec["openapi"].startswith("3.")


def test_a_take_started_and_stopped_from_the_api_ends_every_file_on_one_group(demo):
    demo.wait_multiview()
    status, take = demo.send("POST", "/api/takes", {"name": "fromapi"})
    assert status == 202, take
    status, again = demo.send("POST", "/api/takes", {"name": "second"})
    assert status == 409 and "already" in again["error"]
    recording = demo.wait_take({"recording"})
    # Sets during the take come from the take's own grid.
    mv = demo.wait_multiview(take_id=recording["take_id"])
    assert {t["group"] for t in mv["tiles"]} == {mv["group"]}
    # While it records, every node's microphone has a level meter (the synthetic microphone's floor is about
    # -60 dBFS between its clicks).
    deadline = time.monotonic() + 15
    while True:
        nodes = demo.get("/api/rig")["nodes"]
        levels = {n["name"]: [m["level_dbfs"] for m in n.get("mics", []) if m["mic"] == "mic0"] for n in nodes}
        if all(levels.values()) and all(-80 < v[0] <= 0 for v in levels.values()):
            break
        assert time.monotonic() < deadline, f"no level meter for every node: {levels}"
        time.sleep(0.2)
    status, stopping = demo.send("POST", "/api/takes/stop")
    assert status == 202, stopping
    done = demo.wait_take({"done", "partial", "failed"})
    assert done["state"] == "done", done
    take_dir = demo.takes / done["take_id"]
    manifest = json.loads((take_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    failures, _ = check_take.check(take_dir)
    assert not failures, failures
    tables = sorted(take_dir.glob("*/*.frames.csv"))
    assert len(tables) == 6
    rows = {len(t.read_text().splitlines()) for t in tables}
    assert len(rows) == 1, f"frames.csv row counts differ: {rows}"
    listed = demo.get("/api/takes")["takes"]
    assert any(t["take_id"] == done["take_id"] and t["report"] for t in listed)
    assert b"<svg" in demo.get("/" + done["report"])
    # Every file of the take is served, node folders included (CONTRACT §6b), byte for byte; nothing outside it.
    for path in [*sorted(take_dir.glob("*/*.mkv"))[:1], tables[0], take_dir / "manifest.json"]:
        relative = path.relative_to(take_dir).as_posix()
        request = urllib.request.Request(f"{demo.base}/takes/{done['take_id']}/{relative}", headers=demo.auth)
        with urllib.request.urlopen(request, timeout=30) as r:
            assert r.read() == path.read_bytes(), relative
    for bad in (f"{done['take_id']}/..%2F..%2Fetc/passwd", f"{done['take_id']}/{tables[0].parent.name}",
                f"{done['take_id']}/nosuch/cam0.mkv"):
        request = urllib.request.Request(f"{demo.base}/takes/{bad}", headers=demo.auth)
        with pytest.raises(urllib.error.HTTPError) as refused_file:
            urllib.request.urlopen(request, timeout=10)
        assert refused_file.value.code == 404 and json.loads(refused_file.value.read())["error"], bad
    status, refused = demo.send("POST", "/api/takes/stop")
    assert status == 409


def test_the_take_on_the_page_tells_the_truth_while_it_records(tmp_path):
    """CONTRACT §6b: the take being recorded is never listed with a final status, its elapsed_s counts from
    group 0 and never passes `seconds`, and the takes are listed newest first."""
    demo = ConsoleDemo(tmp_path, nodes=2, cameras=1)
    try:
        demo.wait_multiview()
        ids = []
        for name in ("first", "second"):
            status, take = demo.send("POST", "/api/takes", {"name": name, "seconds": 2})
            assert status == 202, take
            seen, listed_while_recording = [], []
            while True:
                answer = demo.get("/api/takes")
                current = answer["current"]
                if current["state"] in {"done", "partial", "failed"}:
                    break
                seen.append((current["state"], current["elapsed_s"]))
                if current["take_id"]:
                    entry = [t for t in answer["takes"] if t["take_id"] == current["take_id"]]
                    listed_while_recording += [(current["state"], e["status"], e["report"]) for e in entry]
                time.sleep(0.05)
            assert current["state"] == "done", current
            ids.append(current["take_id"])
            assert all(0 <= elapsed <= 2.0 for _, elapsed in seen), seen
            assert all(elapsed == 0 for state, elapsed in seen if state == "starting"), seen
            assert any(state == "recording" and elapsed > 0.5 for state, elapsed in seen), seen
            # While it records the list says so: never "partial" (the interim manifest's), no report link yet. (The
            # take may end between the two reads of one answer: then it is listed "complete".)
            assert listed_while_recording, "the running take was never listed"
            assert any(status == "recording" for _, status, _ in listed_while_recording), listed_while_recording
            assert all(status in {"starting", "recording", "stopping", "collecting"} and report is None or status == "complete"
                       for _, status, report in listed_while_recording), listed_while_recording
            manifest = json.loads((demo.takes / current["take_id"] / "manifest.json").read_text())
            assert current["elapsed_s"] == pytest.approx(manifest["groups"] * manifest["frame_period_us"] / 1e6)
            assert current["elapsed_s"] == pytest.approx(2.0, abs=0.05)
        takes = demo.get("/api/takes")["takes"]
        assert [t["take_id"] for t in takes][:2] == ids[::-1], takes
        assert [t["status"] for t in takes][:2] == ["complete", "complete"], takes
    finally:
        demo.close()


def test_bad_take_requests_get_one_sentence(shared_demo):
    demo = shared_demo
    status, body = demo.send("POST", "/api/takes", {"name": "../etc", "seconds": 1})
    assert status == 422 and "name" in body["error"]
    status, body = demo.send("POST", "/api/takes", {"seconds": "soon"})
    assert status == 422 and "seconds" in body["error"]
    status, body = demo.send("POST", "/api/takes", {"seconds": -1})
    assert status == 422 and "seconds" in body["error"]


def websocket_handshake(base: str, token: str, origin: str | None = None) -> tuple[socket.socket, bytes]:
    """Sends a WebSocket upgrade for /ws as the page would (its own Origin unless told otherwise, the token in
    the session cookie); the socket and the first bytes of the answer."""
    host, port = base.removeprefix("http://").split(":")
    s = socket.create_connection((host, int(port)))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET /ws HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Origin: {origin or base}\r\nCookie: coord_console_{port}={token}\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    s.settimeout(10)
    answer = b""
    while b"\r\n\r\n" not in answer:   # the whole head: frames may follow it in the same read
        chunk = s.recv(4096)
        if not chunk:
            break
        answer += chunk
    return s, answer


def open_stalled_websocket(base: str, token: str) -> socket.socket:
    """A viewer that completes the WebSocket handshake and then never reads."""
    s, answer = websocket_handshake(base, token)
    assert answer.startswith(b"HTTP/1.1 101"), answer[:200]
    s.settimeout(None)
    return s


def test_a_stalled_viewer_costs_the_take_nothing(demo):
    stalled = [open_stalled_websocket(demo.base, demo.token) for _ in range(3)]
    try:
        demo.wait_multiview()
        status, _ = demo.send("POST", "/api/takes", {"name": "stalled", "seconds": 20})
        assert status == 202
        done = demo.wait_take({"done", "partial", "failed"}, timeout=90)
        assert done["state"] == "done", done
        take_dir = demo.takes / done["take_id"]
        manifest = json.loads((take_dir / "manifest.json").read_text())
        assert manifest["status"] == "complete"
        failures, figures = check_take.check(take_dir)
        assert not failures, failures
        dups = sum(c.get("dropped", 0) for c in manifest["cameras"])
        assert dups == 0, f"{dups} dup frames with stalled viewers"
        # The console still answers while the viewers stay stalled.
        assert demo.get("/api/rig")["nodes"]
    finally:
        for s in stalled:
            s.close()


def tile_brightness(demo: ConsoleDemo, tile: dict, camera_width: int) -> float:
    """Mean luma of a tile outside its stripe (the stripe is painted after the controls, so it never changes)."""
    jpeg = demo.get("/" + tile["image"])
    probe = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=width,height", "-of", "csv=p=0", "-"],
                           input=jpeg, capture_output=True, check=True).stdout.decode().strip().split(",")
    w, h = int(probe[0]), int(probe[1])
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", "-", "-f", "rawvideo", "-pix_fmt", "gray", "-"],
                         input=jpeg, capture_output=True, check=True).stdout
    image = np.frombuffer(raw, np.uint8).reshape(h, w).astype(np.float64)
    below = int(64 * w / camera_width) + 2
    return float(image[below:, :].mean())


def brightness_now(demo: ConsoleDemo, widths: dict, from_group: int | None = None, sets: int = 3) -> dict:
    """Each camera's mean tile brightness over `sets` sets: the next ones after the newest now, and after a change
    none before the group the console says shows it (`in_force_from_group`: frames still on their way predate it)."""
    mv = demo.wait_multiview()
    totals: dict = {}
    taken = 0
    while taken < sets:
        mv = demo.wait_multiview(after_group=mv["group"])
        if from_group is not None and mv["group"] < from_group:
            continue
        taken += 1
        for t in mv["tiles"]:
            key = (t["node"], t["camera"])
            totals[key] = totals.get(key, 0.0) + tile_brightness(demo, t, widths[key]) / sets
    return totals


def test_controls_change_one_cameras_picture_apply_to_all_changes_every_one_and_the_take_records_them(demo):
    demo.wait_multiview()
    rig = demo.get("/api/rig")
    widths = {(c["node"], c["camera"]): c["width"] for c in rig["cameras"]}
    before = brightness_now(demo, widths)

    status, applied = demo.send("PUT", "/api/cameras/node-2/cam1/controls", {"gain_db": 9})
    assert status == 200, applied
    assert applied["controls"]["gain_db"] == 9
    after = brightness_now(demo, widths, from_group=applied["in_force_from_group"])
    assert after[("node-2", "cam1")] > before[("node-2", "cam1")] * 1.2, (before, after)
    for key in widths:
        if key != ("node-2", "cam1"):
            assert abs(after[key] - before[key]) < before[key] * 0.05, (key, before[key], after[key])
    assert {(c["node"], c["camera"]): c["controls"].get("gain_db") for c in demo.get("/api/rig")["cameras"]}[("node-2", "cam1")] == 9
    snippet = demo.get("/api/rig/controls.yaml").decode()
    assert "- name: node-2" in snippet and "controls: {exposure_us: 16666, gain_db: 9.0" in snippet, snippet

    status, everywhere = demo.send("PUT", "/api/controls", {"exposure_us": 8000, "white_balance_k": 4000})
    assert status == 200, everywhere
    assert len(everywhere["cameras"]) == 6
    dimmed = brightness_now(demo, widths, from_group=max(c["in_force_from_group"] for c in everywhere["cameras"]))
    for key in widths:
        assert dimmed[key] < after[key] * 0.85, (key, after[key], dimmed[key])

    status, take = demo.send("POST", "/api/takes", {"name": "controlled", "seconds": 2})
    assert status == 202
    done = demo.wait_take({"done", "partial", "failed"})
    assert done["state"] == "done", done
    take_dir = demo.takes / done["take_id"]
    manifest = json.loads((take_dir / "manifest.json").read_text())
    recorded = {(c["node"], c["camera"]): c["controls"] for c in manifest["cameras"]}
    assert all(c["exposure_us"] == 8000 and c["white_balance_k"] == 4000 for c in recorded.values()), recorded
    assert recorded[("node-2", "cam1")]["gain_db"] == 9
    assert recorded[("node-1", "cam0")]["gain_db"] == 0
    failures, _ = check_take.check(take_dir)
    assert not failures, failures


@pytest.mark.parametrize("path, body, code, needles", [
    ("/api/cameras/node-1/cam0/controls", {"exposure_us": 999999}, 422, ["node-1/cam0", "exposure_us", "10…33333"]),
    ("/api/cameras/node-1/cam0/controls", {"gain_db": 40}, 422, ["node-1/cam0", "gain_db", "0.0…24.0"]),
    ("/api/cameras/node-1/cam0/controls", {"iso": 100}, 422, ["iso", "not a camera control"]),
    ("/api/cameras/node-1/cam0/controls", {"exposure_us": "long"}, 422, ["exposure_us"]),
    ("/api/cameras/node-1/cam0/controls", {}, 422, ["no control given"]),
    ("/api/cameras/node-9/cam0/controls", {"gain_db": 1}, 404, ["node-9/cam0"]),
    ("/api/controls", {"focus": 3}, 422, ["focus", "0.0…1.0"]),
])
def test_a_control_out_of_range_gets_422_and_one_sentence(shared_demo, path, body, code, needles):
    demo = shared_demo
    demo.wait_multiview()
    status, answer = demo.send("PUT", path, body)
    assert status == code, answer
    for needle in needles:
        assert needle in answer["error"], answer


def test_the_openapi_document_validates(shared_demo):
    from openapi_spec_validator import validate
    spec = shared_demo.get("/openapi.json")
    validate(spec)
    # Every route the console serves is described.
    for path in ("/api/rig", "/api/multiview", "/api/takes", "/api/takes/stop", "/api/snap", "/api/controls",
                 "/api/cameras/{node}/{camera}/controls", "/preview/{node}/{camera}/{file}", "/openapi.json"):
        assert path in spec["paths"], path


SCHEMATHESIS = ROOT / ".venv/bin/st"


@pytest.mark.skipif(not SCHEMATHESIS.exists(), reason="schemathesis is not installed in .venv")
def test_schemathesis_finds_no_server_error(shared_demo, tmp_path):
    """Generated requests against every operation (takes and Snaps excluded: each would record one): no 5xx, and every
    answer matches the document."""
    demo = shared_demo
    demo.wait_multiview()
    run = subprocess.run(
        [str(SCHEMATHESIS), "run", demo.base + f"/openapi.json?token={demo.token}", "--url", demo.base,
         "--header", f"Authorization: Bearer {demo.token}", "--checks", "not_a_server_error",
         "--max-examples", "30", "--exclude-operation-id", "startTake", "--exclude-operation-id", "snap", "--workers", "1",
         "--report-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def ws_messages(base: str, token: str):
    """Yields the console's WebSocket messages as JSON (a minimal RFC 6455 reader; server frames are unmasked)."""
    s, answer = websocket_handshake(base, token)
    assert answer.startswith(b"HTTP/1.1 101"), answer[:200]
    s.settimeout(30)
    buffer = answer.split(b"\r\n\r\n", 1)[1]   # the console's first frames can come with its answer

    def need(n):
        nonlocal buffer
        while len(buffer) < n:
            chunk = s.recv(65536)
            if not chunk:
                raise EOFError
            buffer += chunk
    try:
        while True:
            need(2)
            length, offset = buffer[1] & 0x7F, 2
            if length == 126:
                need(4); length, offset = int.from_bytes(buffer[2:4], "big"), 4
            elif length == 127:
                need(10); length, offset = int.from_bytes(buffer[2:10], "big"), 10
            need(offset + length)
            opcode, payload, buffer = buffer[0] & 0x0F, buffer[offset:offset + length], buffer[offset + length:]
            if opcode == 1:
                yield json.loads(payload)
    finally:
        s.close()


def test_a_node_that_goes_away_is_unreachable_and_the_other_tiles_go_on(demo):
    from test_demo import node_processes_of
    demo.wait_multiview()
    victim = next(pid for pid in node_processes_of(demo.proc.pid)
                  if "node-2" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"))
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        nodes = {n["name"]: n for n in demo.get("/api/rig")["nodes"]}
        if not nodes["node-2"]["reachable"]:
            break
        time.sleep(0.2)
    assert not nodes["node-2"]["reachable"] and nodes["node-2"]["message"], nodes
    assert nodes["node-1"]["reachable"] and nodes["node-3"]["reachable"]
    # The other cameras' tiles keep coming, in sets that mark node-2's cameras missing.
    groups = []
    for message in ws_messages(demo.base, demo.token):
        if message.get("type") != "multiview":
            continue
        tiles = {(t["node"], t["camera"]): t for t in message["tiles"]}
        assert all(tiles[("node-2", c)]["missing"] and tiles[("node-2", c)]["image"] is None for c in ("cam0", "cam1"))
        present = [t for k, t in tiles.items() if k[0] != "node-2"]
        assert all(not t["missing"] and t["group"] == message["group"] for t in present), message
        groups.append(message["group"])
        if len(groups) == 5:
            break
    assert groups == sorted(set(groups)), groups


def test_the_rig_metrics_name_every_node_and_camera_and_pass_promtool(shared_demo):
    """CONTRACT §7: the console's /metrics is the rig's view in the nodes' own names and labels."""
    import shutil
    deadline = time.monotonic() + 20
    while True:
        text = shared_demo.get("/metrics").decode()
        up = {l.split('node="')[1].split('"')[0]: l.split()[-1] for l in text.splitlines() if l.startswith("coord_node_up{")}
        if up == {"node-1": "1.0", "node-2": "1.0", "node-3": "1.0"}:
            break
        assert time.monotonic() < deadline, f"not every node up in the console's metrics: {up}"
        time.sleep(0.5)
    assert all(l.startswith("coord_node_") for l in text.splitlines() if l and not l.startswith("#")), text
    if shutil.which("promtool"):
        lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
        assert lint.returncode == 0, lint.stderr
