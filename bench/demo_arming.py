#!/usr/bin/env python3
"""Arming at scale in the build the tests use: `coord demo --nodes N` (N coord-node processes on this machine, each
with a synthetic camera and a synthetic microphone), two builds in alternating rounds of one run.

    .venv/bin/python bench/demo_arming.py --build-dir .build/debug --baseline-dir /tmp/bin-before \
        [--nodes 64] [--rounds 5] [--seconds 4] [--out bench/results/demo-arming.json]

Per round and build: whether the take was recorded (exit 0), "clocks aligned in", the lead ("arming; group 0
in"), "armed N node(s) in" (the CI failure of stop 33: 3.41 s against a 2.29 s lead), and the coordinator's CPU
(user+system from /proc, as cores over its whole run). Prints one JSON document and writes it to --out.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICK


def one(build: Path, nodes: int, seconds: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="demo-arming-") as work:
        began = time.monotonic()
        proc = subprocess.Popen([str(build / "coord"), "demo", "--takes-dir", f"{work}/takes", "--nodes", str(nodes),
                                 "--seconds", str(seconds), "--size", "320x240", "--fps", "10"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "COORD_NODE": str(build / "coord-node")})
        cpu = 0.0
        while proc.poll() is None:
            cpu = cpu_seconds(proc.pid) or cpu  # the last reading before it exits
            time.sleep(0.2)
        out, err = proc.communicate()
        wall = time.monotonic() - began

    def figure(pattern: str) -> float | None:
        m = re.search(pattern, err)
        return float(m.group(1)) if m else None
    return {
        "recorded": proc.returncode == 0,
        "aligned_s": figure(r"clocks aligned in ([\d.]+) s"),
        "lead_ms": figure(r"arming; group 0 in (\d+) ms"),
        "armed_s": figure(r"armed \d+ node\(s\) in ([\d.]+) s"),
        "armed_again": "arming every node again" in err,
        "coordinator_cores": round(cpu / wall, 3),
        "failure": err.strip().splitlines()[-1] if proc.returncode else "",
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default=str(ROOT / ".build/debug"))
    ap.add_argument("--baseline-dir", required=True, help="coord and coord-node of the build to compare against")
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--out", default=str(ROOT / "bench/results/demo-arming.json"))
    args = ap.parse_args()
    builds = {"this": Path(args.build_dir), "baseline": Path(args.baseline_dir)}
    load_before = os.getloadavg()
    runs: dict[str, list[dict]] = {k: [] for k in builds}
    for r in range(args.rounds):
        for name, build in builds.items():
            runs[name].append(one(build, args.nodes, args.seconds))
            print(f"round {r + 1} {name}: {runs[name][-1]}", flush=True)

    def summary(rows: list[dict]) -> dict:
        armed = [x["armed_s"] for x in rows if x["armed_s"] is not None]
        return {
            "recorded": f"{sum(x['recorded'] for x in rows)} of {len(rows)}",
            "armed_s_median": statistics.median(armed) if armed else None,
            "armed_s_max": max(armed) if armed else None,
            "lead_ms_median": statistics.median(x["lead_ms"] for x in rows if x["lead_ms"] is not None),
            "aligned_s_median": statistics.median(x["aligned_s"] for x in rows if x["aligned_s"] is not None),
            "coordinator_cores_median": statistics.median(x["coordinator_cores"] for x in rows),
        }
    result = {
        "command": "bench/demo_arming.py " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()),
        "load_before": load_before,
        "load_at_end": os.getloadavg(),
        "nodes": args.nodes,
        "summary": {name: summary(rows) for name, rows in runs.items()},
        "runs": runs,
    }
    text = json.dumps(result, indent=2)
    print(text)
    Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
