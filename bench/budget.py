#!/usr/bin/env python3
"""Benchmark: is the cost model right, and how fast does the pressure policy act? (issue 4)

    swift build -c release
    .venv/bin/python bench/budget.py [--coord .build/release/coord] [--out bench/results/budget.json]
                                     [--work /tmp/coord-bench-budget] [--only NAME[,NAME]]

Scenarios (one at a time; the machine has 2 cores):
  calibration   `coord-node calibrate --seconds 2` on this machine (release build): the capacities every
                other figure is judged against.
  prediction    for each codec, `coord demo --nodes 2 --cameras-per-node 2 --seconds 10` at the largest of
                1280x720, 640x480, 320x240 the calibration says fits with room (encoding cost ≤ 0.6): the budget the coordinator planned (manifest `budget`) beside what the take
                really used: the disk write rate from the .mkv bytes, and the CPU the coord-node processes
                used while recording (/proc/<pid>/stat, sampled every 0.2 s) as a fraction of all CPUs, beside
                the planned encoding cost (the same fraction, predicted).
  reaction      a 2-node rig through `coord start-take`, one node reading a fake thermal zone
                (--system-root): the zone is raised past its passive trip, then to critical, three takes in
                a row. Measured on the host's CLOCK_MONOTONIC (the rig timebase on one host): from the write
                to the node's `pressure` event, and to the first group recorded slowed / disabled (which the
                coordinator places deliberately a second ahead).

Prints one JSON document (progress on stderr) and writes it to --out.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def percentile(values, p):
    if not values:
        return None
    s = sorted(values)
    return s[max(0, min(len(s) - 1, int(round(p * len(s) + 0.5)) - 1))]


# ---- calibration ----

def calibration(node_bin: Path, work: Path) -> dict:
    path = work / "calibration.json"
    out = subprocess.run([str(node_bin), "calibrate", "--calibration", str(path), "--staging", str(work / "cal-staging"),
                          "--seconds", "2"], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise SystemExit(f"calibrate failed: {out.stdout}{out.stderr}")
    log(out.stdout.strip())
    return json.loads(path.read_text())


# ---- prediction ----

class NodeCPU:
    """Samples the CPU time of every coord-node whose parent pid is `parent`."""

    def __init__(self, parent: int):
        self.parent = parent
        self.samples: list[tuple[float, dict[int, int]]] = []
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def ticks(self) -> dict[int, int]:
        found = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
                if not cmd or not cmd[0].endswith(b"coord-node") or str(self.parent).encode() not in cmd:
                    continue
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                found[int(entry)] = int(fields[11]) + int(fields[12])   # utime + stime
            except (OSError, IndexError, ValueError):
                continue
        return found

    def run(self):
        while not self.stop:
            self.samples.append((time.monotonic(), self.ticks()))
            time.sleep(0.2)

    def cpu_seconds(self, start: float, end: float) -> float:
        """CPU seconds the nodes used between the samples nearest to start and end."""
        a = min(self.samples, key=lambda s: abs(s[0] - start))
        b = min(self.samples, key=lambda s: abs(s[0] - end))
        total = 0
        for pid, t in b[1].items():
            total += t - a[1].get(pid, t)
        return total / CLK_TCK, b[0] - a[0]


def prediction(coord: Path, work: Path, cal_path: Path, codec: str) -> dict:
    takes = work / f"takes-{codec}"
    shutil.rmtree(takes, ignore_errors=True)
    # The largest size whose planned encoding cost leaves room (≤ 0.6): the model is judged where it says a rig fits.
    rate = json.loads(cal_path.read_text())["encode"][codec]["pixels_per_s"]
    size = next((s for s in ["1280x720", "640x480", "320x240"]
                 if 1.5 * 4 * 30 * int(s.split("x")[0]) * int(s.split("x")[1]) / rate <= 0.6), "320x240")
    args = [str(coord), "demo", "--nodes", "2", "--cameras-per-node", "2", "--size", size, "--seconds", "10",
            "--codec", codec, "--takes-dir", str(takes), "--calibration", str(cal_path), "--seed", "7"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    cpu = NodeCPU(proc.pid)
    began = ended = None
    lines = []
    for line in proc.stderr:
        lines.append(line.rstrip())
        if began is None and line.startswith("recording ") and " 0.0 /" not in line:
            began = time.monotonic()
        if began is not None and ended is None and (line.startswith("collecting") or "nodes done 4/4" in line
                                                     or "nodes done 2/2" in line):
            ended = time.monotonic()
    out = proc.stdout.read()
    proc.wait()
    cpu.stop = True
    cpu.thread.join()
    if proc.returncode != 0 or began is None or ended is None:
        raise SystemExit(f"demo ({codec}) failed ({proc.returncode}): {lines[-5:]} {out}")
    take = next(takes.iterdir())
    manifest = json.loads((take / "manifest.json").read_text())
    budget = manifest["budget"]
    node = budget["nodes"][0]
    loads = {re.sub(r" \(.*", "", l["resource"]): l for l in node["loads"]}
    duration_s = manifest["groups"] * manifest["frame_period_us"] / 1e6
    mkv_bytes = sum(f["bytes"] for c in manifest["cameras"] for f in c["files"] if f["path"].endswith(".mkv"))
    cpu_s, window = cpu.cpu_seconds(began, ended)
    cpus = os.cpu_count()
    result = {
        "codec": codec,
        "rig": f"demo 2 nodes x 2 cameras, {size}, 30 fps, 10 s",
        "planned_rig_cost": budget["cost"],
        "planned_encoding_cost": loads["encoding"]["cost"],
        "measured_node_cpu_fraction": round(cpu_s / (window * cpus), 3),
        "cpu_window_s": round(window, 2),
        "planned_disk_bytes_per_s": loads["disk write"]["demand"],
        "measured_disk_bytes_per_s": round(mkv_bytes / duration_s),
        "status": manifest["status"],
        "dropped": sum(c["dropped"] for c in manifest["cameras"]),
    }
    result["encoding_ratio_measured_to_planned"] = round(result["measured_node_cpu_fraction"] / result["planned_encoding_cost"], 2)
    result["disk_ratio_measured_to_planned"] = round(result["measured_disk_bytes_per_s"] / result["planned_disk_bytes_per_s"], 2)
    shutil.rmtree(takes, ignore_errors=True)
    log(json.dumps(result))
    return result


# ---- reaction ----

def reaction(coord: Path, node_bin: Path, work: Path, runs: int = 3) -> dict:
    samples = {"to_pressure_event_ms": [], "to_slowed_group_ms": [], "to_disabled_group_ms": []}
    for run in range(runs):
        d = work / f"reaction-{run}"
        shutil.rmtree(d, ignore_errors=True)
        zone = d / "sysroot" / "sys" / "class" / "thermal" / "thermal_zone0"
        zone.mkdir(parents=True)
        for name, value in [("type", "cpu-thermal"), ("trip_point_0_type", "passive"), ("trip_point_0_temp", "70000"),
                            ("trip_point_1_type", "critical"), ("trip_point_1_temp", "90000"), ("temp", "45000")]:
            (zone / name).write_text(value + "\n")

        def set_temp(mc):
            (zone / "temp.new").write_text(f"{mc}\n")
            (zone / "temp.new").replace(zone / "temp")
            return time.monotonic_ns() // 1000

        nodes, endpoints = [], []
        for name, cams, extra in [("hot", "a,b,c", ["--system-root", str(d / "sysroot")]), ("cool", "a", [])]:
            (d / name).mkdir()
            p = subprocess.Popen([str(node_bin), "--name", name, "--endpoint", "tcp://127.0.0.1:*", "--staging", str(d / name),
                                  "--synthetic", cams, "--parent-pid", str(os.getpid()), *extra],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            nodes.append(p)
            endpoints.append(p.stdout.readline().split()[1])
        rig = d / "rig.yaml"
        rig.write_text("version: 1\nnodes:\n" + "".join(f"  - name: {n}\n    endpoint: {e}\n" for n, e in zip(["hot", "cool"], endpoints)))
        coordp = subprocess.Popen([str(coord), "start-take", "--rig", str(rig), "--seconds", "16", "--takes-dir", str(d / "takes")],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        writes = []
        for line in coordp.stdout:
            if line.startswith("recording ") and " 0.0 /" not in line and not writes:
                time.sleep(2)
                writes.append(set_temp(75000))
            if "records one group in" in line and len(writes) == 1:
                time.sleep(3)
                writes.append(set_temp(82000))
            if "was disabled" in line and len(writes) == 2:
                writes.append(set_temp(60000))
        coordp.wait()
        for p in nodes:
            p.terminate()
            p.wait(timeout=10)
        take = next((d / "takes").iterdir())
        events = json.loads((take / "manifest.json").read_text())["events"]
        pressure = [e for e in events if e["kind"] == "pressure" and e["node"] == "hot"]
        for w, level in zip(writes[:2], ["serious", "critical"]):
            e = next(e for e in pressure if e["detail"].startswith(level))
            samples["to_pressure_event_ms"].append((e["t_us"] - w) / 1000)
        slowed = next(e for e in events if e["kind"] == "camera-slowed")
        disabled = next(e for e in events if e["kind"] == "camera-disabled")
        samples["to_slowed_group_ms"].append((slowed["t_us"] - writes[0]) / 1000)
        samples["to_disabled_group_ms"].append((disabled["t_us"] - writes[1]) / 1000)
        log(f"reaction run {run}: {json.dumps({k: v[-1] for k, v in samples.items()})}")
        shutil.rmtree(d, ignore_errors=True)
    return {k: {"samples": [round(x, 1) for x in v], "p50": round(percentile(v, .5), 1), "max": round(max(v), 1)}
            for k, v in samples.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coord", default=str(ROOT / ".build" / "release" / "coord"))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "budget.json"))
    ap.add_argument("--work", default="/tmp/coord-bench-budget")
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    coord = Path(a.coord)
    node_bin = coord.parent / "coord-node"
    work = Path(a.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    only = set(filter(None, a.only.split(",")))
    doc = {"command": "swift build -c release && .venv/bin/python bench/budget.py " + " ".join(sys.argv[1:]),
           "machine": {"cpus": os.cpu_count(), "kernel": platform.release()},
           "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()}
    cal = calibration(node_bin, work)
    doc["calibration"] = cal
    if not only or "prediction" in only:
        doc["prediction"] = [prediction(coord, work, work / "calibration.json", c) for c in ["mjpeg", "ffv1", "h264"]]
    if not only or "reaction" in only:
        doc["reaction"] = reaction(coord, node_bin, work)
    text = json.dumps(doc, indent=2)
    print(text)
    Path(a.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
