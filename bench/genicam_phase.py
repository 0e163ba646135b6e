#!/usr/bin/env python3
"""Benchmark: the phase error a GenICam camera reaches, against a synthetic camera in the same takes (issue 28).

    .venv/bin/python bench/genicam_phase.py [--build-dir .build/debug] [--takes 3] [--seconds 10]
        [--fps 30] [--size 640x480] [--out bench/results/genicam-phase.json]

Each take runs one coord-node with `--genicam cam0=Aravis-Fake-GV01` (Aravis' fake GigE Vision camera on loopback,
started here) and a synthetic camera `cam1` as the baseline: the synthetic sensor steers its frames onto the grid,
the GenICam camera free-runs from a start aligned to the grid. The figures are the sync report's own
(`sync-report.json`: phase error = frame centre − grid instant, from the timestamps through the clock line) and
the drops. The fake's frames fall where its timer wakes on this loaded host and its timestamps are that wake-up's
CLOCK_REALTIME, so its phase error is the fake's scheduling, not what a real camera's crystal would give
(docs/genicam.md).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def gvcp_bound() -> bool:
    rows = Path("/proc/net/udp").read_text().splitlines()[1:]
    return any(r.split()[1].upper() == "0100007F:0F74" for r in rows if len(r.split()) > 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default=str(ROOT / ".build/debug"))
    ap.add_argument("--takes", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--fps", type=int, default=30)
    ap.add_argument("--size", default="640x480")
    ap.add_argument("--out", default=str(ROOT / "bench/results/genicam-phase.json"))
    args = ap.parse_args()
    fake = shutil.which("arv-fake-gv-camera-0.8")
    if not fake:
        print("arv-fake-gv-camera-0.8 is missing (scripts/setup.sh installs aravis-tools)", file=sys.stderr)
        return 2
    build = Path(args.build_dir)
    doc = {"benchmark": "genicam-phase", "command": shlex.join([".venv/bin/python", "bench/genicam_phase.py", *sys.argv[1:]]),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "git_commit": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(),
           "build": str(build), "fps": args.fps, "size": args.size, "seconds": args.seconds, "takes": []}
    with tempfile.TemporaryDirectory(prefix="coord-bench-genicam-") as work:
        for i in range(args.takes):
            cam = subprocess.Popen([fake, "-i", "127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            node = None
            try:
                deadline = time.monotonic() + 10
                while not gvcp_bound():
                    if time.monotonic() > deadline or cam.poll() is not None:
                        raise SystemExit("the fake camera did not start")
                    time.sleep(0.05)
                staging = Path(work) / f"staging-{i}"
                node = subprocess.Popen([str(build / "coord-node"), "--name", "n1", "--endpoint", "tcp://127.0.0.1:*",
                                         "--staging", str(staging), "--synthetic", "cam1", "--genicam", "cam0=Aravis-Fake-GV01",
                                         # Discovery on loopback only: nothing is broadcast on the host's networks.
                                         "--genicam-interface", "lo", "--parent-pid", str(os.getpid()), "--log-level", "warning"],
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                ready = node.stdout.readline().split()
                if len(ready) != 2 or ready[0] != "READY":
                    raise SystemExit(f"coord-node did not start: {ready}")
                rig = Path(work) / f"rig-{i}.yaml"
                rig.write_text(f"version: 1\nnodes:\n  - name: n1\n    endpoint: {ready[1]}\n"
                               f"take:\n  size: {args.size}\n  fps: {args.fps}\n  codec: ffv1\n")
                takes = Path(work) / f"takes-{i}"
                done = subprocess.run([str(build / "coord"), "start-take", "--rig", str(rig), "--seconds", str(args.seconds),
                                       "--takes-dir", str(takes)], capture_output=True, text=True, timeout=300)
                take = next(takes.iterdir())
                report = json.loads((take / "sync-report.json").read_text())
                manifest = json.loads((take / "manifest.json").read_text())
                row = {"exit": done.returncode, "groups": manifest["groups"], "cameras": {}}
                for c in report["cameras"]:
                    m = next(x for x in manifest["cameras"] if x["camera"] == c["camera"])
                    row["cameras"][c["camera"]] = {"phase_error_us": c.get("phase_error_us"), "dropped": m.get("dropped")}
                doc["takes"].append(row)
                print(json.dumps(row))
            finally:
                for p in (node, cam):
                    if p is not None and p.poll() is None:
                        p.terminate()
                        try:
                            p.wait(timeout=10)
                        except subprocess.TimeoutExpired:
                            p.kill()
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({"out": args.out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
