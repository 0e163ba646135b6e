#!/usr/bin/env python3
"""Checks a take's sound against SYNCCLICK v1 (CONTRACT §9) from the files alone, without coord's code.

    scripts/check-audio.py TAKE_DIR [--truth TRUTH.json] [--max-offset-us 1000] [--max-rate-error-diff-ppm 5] [--json]

For every entry of manifest.json's `audio` list:
  - the file exists, its SHA-256 is the manifest's, and ffprobe finds one audio stream at the listed rate and
    channel count whose duration is the video's (`groups` × `frame_period_us`) within one 10 ms buffer;
  - the sound is decoded with ffmpeg (s16le) and every click is found: the 1 ms 4 kHz burst at −6 dBFS that the
    synthetic microphone starts at every whole second of the host's CLOCK_MONOTONIC. Its onset is the burst's
    energy centroid minus 500 µs (a steady 1 ms burst's energy is centred on its middle), which is immune to
    the sine's phase and to a threshold's bias;
  - each click's offset = start_us + onset_sample / sample_rate × 10^6 − the nearest whole second (µs): the
    sound's real offset from the rig timebase (on one host the rig timebase is CLOCK_MONOTONIC). Passing needs
    |offset| p99 ≤ --max-offset-us;
  - with --node-clock the clicks are on whole seconds of each node's own clock instead (a player on another
    kernel, scripts/vmlab_lib/guest/clicks.py): each click's rig time is mapped back to the node's clock through
    the manifest's `clock_track` (the mapping the node was using at that instant) before the nearest whole second
    is taken;
  - with --truth (`coord demo --truth-file`): the microphone's injected rate error must be within
    --max-rate-error-diff-ppm of the manifest's `rate_error_ppm`.
Exit 0 when every check passes, 1 otherwise; prints one line per microphone (or JSON with --json).
"""
from __future__ import annotations

import argparse
import array
import hashlib
import json
import subprocess
import sys
from pathlib import Path

THRESHOLD = 0.1 * 32767  # far above the −60 dBFS floor, far below the −6 dBFS burst


