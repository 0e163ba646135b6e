#!/usr/bin/env python3
"""Benchmark: coord against real kernels (issue 26, CONTRACT §11) — QEMU TCG VMs running Debian 12's kernel with
systemd, vivid and snd-aloop, each running the packaged coord-node; the host's coord records them.

    scripts/package.sh /var/cache/coord-test/vmlab/debs      # once (or COORD_VMLAB_DEBS=DIR)
    python3 bench/vmlab.py [--vms 2] [--seconds 10] [--clocksource tsc|hpet] [--out bench/results/vmlab.json]

Measures first one VM booted from scratch (the baseline) and the same VM restored from the state the lab saves
(QMP migrate to a file, -incoming): seconds from QEMU's start until the guest agent answers. Then, in one lab:
each VM's boot time (QEMU start until the guest agent, a multi-user unit, answers), the
take (exit, status, filled frames, vivid's phase error and the cross-VM spread from sync-report.json, the clock
figures coord reports per VM, the ALSA microphones' A/V offset and rate error as the node reports them), vivid's
injected drops (70 %) as the node counts them, and the systemd watchdog's restart time after SIGSTOP. Then
--click-takes takes (issue 26 items 3 and 5) with both guests on the hpet clock source (their CLOCK_MONOTONIC counts
the host's) and vm2's kernel clock set --ppm fast with adjtimex, the truth coord's drift is held against, while
vm1's node records SYNCCLICK v1 through ALSA from snd-aloop's Loopback,1 that a guest-side player
(scripts/vmlab_lib/guest/clicks.py) plays into Loopback,0 on whole seconds of vm1's clock: the clicks' offsets from
those seconds (scripts/check-audio.py --node-clock), the node's own figures, and the player's own timing. Needs root.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from vmlab_lib import image  # noqa: E402
from vmlab_lib.lab import MIC_DEVICE, Lab, find_debs  # noqa: E402
from vmlab_lib.vm import VM  # noqa: E402


def boot_versus_restore(work: Path, clocksource: str | None) -> dict:
    """vm1 booted from scratch, its state saved, then vm1 restored from it: the seconds until its agent answers."""
    art = image.build()
    figures: dict = {}
    for how in ("boot", "restore"):
        vm = VM("vm1", work / how, art, clocksource=clocksource)
        vm.start(restore=(how == "restore"))
        try:
            figures[f"{how}_s"] = round(vm.wait_booted(), 1)
            if how == "boot":
                figures["save_s"] = round(vm.save_snapshot(), 1)
                figures["state_mb"] = round((vm.snapshot / "state").stat().st_size / 2**20, 1)
            else:
                figures["restored"] = vm.restored
        finally:
            vm.stop()
            (vm.dir / "disk.qcow2").unlink(missing_ok=True)
    return figures


def take_figures(take_dir: Path, code: int) -> dict:
    manifest = json.loads((take_dir / "manifest.json").read_text())
    report = json.loads((take_dir / "sync-report.json").read_text())
    return {
        "exit": code, "status": manifest["status"], "groups": manifest["groups"],
        "spread_us": report.get("spread_us"),
        "cameras": [{"node": c["node"], "camera": c["camera"], "filled": c["dropped"], "held": c.get("held", 0),
                     "phase_error_us": c.get("phase_error_us")} for c in report["cameras"]],
        "clocks": [{"node": c["node"], **c["clock"]} for c in manifest["cameras"]],
        "audio": [{"node": a["node"], "mic": a["mic"], "av_offset_us": a["av_offset_us"],
                   "rate_error_ppm": a["rate_error_ppm"]} for a in manifest["audio"]],
        "events": sorted({e["kind"] for e in manifest["events"]}),
    }


def click_takes(lab: Lab, work: Path, count: int, seconds: float, ppm: float) -> list[dict]:
    """`count` takes: vm1 records the click train from hw:Loopback,1,0; vm2's clock runs `ppm` fast (hpet, adjtimex)."""
    vm1, vm2 = lab.vms[0], lab.vms[1]
    takes = []
    try:
        sources = {vm.name: lab.clocksource(vm, "hpet") for vm in (vm1, vm2)}
        truth = {vm1.name: lab.set_clock_rate(vm1, 0.0), vm2.name: lab.set_clock_rate(vm2, ppm)}
        lab.use_microphone(vm1, "hw:Loopback,1,0")
        lab.play_clicks(vm1)
        for i in range(count):
            before = lab.clicks_report(vm1)
            lab.write_rig(takes_dir=work / f"clicks{i}")
            code, take_dir, stderr = lab.start_take(work / f"clicks{i}", seconds)
            after = lab.clicks_report(vm1)
            figures: dict = {"clocksource": sources, "truth_ppm": truth, "player_before": before,
                             "player_xruns": after["xruns"], "player_shifts": after["shifts"],
                             "player_moves": after.get("moves", 0)}
            if take_dir is None:
                figures |= {"exit": code, "stderr": stderr[-800:]}
            else:
                manifest = json.loads((take_dir / "manifest.json").read_text())
                figures |= {"exit": code, "status": manifest["status"], "groups": manifest["groups"],
                            "clocks": [{"node": c["node"], "truth_ppm": truth[c["node"]], **c["clock"]}
                                       for c in manifest["cameras"]]}
                check = subprocess.run([sys.executable, str(ROOT / "scripts/check-audio.py"), str(take_dir),
                                        "--node-clock", "--json"], capture_output=True, text=True, timeout=120)
                figures["check_audio_node_clock"] = [
                    {k: r.get(k) for k in ("node", "mic", "clicks", "offset_us", "reported_av_offset_us",
                                           "reported_rate_error_ppm", "problems")}
                    for r in json.loads(check.stdout)["mics"]]
            takes.append(figures)
            print(json.dumps(figures, indent=1), file=sys.stderr)
    finally:
        lab.stop_clicks(vm1)
        lab.set_clock_rate(vm2, 0.0)
        for vm in (vm1, vm2):
            lab.clocksource(vm, "tsc")
        lab.use_microphone(vm1, MIC_DEVICE)
    return takes


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vms", type=int, default=2)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--clocksource", choices=["tsc", "hpet"])
    p.add_argument("--debs")
    p.add_argument("--click-takes", type=int, default=2)
    p.add_argument("--ppm", type=float, default=40.0, help="vm2's kernel clock rate set with adjtimex")
    p.add_argument("--out", type=Path, default=ROOT / "bench/results/vmlab.json")
    a = p.parse_args()
    result: dict = {"command": "python3 bench/vmlab.py " + " ".join(sys.argv[1:]),
                    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                    "host_load_at_start": os.getloadavg()}
    debs = find_debs(a.debs)
    result["debs"] = sorted(d.name for d in debs.values())
    with tempfile.TemporaryDirectory(prefix="vmlab-bench-") as work:
        work = Path(work)
        result["boot_vs_restore"] = boot_versus_restore(work, a.clocksource)
        print(json.dumps(result["boot_vs_restore"]), file=sys.stderr)
        started = time.monotonic()
        lab = Lab.up(work / "lab", a.vms, debs, clocksource=a.clocksource)
        try:
            result["ready_s"] = round(time.monotonic() - started, 1)
            result["boot_s"] = {k: round(v, 1) for k, v in lab.boot_seconds.items()}
            result["vms"] = lab.report()["vms"]
            result["clocksource"] = {vm.name: vm.sh(
                "cat /sys/devices/system/clocksource/clocksource0/current_clocksource").strip() for vm in lab.vms}
            lab.write_rig(takes_dir=work / "takes")
            code, take_dir, stderr = lab.start_take(work / "takes", a.seconds)
            result["take"] = take_figures(take_dir, code) if take_dir else {"exit": code, "stderr": stderr[-800:]}
            print(json.dumps(result["take"], indent=1), file=sys.stderr)
            last = lab.vms[-1]
            last.sh("v4l2-ctl -d /dev/video0 -c percentage_of_dropped_buffers=70")
            lab.write_rig(takes_dir=work / "drops", pressure_none=True)
            code, take_dir, stderr = lab.start_take(work / "drops", 5)
            last.sh("v4l2-ctl -d /dev/video0 -c percentage_of_dropped_buffers=0")
            if take_dir:
                figures = take_figures(take_dir, code)
                result["injected_drops"] = {"injected_percent": 70, "vm": last.name, "groups": figures["groups"],
                                            "cameras": figures["cameras"]}
            else:  # recorded, not dropped: a failed take is a figure too
                result["injected_drops"] = {"injected_percent": 70, "exit": code, "stderr": stderr[-800:]}
            if a.vms >= 2 and a.click_takes > 0:
                result["click_takes"] = click_takes(lab, work, a.click_takes, a.seconds, a.ppm)
            result["watchdog_restart_s"] = round(lab.watchdog_restart(lab.vms[0]), 2)
            result["arming_retries"] = lab.arming_retries
            result["watchdog_usec"] = lab.systemd(lab.vms[0])["WatchdogUSec"]
        finally:
            lab.down()
    result["host_load_at_end"] = os.getloadavg()
    text = json.dumps(result, indent=2) + "\n"
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
