#!/usr/bin/env python3
"""Checks a coord take directory against CONTRACT §4/§5, independently of coord's own code.

    scripts/check-take.py TAKE_DIR [--json]

For every camera in manifest.json: each file's size and SHA-256 (and xxh128, with pip xxhash) match the manifest; ffprobe reads the
.mkv and counts exactly `groups` frames; frames.csv has the contract header and one row per frame with
frame i in group i; the SYNCSTRIPE decodes in every frame (magic, CRC-8) with the camera's ordinal, and
a `dup` row repeats the previous frame's stripe. Every microphone file (CONTRACT §9) matches its SHA-256 and ffprobe
reads its sound; a microphone in `audio_lost` has no file. It also prints the TRUE frame-centre spread per group,
from the stripes (ground truth only the simulation knows), beside what sync-report.json claims.
Exit 0 when every check passes, 1 otherwise (one line per failure on stderr).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

try:  # pip xxhash (ascmhl's own dependency): the manifest's xxh128 is checked where it is installed
    import xxhash
except ImportError:
    xxhash = None

import numpy as np

STRIPE_W, STRIPE_H = 104, 64


def crc8(data: bytes) -> int:
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


def decode_stripe(block: np.ndarray):
    """block: 64×104 luma. Returns (ordinal, counter, true_center_us) or None."""
    centres = block.reshape(8, 8, 13, 8)[:, 2:6, :, 2:6].mean(axis=(1, 3))  # rows × cols of block means
    bits = (centres.reshape(-1) > 125).astype(np.uint8)  # block b = row*13 + col, MSB first
    data = np.packbits(bits).tobytes()
    if data[0] != 0xA5 or crc8(data[:12]) != data[12]:
        return None
    return data[1], int.from_bytes(data[2:6], "big"), int.from_bytes(data[6:12], "big")


def stripes(mkv: Path):
    raw = subprocess.run(
        ["ffmpeg", "-v", "error", "-i", str(mkv), "-vf", f"crop={STRIPE_W}:{STRIPE_H}:0:0",
         "-f", "rawvideo", "-pix_fmt", "gray", "-"], capture_output=True, timeout=600)
    if raw.returncode != 0:
        raise RuntimeError(f"ffmpeg cannot decode {mkv}: {raw.stderr.decode(errors='replace').strip()[:300]}")
    frames = np.frombuffer(raw.stdout, np.uint8).reshape(-1, STRIPE_H, STRIPE_W)
    return [decode_stripe(f) for f in frames]


def ffprobe_frames(mkv: Path) -> int:
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0",
         "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", str(mkv)],
        capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"ffprobe cannot read {mkv}: {out.stderr.strip()[:300]}")
    text = out.stdout.strip().rstrip(",")
    if not text.isdigit():
        raise RuntimeError(f"ffprobe counts no frames in {mkv} (it says {text[:80]!r})")
    return int(text)


def percentile(values, p):
    if not values:
        return 0
    s = sorted(values)
    import math
    return s[max(0, min(len(s) - 1, math.ceil(p * len(s)) - 1))]


def check(take: Path, per_group: bool = False):
    """(failures, figures); per_group=True adds figures["true_spread_by_group"] {group: true spread µs}."""
    failures: list[str] = []
    manifest = json.loads((take / "manifest.json").read_text())
    groups = manifest["groups"]
    t0, period = manifest["t0_us"], manifest["frame_period_us"]
    true_by_group: dict[int, list[int]] = {}
    per_camera = []
    for cam in manifest["cameras"]:
        who = f"{cam['node']}/{cam['camera']}"
        files = {f["path"]: f for f in cam["files"]}
        for path, f in files.items():
            p = take / path
            if not p.is_file():
                failures.append(f"{who}: {path} is listed in the manifest but missing")
                continue
            data = p.read_bytes()
            if len(data) != f["bytes"]:
                failures.append(f"{who}: {path} has {len(data)} bytes, manifest says {f['bytes']}")
            if hashlib.sha256(data).hexdigest() != f["sha256"]:
                failures.append(f"{who}: {path} does not match its sha256 in the manifest")
            if f.get("xxh128") and xxhash is not None and xxhash.xxh128(data).hexdigest() != f["xxh128"]:
                failures.append(f"{who}: {path} does not match its xxh128 in the manifest")
        mkv = take / f"{cam['node']}/{cam['camera']}.mkv"
        csv = take / f"{cam['node']}/{cam['camera']}.frames.csv"
        if not mkv.is_file() or not csv.is_file():
            failures.append(f"{who}: .mkv or .frames.csv missing")
            continue
        lines = csv.read_text(errors="replace").splitlines()
        if not lines or lines[0] != "frame,group,center_us,flags":
            failures.append(f"{who}: frames.csv header is {(lines or [''])[0][:80]!r}")
        rows = []
        # Every row is checked before it is used: a table cut by a crash is reported, not crashed on.
        for i, line in enumerate(l for l in lines[1:] if l):
            r = line.split(",")
            ok = len(r) == 4 and all(x.lstrip("-").isdigit() for x in r[:3])
            if not ok or int(r[0]) != i or int(r[1]) != i or r[3] not in ("", "dup", "recovered"):
                failures.append(f"{who}: frames.csv row {i} is {line[:80]!r}")
                break
            rows.append(r)
        if len(rows) != groups:
            failures.append(f"{who}: frames.csv has {len(rows)} rows for {groups} groups")
        recovered = sum(1 for r in rows if r[3] == "recovered")
        if recovered:
            failures.append(f"{who}: {recovered} frames.csv rows were rebuilt after a crash (flag recovered), their centres estimated")
        dups = sum(1 for r in rows if r[3] == "dup")
        # A dup row is a dropped frame, or a group held on purpose by a frame-rate cap or a pressure slow-down.
        if dups != cam["dropped"] + cam.get("held", 0) or len(rows) != cam["frames"]:
            failures.append(f"{who}: manifest says frames={cam['frames']} dropped={cam['dropped']} held={cam.get('held', 0)}, "
                            f"frames.csv has {len(rows)} rows, {dups} dup")
        try:
            n = ffprobe_frames(mkv)
            if n != groups:
                failures.append(f"{who}: ffprobe counts {n} frames in {mkv.name}, expected {groups}")
            if n != len(rows):
                failures.append(f"{who}: {mkv.name} holds {n} frames but frames.csv has {len(rows)} rows")
            decoded = stripes(mkv)
        except (RuntimeError, ValueError) as e:
            failures.append(f"{who}: {e}")
            continue
        bad = [i for i, s in enumerate(decoded) if s is None or s[0] != cam["ordinal"]]
        if bad:
            failures.append(f"{who}: stripe missing or wrong ordinal in {len(bad)} frame(s), first at frame {bad[0]}")
        errors = []
        for i, (s, r) in enumerate(zip(decoded, rows)):
            if s is None or r[3] == "recovered":
                continue
            if r[3] == "dup":
                if i > 0 and decoded[i - 1] is not None and decoded[i - 1][1] != s[1]:
                    failures.append(f"{who}: dup frame {i} does not repeat frame {i - 1}")
                continue
            true_by_group.setdefault(i, []).append(s[2])
            errors.append(int(r[2]) - s[2])  # node's estimate minus truth
        per_camera.append({"node": cam["node"], "camera": cam["camera"], "frames": len(rows), "dup": dups,
                           "estimate_error_us": {"p50": percentile([abs(e) for e in errors], .5),
                                                 "p99": percentile([abs(e) for e in errors], .99),
                                                 "max": max([abs(e) for e in errors], default=0)},
                           "true_phase_us": {"p99": percentile([abs(s[2] - (t0 + i * period)) for i, s in enumerate(decoded)
                                                                if s is not None and i < len(rows) and rows[i][3] == ""], .99)}})
    # Sound (CONTRACT §9): every microphone file the manifest lists is there, matches its checksum and ffprobe reads
    # it; a microphone lost before group 0 (`audio_lost`) has no file at all.
    for a in manifest.get("audio") or []:
        who, p = f"{a['node']}/{a['mic']}", take / a["path"]
        if not a.get("sha256"):
            continue  # not collected: collection's own events say so
        if not p.is_file():
            failures.append(f"{who}: {a['path']} is listed in the manifest but missing")
            continue
        if hashlib.sha256(p.read_bytes()).hexdigest() != a["sha256"]:
            failures.append(f"{who}: {a['path']} does not match its sha256 in the manifest")
        out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "a", "-show_entries", "stream=codec_type",
                              "-of", "csv=p=0", str(p)], capture_output=True, text=True, timeout=120)
        if out.returncode != 0 or "audio" not in out.stdout:
            failures.append(f"{who}: ffprobe cannot read a sound stream in {a['path']}: {(out.stderr.strip().splitlines() or [''])[-1][:200]}")
    for lost in manifest.get("audio_lost") or []:
        if (take / lost["node"] / f"{lost['mic']}.mka").exists():
            failures.append(f"{lost['node']}/{lost['mic']}: lost before group 0 but its file is in the take")
    spreads = [max(v) - min(v) for v in true_by_group.values() if len(v) >= 2]
    truth = {"p50": percentile(spreads, .5), "p99": percentile(spreads, .99), "max": max(spreads, default=0)}
    report = json.loads((take / "sync-report.json").read_text())
    figures = {"groups": groups, "true_spread_us": truth, "claimed_spread_us": report["spread_us"],
               "cameras": per_camera}
    if per_group:
        figures["true_spread_by_group"] = {g: max(v) - min(v) for g, v in sorted(true_by_group.items()) if len(v) >= 2}
    return failures, figures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("take")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    take = Path(args.take)
    if not (take / "manifest.json").is_file():
        print(f"check-take: {take} has no manifest.json", file=sys.stderr)
        return 1
    try:
        failures, figures = check(take)
    except Exception as e:  # a take this checker cannot read is reported, never a traceback
        print(f"check-take: cannot check {take}: {type(e).__name__}: {str(e)[:300]}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(figures, indent=1))
    else:
        t, c = figures["true_spread_us"], figures["claimed_spread_us"]
        print(f"{take.name}: {len(figures['cameras'])} camera(s), {figures['groups']} groups; "
              f"true spread p50/p99/max {t['p50']}/{t['p99']}/{t['max']} µs, report claims {c['p50']}/{c['p99']}/{c['max']} µs")
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    if not failures:
        print("all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
