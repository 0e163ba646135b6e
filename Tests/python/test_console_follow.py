"""The console follows the rig as it changes (issue 27): a node that restarts as a new process on another preview
port is shaken hands with again and its tiles come back; `/api/multiview` never serves an old set as current; nodes
go back to idle once their take is collected; the rig's camera counters keep every take."""
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

from test_console import ConsoleDemo, check_set
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