def decode(path: Path, rate: int) -> array.array:
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", str(path), "-f", "s16le", "-acodec", "pcm_s16le", "-ac", "1",
                          "-ar", str(rate), "-"], capture_output=True, check=True).stdout
    samples = array.array("h")
    samples.frombytes(raw[: len(raw) // 2 * 2])
    if sys.byteorder != "little":
        samples.byteswap()
    return samples


def probe(path: Path) -> dict:
    out = subprocess.run(["ffprobe", "-v", "error", "-show_streams", "-show_format", "-of", "json", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def clicks(samples: array.array, rate: int) -> list[float]:
    """Onsets (fractional sample index) of every burst: runs of loud samples, each measured by its energy centroid."""
    onsets = []
    n = len(samples)
    i = 0
    window = int(rate * 0.0015)  # the burst and a margin
    while i < n:
        if abs(samples[i]) < THRESHOLD:
            i += 1
            continue
        lo = max(0, i - int(rate * 0.0002))
        hi = min(n, lo + window)
        energy = weighted = 0.0
        for k in range(lo, hi):
            e = float(samples[k]) * float(samples[k])
            energy += e
            weighted += e * k
        if energy > 0 and hi - lo == window:
            onsets.append(weighted / energy - 0.0005 * rate)
        i = hi + int(rate * 0.1)  # the next click is a second later
    return onsets


def node_time(track: list[dict], rig_us: float) -> float:
    """The node's clock at rig instant `rig_us`, by the newest clock_track point at or before it (each point: node
    clock − rig clock at t_us, and the node clock's rate against the rig's)."""
    point = track[0]
    for p in track:
        if p["t_us"] <= rig_us:
            point = p
    return rig_us + point["offset_us"] + point["drift_ppm"] * 1e-6 * (rig_us - point["t_us"])


def percentile(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(p * (len(s) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("take")
    ap.add_argument("--truth", help="coord demo --truth-file output (the injected microphone rate errors)")
    ap.add_argument("--max-offset-us", type=float, default=1000)
    ap.add_argument("--max-rate-error-diff-ppm", type=float, default=5)
    ap.add_argument("--node-clock", action="store_true",
                    help="the clicks are on whole seconds of each node's own clock (mapped through clock_track)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    take = Path(args.take)
    m = json.loads((take / "manifest.json").read_text())
    truth = {}
    if args.truth:
        for node in json.loads(Path(args.truth).read_text()).get("nodes", []):
            for mic in node.get("mics", []):
                truth[(node["name"], mic["mic"])] = mic["rate_error_ppm"]
    video_us = m["groups"] * m["frame_period_us"]
    results, ok = [], True
    audio = m.get("audio") or []
    if not audio:
        print("no audio in the manifest", file=sys.stderr)
        return 1
    for a in audio:
        r = {"node": a["node"], "mic": a["mic"], "problems": []}
        path = take / a["path"]
        if not path.is_file():
            r["problems"].append(f"{a['path']} is missing")
            results.append(r)
            continue
        if hashlib.sha256(path.read_bytes()).hexdigest() != a["sha256"]:
            r["problems"].append("sha256 differs from the manifest")
        info = probe(path)
        streams = [s for s in info["streams"] if s.get("codec_type") == "audio"]
        if len(streams) != 1:
            r["problems"].append(f"{len(streams)} audio streams")
        else:
            s = streams[0]
            if int(s["sample_rate"]) != a["sample_rate"] or int(s["channels"]) != a["channels"]:
                r["problems"].append(f"stream is {s['sample_rate']} Hz × {s['channels']}, manifest says "
                                     f"{a['sample_rate']} × {a['channels']}")
        samples = decode(path, a["sample_rate"])
        duration_us = len(samples) / a["sample_rate"] * 1e6
        r["duration_us"] = round(duration_us)
        r["video_us"] = video_us
        if abs(duration_us - video_us) > 10_000:
            r["problems"].append(f"sound lasts {duration_us / 1e6:.4f} s, the pictures {video_us / 1e6:.4f} s")
        if len(samples) != a["frames"]:
            r["problems"].append(f"{len(samples)} samples decoded, manifest says {a['frames']}")
        offsets = []
        track = sorted((p for p in m.get("clock_track") or [] if p.get("node") == a["node"]), key=lambda p: p["t_us"])
        if args.node_clock and not track:
            r["problems"].append("the manifest has no clock_track for this node (--node-clock needs it)")
        for onset in clicks(samples, a["sample_rate"]):
            t = a["start_us"] + onset / a["sample_rate"] * 1e6
            if args.node_clock and track:
                t = node_time(track, t)
            offsets.append(t - round(t / 1e6) * 1e6)
        r["clicks"] = len(offsets)
        if not offsets:
            r["problems"].append("no click found")
        else:
            absolute = [abs(x) for x in offsets]
            r["offset_us"] = {"p50": round(percentile(absolute, 0.5), 1), "p99": round(percentile(absolute, 0.99), 1),
                              "max": round(max(absolute), 1), "mean_signed": round(sum(offsets) / len(offsets), 1)}
            if r["offset_us"]["p99"] > args.max_offset_us:
                r["problems"].append(f"A/V offset p99 {r['offset_us']['p99']} µs > {args.max_offset_us:g}")
        r["reported_rate_error_ppm"] = a["rate_error_ppm"]
        r["reported_av_offset_us"] = a["av_offset_us"]
        key = (a["node"], a["mic"])
        if key in truth:
            r["true_rate_error_ppm"] = round(truth[key], 2)
            diff = abs(truth[key] - a["rate_error_ppm"])
            r["rate_error_diff_ppm"] = round(diff, 2)
            if diff > args.max_rate_error_diff_ppm:
                r["problems"].append(f"rate error: reported {a['rate_error_ppm']} ppm, injected {truth[key]:.2f} ppm")
        ok &= not r["problems"]
        results.append(r)
    if args.json:
        print(json.dumps({"passed": ok, "mics": results}, indent=1))
    else:
        for r in results:
            verdict = "ok" if not r["problems"] else "FAIL: " + "; ".join(r["problems"])
            print(f"{r['node']}/{r['mic']}: {r.get('clicks', 0)} clicks, offset {r.get('offset_us')}, rate error "
                  f"reported {r.get('reported_rate_error_ppm')} ppm, injected {r.get('true_rate_error_ppm')}: {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
