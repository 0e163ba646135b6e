#!/usr/bin/env python3
"""Benchmark: trigger outputs on a real GPIO chip in the lab (issue 38, CONTRACT §17).

    python3 bench/vmlab_trigger.py [--vms 2] [--seconds 6] [--takes 1] [--fps 10,30] [--debs DIR]
                                   [--out bench/results/vmlab-trigger.json]

First the acceptance command, `scripts/vmlab take OUT --vms N --seconds S --trigger --keep` (in each VM the kernel's
gpio-sim, scripts/vmlab_lib/gpiosim.py, a trigger output on its line 0 with vivid's cam0 bound to it): its exit
code and vmlab.json's `trigger` figures (at gpiosim.LAB_FPS). Then, in the same lab, a synthetic camera syn0 beside
cam0 in each VM (the baseline: a sensor coord steers itself, in µs) and one take per --fps rate, --takes rounds.
Per take and VM: the pulse timing error, each rising edge as the kernel's gpio_value tracepoint timed it on the
guest's CLOCK_MONOTONIC (trace_clock mono) minus its group's grid instant mapped to that clock through the take's
clock_track — p50/p99/max of the magnitudes, the signed extremes, pulses against groups — beside what the node
stated for the same pulses (the manifest's trigger block) and syn0's phase error from the sync report. vivid cannot
be triggered (it free-runs): its centres are not measured here. Needs root; runs the lab's QEMUs (TCG) niced and
stops them at the end.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from vmlab_lib import clocktruth, gpiosim, truth  # noqa: E402
from vmlab_lib.lab import Lab, find_debs  # noqa: E402

SYNTHETIC = {"name": "syn0", "synthetic": True}


def with_synthetic(rig: Path) -> None:
    """Each node's cameras in the rig file: cam0 at the take's size (vivid's 320x180), syn0 at one it offers."""
    lines = []
    for line in rig.read_text().splitlines():
        lines.append(line)
        if line.startswith("    public_key:"):
            lines.append("    cameras: [cam0, {name: syn0, size: 320x240}]")
    rig.write_text("\n".join(lines) + "\n")


def figures(lab: Lab, take_dir: Path | None, code: int, chips: dict, truths: dict) -> dict:
    if take_dir is None:
        return {"exit": code, "take": None}
    manifest = json.loads((take_dir / "manifest.json").read_text())
    report = json.loads((take_dir / "sync-report.json").read_text())
    out = {"exit": code, "status": manifest["status"], "groups": manifest["groups"],
           "frame_period_us": manifest["frame_period_us"], "vms": []}
    edges = {vm.name: gpiosim.read_edges(vm, chips[vm.name][1]) for vm in lab.vms}
    entries = [gpiosim.figures(manifest, vm.name, edges[vm.name]) for vm in lab.vms]
    # the same edges through the lab's clock truth, independent of coord: per output and the cross-VM skew
    out["skew_us"] = truth.trigger_truth(entries, edges, manifest, truths)
    out["clock_truth"] = clocktruth.report(truths, manifest)
    for entry in entries:
        node = entry["vm"]
        cam = next((c for c in manifest["cameras"] if c["node"] == node and c["camera"] == "cam0"), {})
        syn = next((c for c in report["cameras"] if c["node"] == node and c["camera"] == "syn0"), {})
        track = [p for p in manifest["clock_track"] if p["node"] == node]
        out["vms"].append(entry | {
            "node_stated": cam.get("trigger"),
            "synthetic_phase_error_us": syn.get("phase_error_us"),
            "clock_bound_us": max((p.get("bound_us", 0) for p in track), default=None)})
    return out


def channels(lab: Lab, count: int = 20) -> dict:
    """The clock truth's channel against the guest agent's (JSON over the other virtio-serial port, a shell per
    request), per VM: round trips in ms, the quickest and the median — why the truth has a port of its own."""
    out = {}
    for vm in lab.vms:
        agent = []
        for _ in range(count):
            start = time.monotonic()
            vm.sh("true")
            agent.append((time.monotonic() - start) * 1000)
        agent.sort()
        b = clocktruth.burst(vm)
        out[vm.name] = {"agent_rtt_ms": {"min": round(agent[0], 2), "p50": round(agent[count // 2], 2)},
                        "clock_port_rtt_ms": {"min": round(b.min_rtt_us / 1000, 3),
                                              "p50": round(b.rtt_p50_us / 1000, 3)}}
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vms", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=6)
    ap.add_argument("--takes", type=int, default=1, help="rounds of takes, one per rate each")
    ap.add_argument("--fps", default="10,30", help="the rates of the further takes, in turn (comma-separated)")
    ap.add_argument("--debs")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/vmlab-trigger.json")
    a = ap.parse_args()
    rates = [int(r) for r in a.fps.split(",")]
    work = Path(tempfile.mkdtemp(prefix="vmlab-trigger-"))
    started = datetime.datetime.now(datetime.timezone.utc)
    load_before = os.getloadavg()
    debs = find_debs(a.debs)
    cmd = [str(ROOT / "scripts/vmlab"), "take", str(work / "first"), "--vms", str(a.vms), "--seconds", str(a.seconds),
           "--trigger", "--keep", "--debs", str(debs["coord-node"].parent)]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=3000)
    vmlab_json = work / "first/vmlab.json"
    acceptance = {"command": " ".join(["scripts/vmlab"] + cmd[1:]), "exit": first.returncode,
                  "stderr_tail": first.stderr.strip().splitlines()[-3:],
                  **{k: json.loads(vmlab_json.read_text()).get(k) if vmlab_json.exists() else None
                     for k in ("trigger", "trigger_skew_us", "clock_truth")}}
    print(json.dumps(acceptance), flush=True)
    if not (work / "first/.vmlab/lab.json").exists():
        print(first.stderr[-3000:], file=sys.stderr)
        return 1
    lab = Lab.load(work / "first/.vmlab")
    acceptance["channels"] = channels(lab)
    print(json.dumps(acceptance["channels"]), flush=True)
    takes = []
    try:
        with ThreadPoolExecutor(max_workers=len(lab.vms)) as pool:
            chips = dict(zip((vm.name for vm in lab.vms),
                             pool.map(lambda vm: gpiosim.use_trigger(vm, (SYNTHETIC,)), lab.vms)))
        for _ in range(a.takes):
            for fps in rates:
                for vm in lab.vms:
                    gpiosim.restart_trace(vm)
                with_synthetic(lab.write_rig(takes_dir=work / "takes", fps=fps, pressure_none=True))
                before = clocktruth.bursts(lab.vms)
                code, take_dir, stderr = lab.start_take(work / "takes", a.seconds)
                truths = clocktruth.truths(before, clocktruth.bursts(lab.vms))
                takes.append({"fps": fps} | figures(lab, take_dir, code, chips, truths)
                             | {"arming_retries": lab.arming_retries})
            print(json.dumps(takes[-1]), flush=True)
    finally:
        lab.down()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    result = {"command": "python3 bench/vmlab_trigger.py " + " ".join(sys.argv[1:]), "commit": commit,
              "started": started.isoformat(timespec="seconds"), "vms": a.vms, "seconds": a.seconds, "fps": rates,
              "accel": "tcg, 1 vCPU per VM, niced, on the shared 2-core machine",
              "edge_clock": "the kernel's gpio_value tracepoint, trace_clock mono (the guest's CLOCK_MONOTONIC)",
              "placed": "error_us through coord's clock_track (the baseline); truth_error_us and skew_us through the "
                        "lab's clock truth (scripts/vmlab_lib/clocktruth.py) onto the host's clock, the rig's",
              "load_average_1_5_15": {"start": load_before, "end": os.getloadavg()},
              "debs": debs["coord-node"].name, "acceptance": acceptance, "takes": takes}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=2) + "\n")
    for t in takes:
        for v in t.get("vms", []):
            print(f"{t['fps']} fps {v['vm']}: pulses {v['pulses']}/{v['groups']}  "
                  f"kernel edge error p50 {v['error_us']['p50']} "
                  f"p99 {v['error_us']['p99']} max {v['error_us']['max']} µs  | through the truth "
                  f"{v['truth_error_us']} ±{v['truth_uncertainty_us']} µs | synthetic phase "
                  f"{v['synthetic_phase_error_us']}")
        print(f"{t['fps']} fps cross-VM edge skew through the truth: {t.get('skew_us')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
