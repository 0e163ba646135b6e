#!/usr/bin/env python3
"""Benchmark: a free-running USB webcam's phase drift, and several webcams on one USB bus (issue 36 items 3 and 4).

    python3 bench/vmlab_usb_bus.py [--drift 60] [--fps 15] [--webcams 2] [--debs DIR] [--out bench/results/vmlab-usb-bus.json]

One lab VM with the gadget webcam (uvcvideo, hwtimestamps=1). Drift: one --drift S take at --fps through the
packaged node; the camera's true phase (its stripe's centre on the rig clock minus its group's instant) frame by
frame: where the node's start alignment put the first frames, the least-squares drift over the take against the
drift the gadget's own sensor rate predicts (its measured period), and the phase per 10 s window. Bus: the webcam
gadget restarted with --webcams UVC functions in one gadget (one USB device on dummy_hcd's one-port bus); per
webcam, what sysfs says (every alternate setting from the device's raw descriptors, the one in force while
streaming) and the reservation the node's arithmetic gives (CoordCore UsbIsoStream, the same figures), then all
streaming at once at 640x360 YUYV 30 fps with v4l2-ctl: whether uvcvideo's STREAMON answers ENOSPC, the frame rate
each gets, and the kernel's log. The baseline in the same run: the frames' own bytes per second, which the budget
counted before. Needs root; runs the lab's QEMU niced and stops it at the end.
"""
from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))
from vmlab_lib import truth, usb  # noqa: E402
from vmlab_lib.lab import Lab, find_debs  # noqa: E402
import vmlab_usb  # noqa: E402  (true_phase: the stripes' phase against the grid)

# In the guest: each host-side uvcvideo capture node with its USB device's speed, raw descriptors and the streaming
# interfaces' alternate setting in force and endpoint now.
SYSFS = r"""
import glob, json, os
out = []
for v in sorted(glob.glob("/sys/class/video4linux/video*"), key=lambda p: int(p.rsplit("video", 1)[1])):
    dev = os.path.realpath(v + "/device")
    if "dummy_hcd" not in dev or open(v + "/index").read().strip() != "0":
        continue
    usbdev = os.path.dirname(dev)
    streaming = {}
    for i in sorted(glob.glob(usbdev + "/" + os.path.basename(usbdev) + ":*")):
        if open(i + "/bInterfaceSubClass").read().strip() != "02":
            continue
        eps = {e.rsplit("/", 1)[1]: {k: open(e + "/" + k).read().strip() for k in ("wMaxPacketSize", "bInterval", "interval", "type")}
               for e in glob.glob(i + "/ep_*")}
        streaming[open(i + "/bInterfaceNumber").read().strip()] = {"alt": open(i + "/bAlternateSetting").read().strip(), "endpoints": eps}
    out.append({"video": "/dev/" + os.path.basename(v), "interface": os.path.basename(dev),
                "control": open(dev + "/bInterfaceNumber").read().strip(), "speed": open(usbdev + "/speed").read().strip(),
                "configuration": open(usbdev + "/bConfigurationValue").read().strip(),
                "descriptors": open(usbdev + "/descriptors", "rb").read().hex(), "streaming": streaming})
print(json.dumps(out))
"""


