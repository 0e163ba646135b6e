#!/usr/bin/env python3
"""Benchmark: USB webcams and microphones through their real drivers in the lab (issue 36, CONTRACT §16).

    python3 bench/vmlab_usb.py [--vms 2] [--seconds 10] [--takes 1] [--long S] [--debs DIR] [--out bench/results/vmlab-usb.json]

One lab with a gadget webcam (uvcvideo) and a gadget microphone (snd-usb-audio) in each VM (`Lab.up(camera_kind=
"uvc", mic_kind="uac2")`), then takes alternating uvcvideo's `hwtimestamps` module parameter 0 (Debian's default:
the baseline) and 1, the same lab, the same run. Per camera and take: the node's centre for each new sensor frame
(frames.csv, mapped to the node's clock by the manifest's clock_track) minus the true exposure centre the gadget
painted into its stripe (scripts/vmlab_lib/truth.py) — p50, p99, min, max — beside what the sync report states
(phase error, centre uncertainty), and the frames that were new, filled or held. Per microphone: the clicks'
offsets from the guest's whole seconds (scripts/check-audio.py --node-clock) and the node's own A/V offset and rate
error. Needs root; runs the lab's QEMUs niced and stops them at the end.

Issue 36 item 3: each camera's `device.timestamp` (the stamp the node chose), the report's claimed bound for its
frames (±2σ, σ from its clock and centre uncertainties, as sync-report.json's spread bound) and how many frames'
truth lies inside it; and, as the baseline in the same take, the node's behaviour before it chose a stamp (every
uvcvideo stamp taken as the start of exposure, the centre uncertainty the phase loop's alone): its centres and
bound recomputed from the same frames. `--long S` adds one S-second take (hwtimestamps 1) for the free-running
camera's true phase against the grid: where the start alignment put its first frames and how it drifts.
"""
from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from vmlab_lib import clocktruth, truth, usb  # noqa: E402
from vmlab_lib.lab import Lab, find_debs  # noqa: E402


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return round(s[min(len(s) - 1, int(round(p * (len(s) - 1))))] / 1000, 2)


def bound_figures(cam: dict, stated: dict, errors: list[float], period_us: float) -> dict:
    """The report's ±2σ bound against the truth, now and as the node computed it before it chose a stamp."""
    stamp = (cam.get("device") or {}).get("timestamp") or {}
    clock, centre = stated.get("clock_uncertainty_us") or 0, stated.get("center_uncertainty_us") or 0
    bound = 2 * (clock ** 2 + centre ** 2) ** 0.5
    out = {"timestamp": stamp, "bound_us": round(bound, 1),
           "inside": sum(abs(e) <= bound for e in errors), "of": len(errors)}
    # Before: every uvcvideo stamp meant the start of exposure (centre + exposure/2, not − exposure/2) and the
    # uncertainty was the phase loop's alone.
    shift = 0.0
    if stamp.get("marks") == "endOfExposure":
        shift = (cam.get("controls") or {}).get("exposure_us") or period_us / 2
    loop = max(0.0, centre ** 2 - (stamp.get("uncertainty_us") or 0) ** 2) ** 0.5
    old_bound = 2 * (clock ** 2 + loop ** 2) ** 0.5
    old = [e + shift for e in errors]
    out["before"] = {"node_minus_true_ms": {"p50": pct(old, 0.5), "p99": pct(old, 0.99), "min": pct(old, 0),
                                            "max": pct(old, 1)} if old else None,
                     "bound_us": round(old_bound, 1), "inside": sum(abs(e) <= old_bound for e in old)}
    return out


def true_phase(manifest: dict, take_dir: Path, cam: dict) -> dict:
    """The free-running camera's true phase (its stripe's centre, on the rig clock, minus its group's instant) over
    the take: the first frames (what the start alignment achieved) and the drift."""
    errors, found = truth.centre_errors(manifest, take_dir, cam["node"], cam["camera"])
    rows = (take_dir / cam["node"] / f"{cam['camera']}.frames.csv").read_text().splitlines()[1:]
    t0, period = manifest["t0_us"], manifest["frame_period_us"]
    points, last, k = [], None, 0
    for row, s in zip(rows, found):
        if s is None or s[0] == last:
            continue
        last = s[0]
        _, group, centre, _ = row.split(",")
        points.append((int(group), int(centre) - errors[k] - (t0 + int(group) * period)))
        k += 1
    if len(points) < 2:
        return {"frames": len(points)}
    # A frame's group is the node's choice from its (late) centre: the phase is to the nearest grid instant, and
    # followed continuously through the take (never jumping by a period).
    unwrapped, prev = [], None
    for g, x in points:
        x = (x + period / 2) % period - period / 2 if prev is None else x + round((prev - x) / period) * period
        unwrapped.append((g, x))
        prev = x
    points = unwrapped
    first, end = points[:10], points[-10:]
    slope = (end[-1][1] - first[0][1]) / ((end[-1][0] - first[0][0]) * period / 1e6)
    return {"frames": len(points), "first_10_us": [round(p) for _, p in first], "last_10_us": [round(p) for _, p in end],
            "drift_us_per_s": round(slope, 2), "span_s": round((end[-1][0] - first[0][0]) * period / 1e6, 1)}


