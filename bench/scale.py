#!/usr/bin/env python3
"""Scale (issue 15): one coordinator driving N real coord-node processes on this machine.

    .venv/bin/python bench/scale.py [--nodes 8,32,64,128] [--seconds 8] [--size 320x240] [--fps 10]
                                    [--build-dir .build-release/release] [--out bench/results/scale.json]

For each N: starts N coord-node processes (one synthetic camera each, loopback, no keys), waits until each said
READY, then times `coord start-take --rig RIG --seconds S` over them:
  - command to group 0: from launching coord to the take's group 0 (t0_us in the manifest, CLOCK_MONOTONIC);
  - coordinator CPU (user+system, from /proc) while recording, from group 0 to coord's first "collecting" line,
    as cores (CPU seconds / wall seconds), and its peak RSS;
  - clock probes a second (coord's own count after the take);
  - spread p50/p99: claimed (sync-report.json) and true (decoded from the stripes by scripts/check-take.py);
  - collection: the take's bytes over the time from the first "collecting" line to coord's exit;
  - the take's status and check-take's verdict.
Prints one JSON document and writes it to --out.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("check_take", ROOT / "scripts" / "check-take.py")
check_take = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_take)


def log(msg):
    print(f"scale: {msg}", file=sys.stderr, flush=True)


def monotonic_us() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000


def proc_cpu(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (FileNotFoundError, ProcessLookupError):
        return None


def proc_rss_kb(pid: int) -> int | None:
    try:
        return next(int(l.split()[1]) for l in Path(f"/proc/{pid}/status").read_text().splitlines() if l.startswith("VmRSS:"))
    except (FileNotFoundError, ProcessLookupError, StopIteration):
        return None


def run_n(n: int, args, work: Path) -> dict:
    node_bin, coord = str(Path(args.build_dir) / "coord-node"), str(Path(args.build_dir) / "coord")
    work.mkdir(parents=True, exist_ok=True)
    nodes = []
    started = time.monotonic()
    for i in range(1, n + 1):
        argv = [node_bin, "--name", f"n{i}", "--endpoint", "tcp://127.0.0.1:*", "--staging", str(work / f"s{i}"),
                "--synthetic", "cam0", "--parent-pid", str(os.getpid()), "--log-level", "warning",
                "--preview-endpoint", ""]
        if args.calibration:
            argv += ["--calibration", args.calibration]
        nodes.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=open(work / f"n{i}.err", "w"), text=True))
    endpoints = []
    for i, p in enumerate(nodes, start=1):
        line = p.stdout.readline().strip()
        assert line.startswith("READY "), f"n{i}: {line!r}"
        endpoints.append(line.split()[1])
    log(f"{n} nodes ready in {time.monotonic() - started:.1f} s")
    rig = work / "rig.yaml"
    rig.write_text("version: 1\nnodes:\n" + "".join(f"  - name: n{i}\n    endpoint: {e}\n" for i, e in enumerate(endpoints, 1)))
    takes = work / "takes"
    argv = [coord, "start-take", "--rig", str(rig), "--seconds", str(args.seconds), "--size", args.size,
            "--fps", str(args.fps), "--takes-dir", str(takes), "--name", f"scale{n}"]
    status_argv = [coord, "status", "--rig", str(rig)]
    t_status = time.monotonic()
    st = subprocess.run(status_argv, capture_output=True, text=True, timeout=120)
    status_s = time.monotonic() - t_status
    launched_us = monotonic_us()
    cp = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[tuple[float, str]] = []
    marks: dict[str, tuple[float, float | None]] = {}
    peak_rss = [0]

    def read():
        for line in cp.stderr:
            now = time.monotonic()
            lines.append((now, line.rstrip("\n")))
            if line.startswith("recording") and "recording" not in marks:
                marks["recording"] = (now, proc_cpu(cp.pid))
            if line.startswith("collecting") or "collecting" in line and "collecting" not in marks and "recording" in marks:
                marks.setdefault("collecting", (now, proc_cpu(cp.pid)))

    reader = threading.Thread(target=read)
    reader.start()
    while cp.poll() is None:
        peak_rss[0] = max(peak_rss[0], proc_rss_kb(cp.pid) or 0)
        time.sleep(0.2)
    reader.join()
    ended = time.monotonic()
    (work / "coord.stderr").write_text("\n".join(l for _, l in lines))
    result = {"nodes": n, "exit": cp.returncode, "coord_status_s": round(status_s, 2),
              "coord_status_exit": st.returncode, "coord_peak_rss_mb": round(peak_rss[0] / 1024, 1)}
    take_dirs = [d for d in takes.iterdir() if d.is_dir()] if takes.exists() else []
    if take_dirs:
        take = take_dirs[0]
        manifest = json.loads((take / "manifest.json").read_text())
        result["status"] = manifest["status"]
        result["command_to_group0_s"] = round((manifest["t0_us"] - launched_us) / 1e6, 2)
        failures, figures = check_take.check(take)
        result["check_take_failures"] = failures[:5]
        result["true_spread_us"] = figures.get("true_spread_us")
        result["claimed_spread_us"] = figures.get("claimed_spread_us")
        total = sum(f["bytes"] for c in manifest["cameras"] for f in c["files"])
        result["take_bytes"] = total
        if "collecting" in marks:
            result["collection_mb_s"] = round(total / 1e6 / max(ended - marks["collecting"][0], 1e-3), 1)
    if "recording" in marks and "collecting" in marks and marks["recording"][1] is not None and marks["collecting"][1] is not None:
        wall = marks["collecting"][0] - marks["recording"][0]
        result["coord_cores_while_recording"] = round((marks["collecting"][1] - marks["recording"][1]) / wall, 3)
        result["recording_wall_s"] = round(wall, 1)
    probe = next((l for _, l in lines if l.startswith("clock probes:")), "")
    m = re.search(r"clock probes: (\d+) in ([\d.]+) s, (\d+) a second", probe)
    if m:
        result["probes_per_s"] = int(m.group(3))
        result["probes_per_s_per_node"] = round(int(m.group(3)) / n, 1)
    arming = next((l for _, l in lines if l.startswith("arming; group 0 in")), "")
    result["group0_lead_ms"] = int(re.search(r"(\d+) ms", arming).group(1)) if arming else None
    if cp.returncode != 0:
        result["stderr_tail"] = [l for _, l in lines[-5:]]
    for p in nodes:
        p.terminate()
    for p in nodes:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
    shutil.rmtree(work, ignore_errors=True)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", default="8,32,64,128")
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--size", default="320x240")
    ap.add_argument("--fps", type=int, default=10)
    ap.add_argument("--build-dir", default=str(ROOT / ".build-release/release"))
    ap.add_argument("--calibration", default=os.environ.get("COORD_CALIBRATION"))
    ap.add_argument("--out", default=str(ROOT / "bench/results/scale.json"))
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    base = Path(args.work or tempfile.mkdtemp(prefix="coord-scale-"))
    results = []
    for n in [int(x) for x in args.nodes.split(",")]:
        log(f"--- {n} nodes")
        r = run_n(n, args, base / f"n{n}")
        log(json.dumps(r))
        results.append(r)
    doc = {"benchmark": "scale", "command": shlex.join([".venv/bin/python", "bench/scale.py", *sys.argv[1:]]),
           "git_tree_at_run": subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                                             capture_output=True, text=True).stdout.strip(),
           "seconds": args.seconds, "size": args.size, "fps": args.fps, "results": results}
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc, indent=1))
    return 0 if all(r.get("status") == "complete" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
