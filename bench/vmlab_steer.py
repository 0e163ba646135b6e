#!/usr/bin/env python3
"""Benchmark: steering a vivid camera onto the rig's grid (issue 26 item 2, CONTRACT §11) — the phase error of one
vivid camera (320x180 at 30 fps, mjpeg) in a QEMU TCG VM, recorded by the host's coord, with the node's re-phasing
switched off (the baseline: the same node binary with COORD_NODE_REPHASE=off, measuring only, as every V4L2 camera
ran before) and on, alternating take by take in the same lab.

    scripts/vmlab up RUNDIR --vms 1                       # or let this script start it
    python3 bench/vmlab_steer.py RUNDIR [--node-bin .build/debug/coord-node] [--takes 3] [--seconds 10]
                                 [--out bench/results/vmlab-steer.json]

--node-bin runs that coord-node in the VM instead of the packaged one (a debug build: its Swift runtime libraries
go along, found with ldd), through a systemd drop-in; without it the packaged node runs (it must be new enough to
know COORD_NODE_REPHASE). Figures per take: exit, status, the camera's phase_error_us {p50, p99, max} from
sync-report.json, the node's arm warning for the camera, and how many times the node re-phased it (its journal).
Also step 1's probe: what vivid does with VIDIOC_S_PARM while streaming (bench/vmlab_steer_probe.py in the guest).
Needs root.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from vmlab_lib.lab import Lab  # noqa: E402

DROPIN = "/etc/systemd/system/coord-node.service.d/steer.conf"
GUEST_DIR = "/usr/local/lib/coord-steer"


def stage_node(lab: Lab, node_bin: Path) -> None:
    """Copies node_bin and the Swift runtime libraries it links from the toolchain into the lab's share."""
    dest = lab.dir / "share/steer"
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    shutil.copy2(node_bin, dest / "coord-node")
    ldd = subprocess.run(["ldd", str(node_bin)], capture_output=True, text=True, check=True).stdout
    for path in re.findall(r"=> (\S+/lib/swift/linux/\S+\.so\S*)", ldd):
        shutil.copy2(path, dest / Path(path).name)


def run_node(lab: Lab, vm_name: str, rephase: str, staged: bool, copy: bool) -> None:
    """(Re)starts coord-node in the VM with COORD_NODE_REPHASE=rephase (and the staged binary, copied in first)."""
    vm = lab.vm(vm_name)
    lines = ["[Service]", f"Environment=COORD_NODE_REPHASE={rephase}"]
    if staged:
        lines += [f"Environment=LD_LIBRARY_PATH={GUEST_DIR}", "ExecStart=",
                  f"ExecStart={GUEST_DIR}/coord-node --config /etc/coord-node/node.yaml"]
    if staged and copy:
        vm.sh(f"mkdir -p {GUEST_DIR} && cp /mnt/host/steer/* {GUEST_DIR}/ && chmod 755 {GUEST_DIR}/coord-node",
              timeout=600)
    body = "\\n".join(lines)
    vm.sh(f"mkdir -p {Path(DROPIN).parent} && printf '{body}\\n' > {DROPIN} && systemctl daemon-reload"
          " && systemctl restart coord-node", timeout=300)


def rephases(lab: Lab, vm_name: str) -> int:
    out = lab.vm(vm_name).sh("journalctl -u coord-node -o cat _PID=$(systemctl show -p MainPID --value coord-node)"
                             " | grep -c 'camera re-phased' || true", timeout=120)
    return int(out.strip() or 0)


def one_take(lab: Lab, takes: Path, seconds: float, vm_name: str) -> dict:
    code, take_dir, stderr = lab.start_take(takes, seconds)
    figures: dict = {"exit": code, "warning": next((ln.strip() for ln in stderr.splitlines()
                                                    if "re-phases it" in ln or "cannot steer" in ln), None)}
    if take_dir is not None:
        manifest = json.loads((take_dir / "manifest.json").read_text())
        report = json.loads((take_dir / "sync-report.json").read_text())
        camera = report["cameras"][0]
        figures.update(status=manifest["status"], groups=manifest["groups"], filled=camera["dropped"],
                       phase_error_us=camera["phase_error_us"])
    figures["rephases"] = rephases(lab, vm_name)
    return figures


