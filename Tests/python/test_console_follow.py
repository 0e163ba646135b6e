"""The console follows the rig as it changes (issue 27): a node that restarts as a new process on another preview
port is shaken hands with again, its tiles come back and the controls the operator set are set on it again;
`/api/multiview` never serves an old set as current; nodes go back to idle once their take is collected; the rig's
camera counters keep every take; the controls saved into the rig file change only their values in its text."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from test_console import COORD, ConsoleDemo, check_set, read_console_line
from test_demo import node_processes_of


def node_pid(demo: ConsoleDemo, name: str) -> int:
    return next(pid for pid in node_processes_of(demo.proc.pid)
                if f"\0{name}\0" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"))


def restart_node(demo: ConsoleDemo, name: str, before_start=None) -> subprocess.Popen:
    """Kills demo node `name` and starts it again as a new process on the same control port and another preview
    port (as a systemd restart with a `*` preview port does). `before_start` runs while the node is down."""
    pid = node_pid(demo, name)
    args = [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]]
    staging = Path(args[args.index("--staging") + 1])
    log = staging.parent / f"{name}.log"
    port = None
    for line in log.read_text(errors="replace").splitlines():
        if "listening" in line:
            port = re.search(r"tcp://127\.0\.0\.1:(\d+)", line).group(1)
            break
    assert port, f"no 'listening' line with the endpoint in {log}"
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    if before_start:
        before_start()
    args[args.index("--endpoint") + 1] = f"tcp://127.0.0.1:{port}"
    args += ["--preview-endpoint", "tcp://127.0.0.1:*"]
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=open(staging.parent / f"{name}-restarted.log", "wb"), text=True)
    line = proc.stdout.readline().strip()
    assert line == f"READY tcp://127.0.0.1:{port}", f"the restarted node printed {line!r}"
    return proc


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} within {timeout} s"
        time.sleep(0.1)


def multiview_answer(demo: ConsoleDemo) -> tuple[int, dict]:
    request = urllib.request.Request(demo.base + "/api/multiview", headers=demo.auth)
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_a_restarted_node_on_another_preview_port_gets_its_tiles_back_and_an_old_set_is_never_current(tmp_path):
    demo = ConsoleDemo(tmp_path, nodes=2, cameras=1)
    restarted = None
    try:
        before = demo.wait_multiview()
        widths = {(c["node"], c["camera"]): c["width"] for c in demo.get("/api/rig")["cameras"]}
        stale = {}

        def while_down():
            # With node-2 gone no set completes: within seconds the answer is 503 with how old the newest set is
            # and which camera is silent, never that set as if current.
            stale.update(wait_for(lambda: (lambda a: a[1] if a[0] == 503 else None)(multiview_answer(demo)), 10,
                                  "a 503 for the old set"))

        restarted = restart_node(demo, "node-2", before_start=while_down)
        assert re.search(r"is \d+\.\d s old", stale["error"]) and "node-2/cam0" in stale["error"], stale
        assert "node-1/cam0" not in stale["error"], stale
        # Its tiles come back within seconds, in complete sets whose stripes decode to both cameras.
        fresh = demo.wait_multiview(after_group=before["group"], timeout=15)
        assert fresh["group"] > before["group"]
        check_set(demo, fresh, widths)
        nodes = {n["name"]: n for n in demo.get("/api/rig")["nodes"]}
        assert nodes["node-2"]["reachable"] and nodes["node-2"]["state"] == "idle", nodes
    finally:
        demo.close()
        if restarted:
            restarted.kill()
            restarted.wait(timeout=10)


def test_nodes_are_idle_after_collection_and_the_rig_counters_keep_every_take(tmp_path):
    demo = ConsoleDemo(tmp_path, nodes=2, cameras=1)
    try:
        demo.wait_multiview()
        ids = []
        for name in ("one", "two"):
            status, take = demo.send("POST", "/api/takes", {"name": name, "seconds": 1})
            assert status == 202, take
            done = wait_for(lambda: (lambda c: c if c and c["state"] in {"done", "partial", "failed"} else None)(
                demo.get("/api/takes")["current"]), 60, "the take's end")
            assert done["state"] == "done", done
            ids.append(done["take_id"])
            # Collected: every node back to idle, no take id left over.
            wait_for(lambda: all(n["state"] == "idle" and n.get("take_id") is None for n in demo.get("/api/rig")["nodes"]),
                     10, "every node idle after collection")
        frames = {}
        for take_id in ids:
            manifest = json.loads((demo.takes / take_id / "manifest.json").read_text())
            for camera in manifest["cameras"]:
                rows = len((demo.takes / take_id / camera["node"] / f"{camera['camera']}.frames.csv").read_text().splitlines()) - 1
                frames[(camera["node"], camera["camera"])] = frames.get((camera["node"], camera["camera"]), 0) + rows
        text = demo.get("/metrics").decode()
        counted = {(m.group(1), m.group(2)): float(m.group(3)) for m in re.finditer(
            r'^coord_node_camera_frames_total\{(?=[^}]*node="([^"]+)")(?=[^}]*camera="([^"]+)")[^}]*\} (\S+)$', text, re.M)}
        for key, rows in frames.items():
            # Both takes counted (the preview's frames are no take's), not only the last one.
            assert counted.get(key, 0) >= rows, (key, rows, counted)
    finally:
        demo.close()


def test_a_nodes_frame_counters_count_every_take_of_its_life_and_it_is_idle_after_collection(tmp_path):
    """README/CONTRACT §7: coord_node_camera_frames_total counts over the node process's life, scraped once after
    two takes (not only the last take's frames); the node is idle, with no take, once its take is collected."""
    from conftest import Node
    from test_budget_pressure import COORD
    node = Node(tmp_path / "n", extra_args=["--name", "solo", "--synthetic", "cam0", "--metrics", "127.0.0.1:0"])
    try:
        line = node.stdout_lines.get(timeout=20)
        url = re.match(r"^METRICS (http://127\.0\.0\.1:\d+/metrics)$", line or "").group(1)
        rig = tmp_path / "rig.yaml"
        rig.write_text(f"version: 1\nnodes:\n  - name: solo\n    endpoint: {node.endpoint}\n")
        takes = tmp_path / "takes"
        for _ in range(2):
            done = subprocess.run([str(COORD), "start-take", "--rig", str(rig), "--seconds", "1", "--size", "320x240",
                                   "--fps", "30", "--takes-dir", str(takes)], capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr
        expected = sum(c["frames"] for d in takes.iterdir() if d.is_dir()
                       for c in json.loads((d / "manifest.json").read_text())["cameras"])
        with urllib.request.urlopen(url, timeout=5) as r:
            text = r.read().decode()
        frames = float(re.search(r'^coord_node_camera_frames_total\{[^}]*camera="cam0"[^}]*\} (\S+)$', text, re.M).group(1))
        assert frames == expected, (frames, expected)
        assert re.search(r"^coord_node_takes_recorded_total\{[^}]*\} 2(\.0)?$", text, re.M), text
        status = subprocess.run([str(COORD), "status", "--rig", str(rig)], capture_output=True, text=True, timeout=30)
        assert status.returncode == 0 and "idle" in status.stdout and "finished" not in status.stdout, status.stdout + status.stderr
    finally:
        node.cleanup()


def test_a_restarted_node_gets_the_controls_set_in_the_console_again(tmp_path):
    demo = ConsoleDemo(tmp_path, nodes=2, cameras=1)
    restarted = None

    def camera(node: str) -> dict:
        return next(c["controls"] for c in demo.get("/api/rig")["cameras"] if c["node"] == node)

    def message(node: str) -> str:
        return next(n for n in demo.get("/api/rig")["nodes"] if n["name"] == node).get("message") or ""

    try:
        demo.wait_multiview()
        default = camera("node-2").get("exposure_us")
        status, applied = demo.send("PUT", "/api/cameras/node-2/cam0/controls", {"exposure_us": 7000, "gain_db": 3})
        assert status == 200 and applied["controls"]["exposure_us"] == 7000 and default != 7000, (applied, default)
        restarted = restart_node(demo, "node-2")
        # The new process starts from its camera's own controls; the console sets the operator's again and says so.
        note = wait_for(lambda: (lambda m: m if "applied again" in m else None)(message("node-2")), 20, "the re-applied note")
        assert "exposure 7000 µs" in note and "gain 3.0" in note, note
        # From here on every value shown is the new process's own word (its replies and statuses).
        shown = wait_for(lambda: (lambda c: c if c.get("exposure_us") == 7000 and c.get("gain_db") == 3 else None)(camera("node-2")),
                         10, "node-2's controls as the restarted node reports them")
        assert shown["exposure_us"] == 7000, shown
        # The other node never restarted and is told nothing.
        assert "applied again" not in message("node-1")
    finally:
        demo.close()
        if restarted:
            restarted.kill()
            restarted.wait(timeout=10)


def test_saving_the_controls_edits_the_rig_file_in_place_and_keeps_every_comment(node, tmp_path):
    original = f"""# Stage A. Keep this header: the crew reads it.
version: 1

nodes:
  # the only box, by the door
  - name: node-a
    endpoint: {node.endpoint}   # its control port
    cameras:
      - name: cam0        # the wide: "quoted", {{braces}}, [brackets] & *stars
        controls:
          exposure_us: 8000   # daylight
      - cam1              # the close-up
take:
  fps: 25   # PAL
  size: 320x240
"""
    rig = tmp_path / "rig.yaml"
    rig.write_text(original)
    proc = subprocess.Popen([COORD, "console",
                             "--rig", str(rig), "--takes-dir", str(tmp_path / "takes"), "--listen", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=open(tmp_path / "console.err", "w"), text=True)
    try:
        base, token = read_console_line(proc)
        auth = {"Authorization": f"Bearer {token}"}

        def send(method: str, path: str, body=None):
            request = urllib.request.Request(base + path, method=method, headers={"Content-Type": "application/json", **auth},
                                             data=None if method == "GET" else json.dumps(body or {}).encode())
            try:
                with urllib.request.urlopen(request, timeout=10) as r:
                    return r.status, json.loads(r.read())
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read())

        wait_for(lambda: len(send("GET", "/api/rig")[1]["cameras"]) == 2, 20, "the node's two cameras in the console")
        status, applied = send("PUT", "/api/cameras/node-a/cam0/controls", {"exposure_us": 12000, "gain_db": 2.5})
        assert status == 200, applied
        status, saved = send("POST", "/api/rig/save")
        assert status == 200 and saved["cameras"] == 1 and saved["path"] == str(rig), saved
        # Every comment, blank line and other value as written; the two values changed in place.
        assert rig.read_text() == original.replace("exposure_us: 8000   # daylight\n",
                                                   "exposure_us: 12000   # daylight\n          gain_db: 2.5\n"), rig.read_text()
        assert (tmp_path / "rig.yaml.bak").read_text() == original
        # Edited by hand since: not saved over, one sentence.
        by_hand = rig.read_text() + "# a note added by hand\n"
        rig.write_text(by_hand)
        status, refused = send("POST", "/api/rig/save")
        assert status == 409 and "changed on disk" in refused["error"], refused
        assert rig.read_text() == by_hand
        # A take from this console opens cam0 with what the operator set, not the 8000 the file said at start.
        status, _ = send("POST", "/api/takes", {"name": "saved", "seconds": 1})
        assert status == 202
        done = wait_for(lambda: (lambda t: t if t and t["state"] in ("done", "partial", "failed") else None)(send("GET", "/api/takes")[1]["current"]),
                        90, "the take's end")
        assert done["state"] == "done", done
        manifest = json.loads((tmp_path / "takes" / done["take_id"] / "manifest.json").read_text())
        recorded = {c["camera"]: c["controls"] for c in manifest["cameras"]}
        assert recorded["cam0"]["exposure_us"] == 12000 and recorded["cam0"]["gain_db"] == 2.5, recorded
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    cam0 = yaml.safe_load(rig.read_text())["nodes"][0]["cameras"][0]
    assert cam0["controls"] == {"exposure_us": 12000, "gain_db": 2.5}, cam0


def test_a_console_started_again_says_which_values_its_next_take_will_change(node, tmp_path):
    """The node keeps what an earlier console set; a console started again on the same rig file shows it, and says
    that its next take sets the file's value instead (and the take does)."""
    rig = tmp_path / "rig.yaml"
    rig.write_text(f"""version: 1
nodes:
  - name: node-a
    endpoint: {node.endpoint}
    cameras:
      - name: cam0
        controls: {{exposure_us: 8000}}
take: {{fps: 25, size: 320x240}}
""")

    def console():
        proc = subprocess.Popen([COORD, "console", "--rig", str(rig), "--takes-dir", str(tmp_path / "takes"),
                                 "--listen", "127.0.0.1:0"],
                                stdout=subprocess.PIPE, stderr=open(tmp_path / "console.err", "a"), text=True)
        base, token = read_console_line(proc)

        def send(method: str, path: str, body=None):
            request = urllib.request.Request(base + path, method=method,
                                             headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
                                             data=None if method == "GET" else json.dumps(body or {}).encode())
            with urllib.request.urlopen(request, timeout=10) as r:
                return json.loads(r.read())
        return proc, send

    def cam0(send):
        return next((c for c in send("GET", "/api/rig")["cameras"] if c["camera"] == "cam0"), None)

    def stop(proc):
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()

    first, send = console()
    try:
        shown = wait_for(lambda: cam0(send), 20, "cam0 in the first console")
        assert shown["take_controls"] == {"exposure_us": 8000}, shown
        send("PUT", "/api/cameras/node-a/cam0/controls", {"exposure_us": 12000})
        assert cam0(send)["take_controls"] == {"exposure_us": 12000}
        wait_for(lambda: cam0(send)["controls"].get("exposure_us") == 12000, 20, "cam0 at 12000 in the first console")
    finally:
        stop(first)

    second, send = console()
    try:
        # The camera is still at 12000 (the node kept it); this console's next take puts the file's 8000 back.
        shown = wait_for(lambda: (lambda c: c if c and c["controls"].get("exposure_us") == 12000 else None)(cam0(send)),
                         20, "cam0 at 12000 in the second console")
        assert shown["take_controls"] == {"exposure_us": 8000}, shown
        send("POST", "/api/takes", {"name": "after-restart", "seconds": 1})
        done = wait_for(lambda: (lambda t: t if t and t["state"] in ("done", "partial", "failed") else None)(
            send("GET", "/api/takes")["current"]), 90, "the take's end")
        assert done["state"] == "done", done
        manifest = json.loads((tmp_path / "takes" / done["take_id"] / "manifest.json").read_text())
        assert next(c for c in manifest["cameras"] if c["camera"] == "cam0")["controls"]["exposure_us"] == 8000, manifest
        # What the page said would happen did: the camera now shows the value the take set.
        wait_for(lambda: cam0(send)["controls"].get("exposure_us") == 8000, 20, "cam0 back at 8000 after the take")
    finally:
        stop(second)