def figures(take_dir: Path, code: int, lab: Lab, truths: dict) -> dict:
    manifest = json.loads((take_dir / "manifest.json").read_text())
    report = json.loads((take_dir / "sync-report.json").read_text())
    out: dict = {"exit": code, "status": manifest["status"], "groups": manifest["groups"], "cameras": [], "mics": []}
    for cam in manifest["cameras"]:
        errors, found = truth.centre_errors(manifest, take_dir, cam["node"], cam["camera"])
        stated = next((c for c in report["cameras"] if c["node"] == cam["node"] and c["camera"] == cam["camera"]),
                      {})
        out["cameras"].append({
            "node": cam["node"], "device": cam.get("device"), "new_frames": len(errors),
            "unreadable": sum(s is None for s in found),
            "node_minus_true_ms": {"p50": pct(errors, 0.5), "p99": pct(errors, 0.99), "min": pct(errors, 0),
                                   "max": pct(errors, 1)} if errors else None,
            "stated": {k: stated.get(k) for k in ("phase_error_us", "center_uncertainty_us", "clock_uncertainty_us",
                                                  "dropped", "held")}}
                           | bound_figures(cam, stated, errors, manifest["frame_period_us"]))
    check = subprocess.run([sys.executable, str(ROOT / "scripts/check-audio.py"), str(take_dir), "--node-clock",
                            "--json", "--max-offset-us", "5000"], capture_output=True, text=True, timeout=300)
    try:
        mics = json.loads(check.stdout)["mics"]
    except (ValueError, KeyError):
        mics = [{"error": (check.stderr or check.stdout).strip()[-400:]}]
    for m in mics:
        a = next((x for x in manifest["audio"] if x["node"] == m.get("node")), {})
        out["mics"].append(m | {"device": a.get("device")})
    out["gadgets"] = {vm.name: usb.gadget_reports(vm) for vm in lab.vms}
    # Cross-VM through the lab's clock truth (clocktruth.py): true phase and spread beside the report's, per camera
    # the node's centre minus the true centre on the host's clock (node_minus_true_ms above is on the node's clock
    # through coord's own clock_track: the baseline)
    out["clock_truth"] = clocktruth.report(truths, manifest)
    out["uvc_truth"] = truth.uvc_truth(manifest, take_dir, truths)
    return out


def timed_take(lab: Lab, takes: Path, seconds: float) -> tuple[int, Path | None, str, dict]:
    """A take with a clock-truth burst before and after it."""
    before = clocktruth.bursts(lab.vms)
    code, take_dir, stderr = lab.start_take(takes, seconds)
    return code, take_dir, stderr, clocktruth.truths(before, clocktruth.bursts(lab.vms))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vms", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--takes", type=int, default=1, help="takes per hwtimestamps value")
    ap.add_argument("--long", type=float, default=0, help="seconds of one more take (hwtimestamps 1) for the drift")
    ap.add_argument("--debs")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/vmlab-usb.json")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vmlab-usb-"))
    started = datetime.datetime.now(datetime.timezone.utc)
    lab = Lab.up(work / "lab", a.vms, find_debs(a.debs), camera_kind="uvc", mic_kind="uac2")
    runs = []
    try:
        for k in range(a.takes):
            for hw in (0, 1):
                for vm in lab.vms:  # read by uvcvideo at every frame: no reload, the same devices
                    vm.sh(f"echo {hw} > /sys/module/uvcvideo/parameters/hwtimestamps")
                lab.write_rig(takes_dir=work / "takes")
                code, take_dir, stderr, truths = timed_take(lab, work / "takes", a.seconds)
                if take_dir is None:
                    runs.append({"hwtimestamps": hw, "exit": code, "error": stderr.strip()[-600:]})
                    continue
                run = {"hwtimestamps": hw, "take": k} | figures(take_dir, code, lab, truths)
                runs.append(run)
                print(json.dumps({"hwtimestamps": hw, "cameras": [(c["node"], c["node_minus_true_ms"], c["bound_us"],
                                                                   c["inside"], c["of"], c["before"])
                                                                  for c in run["cameras"]],
                                  "clicks": [(m.get("node"), m.get("clicks"), m.get("offset_us"))
                                             for m in run["mics"]], "uvc_truth": run["uvc_truth"]}), flush=True)
        if a.long > 0:
            lab.write_rig(takes_dir=work / "takes")
            code, take_dir, stderr, truths = timed_take(lab, work / "takes", a.long)
            if take_dir is None:
                runs.append({"long": a.long, "exit": code, "error": stderr.strip()[-600:]})
            else:
                manifest = json.loads((take_dir / "manifest.json").read_text())
                run = {"long": a.long, "hwtimestamps": 1} | figures(take_dir, code, lab, truths)
                run["true_phase"] = {c["node"]: true_phase(manifest, take_dir, c) for c in manifest["cameras"]}
                runs.append(run)
                print(json.dumps({"long": a.long, "true_phase": run["true_phase"]}), flush=True)
        load = Path("/proc/loadavg").read_text().split()[:3]
    finally:
        lab.down()
    result = {"command": " ".join(["python3", "bench/vmlab_usb.py"] + sys.argv[1:]), "started": started.isoformat(),
              "load": load, "vms": a.vms, "seconds": a.seconds,
              "baseline": "hwtimestamps 0 (Debian's default) against 1, alternating in one lab; per camera `before`: "
                          "the node's old reading of the same frames (uvcvideo's stamp as start of exposure, the "
                          "phase loop's uncertainty alone)", "runs": runs}
    a.out.write_text(json.dumps(result, indent=1) + "\n")
    print(a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