def summary(runs: list[dict]) -> dict:
    good = [r for r in runs if "phase_error_us" in r]
    if not good:
        return {"takes": 0}
    return {"takes": len(good),
            "p50_us_median": statistics.median(r["phase_error_us"]["p50"] for r in good),
            "p99_us_median": statistics.median(r["phase_error_us"]["p99"] for r in good),
            "p99_us_worst": max(r["phase_error_us"]["p99"] for r in good),
            "max_us_worst": max(r["phase_error_us"]["max"] for r in good)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("rundir", type=Path)
    p.add_argument("--node-bin", type=Path)
    p.add_argument("--takes", type=int, default=3)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--probe", action="store_true", help="also run step 1's S_PARM probe in the guest first")
    p.add_argument("--out", type=Path, default=ROOT / "bench/results/vmlab-steer.json")
    args = p.parse_args()
    if not (args.rundir / "lab.json").exists():
        subprocess.run([str(ROOT / "scripts/vmlab"), "up", str(args.rundir), "--vms", "1"], check=True)
    lab = Lab.load(args.rundir)
    vm_name = lab.vms[0].name
    load_before = os.getloadavg()
    if args.node_bin:
        stage_node(lab, args.node_bin)
    shutil.copy2(ROOT / "bench/vmlab_steer_probe.py", lab.dir / "share/vmlab_steer_probe.py")
    # Step 1: vivid's answer to S_PARM while streaming, straight from the driver (node stopped: it holds no device
    # between takes, but nothing else should stream).
    plan = {"frames": 240, "calls": {"60": [1, 25], "61": [1, 30], "120": [1, 30], "180": [1001, 30000],
                                     "200": [1, 60], "201": [1, 30]}}
    probe = {"frames": [], "calls": []}
    if args.probe:
        probe_raw = lab.vm(vm_name).sh(f"python3 /mnt/host/vmlab_steer_probe.py '{json.dumps(plan)}'", timeout=600)
        probe = json.loads(probe_raw.strip().splitlines()[-1])
    takes = args.rundir / "steer-takes"
    runs: dict[str, list[dict]] = {"off": [], "on": []}
    for i in range(args.takes):
        for mode in ("off", "on"):
            run_node(lab, vm_name, mode, staged=args.node_bin is not None, copy=(i == 0 and mode == "off"))
            figures = one_take(lab, takes, args.seconds, vm_name)
            figures["take"] = i
            runs[mode].append(figures)
            print(f"take {i} rephase={mode}: {json.dumps(figures)}", file=sys.stderr)
    result = {
        "benchmark": "vmlab_steer",
        "command": "python3 bench/vmlab_steer.py " + " ".join(sys.argv[1:]),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "camera": "vivid 320x180 @ 30 fps, mjpeg, one per VM (QEMU TCG)",
        "node": str(args.node_bin) if args.node_bin else "packaged",
        "probe": {"calls": probe["calls"], "phase_windows_ms": probe_windows(probe)},
        "unsteered": {"summary": summary(runs["off"]), "takes": runs["off"]},
        "steered": {"summary": summary(runs["on"]), "takes": runs["on"]},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({"unsteered": result["unsteered"]["summary"], "steered": result["steered"]["summary"]}, indent=2))
    return 0


def probe_windows(probe: dict) -> list[dict]:
    """Median phase (ms, against the first frame's 1/30 s grid by sequence) between the probe's calls."""
    frames = probe["frames"]
    if not frames:
        return []
    period, t0 = 1e6 / 30, frames[0][1]
    phase = [(ts - t0 - seq * period) / 1000 for seq, ts in frames]
    cuts = [0] + [c["after_frame"] + 3 for c in probe["calls"]] + [len(frames)]
    out = []
    for a, b in zip(cuts, cuts[1:]):
        w = phase[a:b]
        if len(w) >= 5:
            out.append({"frames": [a, b], "median_ms": round(statistics.median(w), 2),
                        "min_ms": round(min(w), 2), "max_ms": round(max(w), 2)})
    return out


if __name__ == "__main__":
    sys.exit(main())
