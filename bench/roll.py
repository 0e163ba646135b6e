#!/usr/bin/env python3
"""Rolling from a console that follows the rig (issue 27 item 2): Start → group 0, with its baseline.

    $(scripts/python-env.sh) bench/roll.py [--nodes 8,32,64,128] [--follow 30] [--seconds 4] [--size 320x240] [--fps 10]
                                           [--build-dir .build-release/release] [--out bench/results/roll.json]

For each N, on one set of N coord-node processes (one synthetic camera each, loopback, no keys, no preview — as
bench/scale.py runs them):
  1. baseline: a cold `coord start-take --rig RIG --seconds S`, timed from launching coord to the take's group 0
     (t0_us in the manifest, CLOCK_MONOTONIC), its phases from the lines it prints;
  2. `coord console --rig RIG` (no preview tiles) follows the rig for --follow seconds after every node is reached
     with a known clock; then POST /api/takes, timed from sending the request to group 0, its phases from the
     console's take events (WebSocket) as they arrive.
Both takes are checked by scripts/check-take.py: the true spread (decoded from the stripes) and the claimed one
(sync-report.json) must stay as good when the followed clocks are used. Prints one JSON document and writes --out.
"""
from __future__ import annotations

import argparse
import base64
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("check_take", ROOT / "scripts" / "check-take.py")
check_take = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_take)


def log(msg):
    print(f"roll: {msg}", file=sys.stderr, flush=True)


def monotonic_us() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000


# The phases a take prints, in order, and what each line begins with.
PHASES = [("handshake", "handshake with"), ("aligning", "aligning clocks"), ("configured", "configured"),
          ("aligned", "clocks aligned in"), ("arming", "arming; group 0 in"), ("armed", "armed"),
          ("recording", "recording")]


def phases(lines: list[tuple[int, str]], began_us: int, t0_us: int) -> dict:
    """Each phase's first line, µs after `began_us` as ms; the lead as the take chose it; group 0."""
    out = {}
    for name, prefix in PHASES:
        hit = next(((t, l) for t, l in lines if l.strip().startswith(prefix)), None)
        if hit:
            out[f"{name}_ms"] = round((hit[0] - began_us) / 1000)
            if name == "arming":
                out["lead_ms"] = int(re.search(r"(\d+) ms", hit[1]).group(1))
            if name in ("aligned", "configured", "armed"):
                out[f"{name}_line"] = hit[1].strip()
    out["group0_ms"] = round((t0_us - began_us) / 1000)
    return out


def spread(take: Path) -> dict:
    failures, figures = check_take.check(take)
    manifest = json.loads((take / "manifest.json").read_text())
    return {"status": manifest["status"], "check_take_failures": failures[:5],
            "true_spread_us": figures.get("true_spread_us"), "claimed_spread_us": figures.get("claimed_spread_us"),
            "clock_uncertainty_us_max": max(c["clock"]["uncertainty_us"] for c in manifest["cameras"])}


