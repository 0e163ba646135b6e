#!/usr/bin/env python3
"""What a signal to the console costs the take it records (issue 34): `coord demo --console` (N coord-node processes,
the console's preview on, a viewer on its WebSocket, as an operator runs it) records an open-ended take started from
the API; after S seconds of recording the console gets SIGTERM. The baseline, in alternating rounds of the same run,
is `coord demo` (no console) interrupted with SIGINT after the same S seconds: start-take's Ctrl-C path.

    .venv/bin/python bench/console_stop.py [--build-dir .build/debug] [--nodes 8] [--rounds 3] [--seconds 3] \\
        [--out bench/results/console-stop.json]

Per round and path: whether the take is complete, the seconds it recorded against the seconds recorded when the
signal came (what the stop's lead adds), and the seconds from the signal to the process's exit (stop, collect,
manifest and report). Prints one JSON document and writes it to --out.
"""
from __future__ import annotations

import argparse
import json
import re
import signal
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONSOLE_RE = re.compile(r"^CONSOLE (https?://[^/\s]+)/\?token=([A-Za-z0-9._~-]+)$")


def recorded(takes: Path) -> dict:
    dirs = [d for d in takes.iterdir() if d.is_dir()]
    if len(dirs) != 1:
        return {"complete": False, "recorded_s": None}
    m = json.loads((dirs[0] / "manifest.json").read_text())
    return {"complete": m["status"] == "complete", "recorded_s": m["groups"] * m["frame_period_us"] / 1e6}


def console_round(build: Path, nodes: int, seconds: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="console-stop-") as work:
        takes = Path(work) / "takes"
        proc = subprocess.Popen([str(build / "coord"), "demo", "--console", "--listen", "127.0.0.1:0", "--nodes", str(nodes),
                                 "--takes-dir", str(takes), "--size", "320x240", "--fps", "25"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        base, token = CONSOLE_RE.match(proc.stdout.readline().strip()).groups()
        auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

        def api(path, body=None):
            request = urllib.request.Request(base + path, headers=auth, data=None if body is None else json.dumps(body).encode(),
                                             method="GET" if body is None else "POST")
            with urllib.request.urlopen(request, timeout=30) as r:
                return json.loads(r.read())

        # A viewer on the WebSocket the whole time, as the page is.
        import websocket  # websocket-client, in the test environment
        ws = websocket.create_connection(base.replace("http", "ws") + "/ws", header=[f"Authorization: Bearer {token}"],
                                         origin=base, timeout=30)
        def read():
            try:
                while True:
                    ws.recv()
            except Exception:  # the console closed it as it stopped
                pass
        threading.Thread(target=read, daemon=True).start()
        api("/api/takes", {"name": "bench"})
        while True:
            current = api("/api/takes")["current"]
            if current and current["state"] == "recording" and current["elapsed_s"] >= seconds:
                break
            time.sleep(0.05)
        at_signal = current["elapsed_s"]
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=300)
        exit_s = time.monotonic() - began
        return {"exit": code, "at_signal_s": at_signal, "signal_to_exit_s": round(exit_s, 3), **recorded(takes)}


def baseline_round(build: Path, nodes: int, seconds: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="console-stop-") as work:
        takes = Path(work) / "takes"
        proc = subprocess.Popen([str(build / "coord"), "demo", "--nodes", str(nodes), "--seconds", "600",
                                 "--takes-dir", str(takes), "--size", "320x240", "--fps", "25"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # The demo's progress line counts the seconds recorded ("recording 3.0 of 600.0 s").
        for line in iter(proc.stderr.readline, ""):
            m = re.search(r"recording (\d+\.\d) ", line)
            if m and float(m.group(1)) >= seconds:
                at_signal = float(m.group(1))
                break
        # Its stderr is drained to the end (a closed pipe would kill it with SIGPIPE as it reports the collection).
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        began = time.monotonic()
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=300)
        exit_s = time.monotonic() - began
        return {"exit": code, "at_signal_s": at_signal, "signal_to_exit_s": round(exit_s, 3), **recorded(takes)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build-dir", default=str(ROOT / ".build/debug"))
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--out", default=str(ROOT / "bench/results/console-stop.json"))
    args = parser.parse_args()
    build = Path(args.build_dir)
    rounds = []
    for i in range(args.rounds):
        for path, run in (("console-sigterm", console_round), ("start-take-sigint", baseline_round)):
            r = {"round": i, "path": path, **run(build, args.nodes, args.seconds)}
            print(json.dumps(r), flush=True)
            rounds.append(r)
    summary = {}
    for path in ("console-sigterm", "start-take-sigint"):
        mine = [r for r in rounds if r["path"] == path]
        summary[path] = {
            "complete": f"{sum(r['complete'] for r in mine)} of {len(mine)}",
            "signal_to_exit_s_median": statistics.median(r["signal_to_exit_s"] for r in mine),
            "recorded_after_signal_s_median": statistics.median(r["recorded_s"] - r["at_signal_s"] for r in mine if r["recorded_s"]),
        }
    doc = {"command": f"bench/console_stop.py --nodes {args.nodes} --rounds {args.rounds} --seconds {args.seconds}",
           "nodes": args.nodes, "seconds": args.seconds, "summary": summary, "rounds": rounds}
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