def iso_alts(descriptors: bytes, control: int) -> list[dict]:
    """The streaming interface's isochronous IN alternate settings the control interface lists, read as
    CoordCore's UsbDescriptors reads them, with UsbIsoAltSetting's arithmetic at high speed."""
    i, cls, sub, number, alt, listed, alts = descriptors[0], 0, 0, -1, -1, [], []
    while i + 2 <= len(descriptors):
        n, t = descriptors[i], descriptors[i + 1]
        if n < 2:
            break
        d = descriptors[i:i + n]
        if t == 4 and n >= 9:
            number, alt, cls, sub = d[2], d[3], d[5], d[6]
        elif t == 0x24 and cls == 0x0E and sub == 1 and number == control and d[2] == 1 and n >= 12:
            listed = list(d[12:12 + d[11]])
        elif t == 5 and cls == 0x0E and sub == 2 and d[2] & 0x80 and d[3] & 3 == 1:
            mps = d[4] | d[5] << 8
            per = (mps & 0x7FF) * (((mps >> 11) & 3) + 1)
            alts.append({"interface": number, "alt": alt, "endpoint": f"0x{d[2]:02x}", "wMaxPacketSize": f"0x{mps:04x}",
                         "bytes_per_microframe": per, "bytes_per_s": per * 8000 // (1 << (max(d[6], 1) - 1))})
        i += n
    return [a for a in alts if not listed or a["interface"] in listed]


def drift(lab: Lab, work: Path, seconds: float, fps: int) -> dict:
    vm = lab.vms[0]
    vm.sh("echo 1 > /sys/module/uvcvideo/parameters/hwtimestamps")
    lab.write_rig(fps=fps, takes_dir=work / "takes")
    code, take_dir, stderr = lab.start_take(work / "takes", seconds, timeout=seconds * 6 + 600)
    if take_dir is None:
        return {"exit": code, "error": stderr.strip()[-600:]}
    manifest = json.loads((take_dir / "manifest.json").read_text())
    cam = manifest["cameras"][0]
    gadget = usb.gadget_reports(vm).get("uvc", {})
    out = {"seconds": seconds, "fps": fps, "exit": code, "status": manifest["status"], "groups": manifest["groups"],
           "gadget": gadget, "true_phase": vmlab_usb.true_phase(manifest, take_dir, cam)}
    # Every frame's phase, unwrapped as true_phase does, for the least-squares slope and the 10 s windows.
    errors, found = truth.centre_errors(manifest, take_dir, cam["node"], cam["camera"])
    rows = (take_dir / cam["node"] / f"{cam['camera']}.frames.csv").read_text().splitlines()[1:]
    t0, period = manifest["t0_us"], manifest["frame_period_us"]
    points, last, k, prev = [], None, 0, None
    for row, s in zip(rows, found):
        if s is None or s[0] == last:
            continue
        last = s[0]
        _, group, centre, _ = row.split(",")
        x = int(centre) - errors[k] - (t0 + int(group) * period)
        k += 1
        x = (x + period / 2) % period - period / 2 if prev is None else x + round((prev - x) / period) * period
        prev = x
        points.append((int(group) * period / 1e6, x))
    if len(points) >= 2:
        ts, xs = [p[0] for p in points], [p[1] for p in points]
        out["least_squares_us_per_s"] = round(statistics.linear_regression(ts, xs).slope, 2)
        out["windows_10s_median_us"] = [round(statistics.median(x for t, x in points if w <= t < w + 10))
                                        for w in range(0, int(ts[-1]) + 1, 10) if any(w <= t < w + 10 for t in ts)]
    if gadget.get("period_s"):
        # A sensor whose period is longer than the grid's falls behind it by this much each second (guest clock).
        out["predicted_us_per_s"] = round((gadget["period_s"] * fps - 1) * 1e6, 2)
    out["new_frames"], out["frame_period_us"] = len(points), period
    return out


def bus(lab: Lab, webcams: int) -> dict:
    vm = lab.vms[0]
    vm.sh("systemctl stop coord-node", timeout=120)
    vm.sh("systemctl stop vmlab-uvc 2>/dev/null; systemctl reset-failed vmlab-uvc 2>/dev/null; "
          "systemd-run --unit=vmlab-uvc --collect -p Nice=-15 python3 /mnt/host/uvc_gadget.py "
          f"--udc {usb.UVC_UDC} --functions {webcams} --report /run/vmlab-uvc.json")
    vm.sh(f"for i in $(seq 600); do [ $(ls /dev/v4l/by-path 2>/dev/null | grep -c 'dummy_hcd.*index0') -ge {webcams} ] && exit 0; "
          "sleep 0.1; done; systemctl status vmlab-uvc --no-pager -n 20; exit 1", timeout=120)
    cams = json.loads(vm.sh(f"python3 -c '{SYSFS}'"))
    for c in cams:
        c["alt_settings"] = iso_alts(bytes.fromhex(c["descriptors"]), int(c["control"], 16))
        c["reserved_bytes_per_s"] = max((a["bytes_per_s"] for a in c["alt_settings"]), default=0)
    vm.sh("dmesg -C")
    # All streaming at once; the alternate settings read while they do, then their frame rates.
    streams = " ".join(f"(v4l2-ctl -d {c['video']} --set-fmt-video=width=640,height=360,pixelformat=YUYV "
                       f"--set-parm=30 --stream-mmap --stream-count=90 --stream-to=/dev/null > /tmp/s{k}.log 2>&1; "
                       f"echo $? > /tmp/s{k}.rc) &" for k, c in enumerate(cams))
    started = vm.sh(f"rm -f /tmp/s*.rc; date +%s.%N; {streams} true").strip()
    during = json.loads(vm.sh(f"sleep 2; python3 -c '{SYSFS}'"))
    vm.sh(f"for i in $(seq 1200); do [ $(ls /tmp/s*.rc 2>/dev/null | wc -l) -ge {len(cams)} ] && exit 0; sleep 0.1; "
          "done; exit 1", timeout=180, check=False)
    ended = vm.sh("date +%s.%N").strip()
    for k, c in enumerate(cams):
        c["streaming_at_once"] = {
            "exit": vm.sh(f"cat /tmp/s{k}.rc 2>/dev/null || echo none").strip(),
            "log_tail": vm.sh(f"tail -c 400 /tmp/s{k}.log 2>/dev/null || true").strip(),
            "in_force": {n: s["alt"] for n, s in next((d for d in during if d["video"] == c["video"]), {}).get("streaming", {}).items()},
            "endpoints_in_force": {n: s["endpoints"] for n, s in next((d for d in during if d["video"] == c["video"]), {}).get("streaming", {}).items()},
        }
        if k:  # one USB device: the same descriptors
            del c["descriptors"]
    frames_bytes = 640 * 360 * 2 * 30
    total = sum(c["reserved_bytes_per_s"] for c in cams)
    return {"webcams": len(cams), "cameras": cams, "all_seconds": round(float(ended) - float(started), 1),
            "kernel_log": vm.sh("dmesg | grep -i -E 'uvc|usb|dummy' | tail -n 30; true").strip().splitlines(),
            "reserved_total_bytes_per_s": total, "periodic_bytes_per_s": 48_000_000,
            "reserved_cost": round(total / 48e6, 3),
            "baseline_frames_total_bytes_per_s": frames_bytes * len(cams),
            "baseline_frames_cost": round(frames_bytes * len(cams) / 48e6, 3)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--drift", type=float, default=60, help="seconds of the drift take (0: none)")
    ap.add_argument("--fps", type=int, default=15)
    ap.add_argument("--webcams", type=int, default=2, choices=(0, 2, 3), help="webcams on one bus (0: none)")
    ap.add_argument("--debs")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/vmlab-usb-bus.json")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vmlab-usb-bus-"))
    started = datetime.datetime.now(datetime.timezone.utc)
    lab = Lab.up(work / "lab", 1, find_debs(a.debs), camera_kind="uvc", mic_kind="dummy")
    result: dict = {"command": " ".join(["python3", "bench/vmlab_usb_bus.py"] + sys.argv[1:]),
                    "started": started.isoformat()}
    try:
        if a.drift > 0:
            result["drift"] = drift(lab, work, a.drift, a.fps)
            print(json.dumps({k: result["drift"].get(k) for k in ("status", "new_frames", "true_phase", "least_squares_us_per_s",
                                                                   "predicted_us_per_s", "windows_10s_median_us")}), flush=True)
        if a.webcams:
            result["bus"] = bus(lab, a.webcams)
            print(json.dumps({k: v for k, v in result["bus"].items() if k != "cameras"}), flush=True)
        result["load"] = Path("/proc/loadavg").read_text().split()[:3]
    finally:
        lab.down()
        a.out.write_text(json.dumps(result, indent=1) + "\n")
    print(a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