class Events:
    """The console's WebSocket (RFC 6455; server frames are unmasked): each take event with its arrival time."""

    def __init__(self, base: str, token: str):
        host, port = base.removeprefix("http://").split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=600)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /ws HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Origin: {base}\r\nAuthorization: Bearer {token}\r\n"
                           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self.sock.recv(4096)
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head
        self.lines: list[tuple[int, str]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _need(self, n: int):
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError
            self.buffer += chunk

    def _read(self):
        try:
            while True:
                self._need(2)
                b0, b1 = self.buffer[0], self.buffer[1]
                length, offset = b1 & 0x7F, 2
                if length == 126:
                    self._need(4); length = int.from_bytes(self.buffer[2:4], "big"); offset = 4
                elif length == 127:
                    self._need(10); length = int.from_bytes(self.buffer[2:10], "big"); offset = 10
                self._need(offset + length)
                arrived = monotonic_us()
                payload, self.buffer = self.buffer[offset:offset + length], self.buffer[offset + length:]
                if b0 & 0x0F == 1:
                    m = json.loads(payload)
                    if m.get("type") == "event" and m.get("kind") == "take":
                        self.lines.append((arrived, m["text"]))
        except (EOFError, OSError):
            pass


def api(base: str, token: str, path: str, body: dict | None = None):
    request = urllib.request.Request(base + path, data=None if body is None else json.dumps(body).encode(),
                                     method="GET" if body is None else "POST",
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as r:
        return json.loads(r.read())


def the_take(takes: Path, name: str) -> Path:
    found = [d for d in takes.iterdir() if d.is_dir() and f"-{name}-" in d.name]
    assert len(found) == 1, found
    return found[0]


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def cold(n: int, coord: str, rig: Path, takes: Path, args) -> dict:
    load_at_start = load()
    launched = monotonic_us()
    cp = subprocess.Popen([coord, "start-take", "--rig", str(rig), "--seconds", str(args.seconds), "--name", f"cold{n}"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = [(monotonic_us(), line.rstrip("\n")) for line in cp.stderr]
    cp.wait()
    if cp.returncode != 0:
        return {"exit": cp.returncode, "stderr_tail": [l for _, l in lines[-5:]]}
    take = the_take(takes, f"cold{n}")
    t0 = json.loads((take / "manifest.json").read_text())["t0_us"]
    return {"start_to_group0_s": round((t0 - launched) / 1e6, 2), "load_average_at_start": load_at_start,
            **phases(lines, launched, t0), **spread(take)}


def from_console(n: int, coord: str, rig: Path, takes: Path, args, work: Path) -> dict:
    proc = subprocess.Popen([coord, "console", "--rig", str(rig), "--listen", "127.0.0.1:0", "--preview-width", "0"],
                            stdout=subprocess.PIPE, stderr=open(work / "console.err", "w"), text=True)
    try:
        line = proc.stdout.readline().strip()
        m = re.search(r"^CONSOLE (http://[\d.]+:\d+)/\?token=(\S+)$", line)
        assert m, f"the console printed {line!r}"
        base, token = m.group(1), m.group(2)
        deadline = time.monotonic() + 120
        while True:
            nodes = api(base, token, "/api/rig")["nodes"]
            if len(nodes) == n and all(x["reachable"] and x["clock_uncertainty_us"] is not None for x in nodes):
                break
            assert time.monotonic() < deadline, f"{sum(x['reachable'] for x in nodes)} of {n} nodes reached, clocks not all known"
            time.sleep(0.2)
        log(f"console follows {n} nodes; waiting {args.follow} s")
        time.sleep(args.follow)  # the benchmark's condition itself: a console that has followed the rig this long
        followed = [x["clock_uncertainty_us"] for x in api(base, token, "/api/rig")["nodes"]]
        events = Events(base, token)
        time.sleep(0.5)  # let the WebSocket's replay of older events pass
        events.lines.clear()
        load_at_start = load()
        began = monotonic_us()
        api(base, token, "/api/takes", {"name": f"roll{n}", "seconds": args.seconds})
        deadline = time.monotonic() + 300
        while True:
            current = api(base, token, "/api/takes")["current"]
            if current and current["state"] in ("done", "partial", "failed"):
                break
            assert time.monotonic() < deadline, f"the take did not end: {current}"
            time.sleep(0.2)
        if current["state"] == "failed":
            return {"state": "failed", "message": current["message"]}
        take = the_take(takes, f"roll{n}")
        t0 = json.loads((take / "manifest.json").read_text())["t0_us"]
        return {"start_to_group0_s": round((t0 - began) / 1e6, 2), "load_average_at_start": load_at_start,
                "followed_uncertainty_us_at_start": {"max": max(followed), "p50": sorted(followed)[len(followed) // 2]},
                **phases(events.lines, began, t0), **spread(take)}
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def run_n(n: int, args, work: Path) -> dict:
    node_bin, coord = str(Path(args.build_dir) / "coord-node"), str(Path(args.build_dir) / "coord")
    work.mkdir(parents=True, exist_ok=True)
    nodes = []
    for i in range(1, n + 1):
        argv = [node_bin, "--name", f"n{i}", "--endpoint", "tcp://127.0.0.1:*", "--staging", str(work / f"s{i}"),
                "--synthetic", "cam0", "--parent-pid", str(os.getpid()), "--log-level", "warning",
                "--preview-endpoint", ""]
        if args.calibration:
            argv += ["--calibration", args.calibration]
        nodes.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=open(work / f"n{i}.err", "w"), text=True))
    try:
        endpoints = []
        for i, p in enumerate(nodes, start=1):
            line = p.stdout.readline().strip()
            assert line.startswith("READY "), f"n{i}: {line!r}"
            endpoints.append(line.split()[1])
        takes = work / "takes"
        rig = work / "rig.yaml"
        rig.write_text(f"version: 1\ntake:\n  size: {args.size}\n  fps: {args.fps}\n  codec: mjpeg\n  takes_dir: {takes}\n"
                       "nodes:\n" + "".join(f"  - name: n{i}\n    endpoint: {e}\n" for i, e in enumerate(endpoints, 1)))
        result = {"nodes": n, "cold_start_take": cold(n, coord, rig, takes, args)}
        log(f"cold: {json.dumps(result['cold_start_take'])}")
        result["console_followed"] = from_console(n, coord, rig, takes, args, work)
        log(f"console: {json.dumps(result['console_followed'])}")
        return result
    finally:
        for p in nodes:
            p.terminate()
        for p in nodes:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", default="8,32,64,128")
    ap.add_argument("--follow", type=float, default=30, help="seconds the console follows the rig before Start")
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--size", default="320x240")
    ap.add_argument("--fps", type=int, default=10)
    ap.add_argument("--build-dir", default=str(ROOT / ".build-release/release"))
    ap.add_argument("--calibration", default=os.environ.get("COORD_CALIBRATION"))
    ap.add_argument("--out", default=str(ROOT / "bench/results/roll.json"))
    ap.add_argument("--work", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the work directory (takes, logs)")
    args = ap.parse_args()
    base = Path(args.work or tempfile.mkdtemp(prefix="coord-roll-"))
    load_before = load()
    # The tree the binaries were measured from: read once, before the run (a commit during it must not show).
    tree = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                          text=True).stdout.strip()
    results = []

    def document():
        return {"benchmark": "roll", "command": shlex.join(["$(scripts/python-env.sh)", "bench/roll.py", *sys.argv[1:]]),
                "git_tree_at_run": tree,
                "build": Path(args.build_dir).name, "cores": os.cpu_count(), "load_average_before": load_before,
                "load_average_after": load(), "follow_s": args.follow, "seconds": args.seconds, "size": args.size,
                "fps": args.fps, "results": results}

    for n in [int(x) for x in args.nodes.split(",")]:
        log(f"--- {n} nodes")
        results.append(run_n(n, args, base / f"n{n}"))
        # Each row as it is measured: a later, larger row that fails or runs out of time keeps the earlier ones.
        Path(args.out).write_text(json.dumps(document(), indent=1) + "\n")
    doc = document()
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc, indent=1))
    ok = all(r["cold_start_take"].get("status") == "complete" and r["console_followed"].get("status") == "complete"
             for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
