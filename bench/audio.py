#!/usr/bin/env python3
"""Benchmark: how well sound and pictures agree, from the files (CONTRACT §9, issue 16).

    swift build -c release --static-swift-stdlib --scratch-path .build-release
    .venv/bin/python bench/audio.py --build-dir .build-release/release [--takes 3] [--nodes 4] [--seconds 30]
        [--drift-ppm 100] [--out bench/results/audio.json]

Runs `coord demo` --takes times (seeds 100, 101, …) with one synthetic SYNCCLICK microphone per node, sample-clock
rate errors drawn from ±--drift-ppm, node clocks from ±--drift-ppm and ±250 ms; each take is checked by
scripts/check-take.py (pictures) and scripts/check-audio.py (sound, without coord's code): the true A/V offset of
every click (start_us + onset / rate − the whole second it was made at) and the reported rate error against the
injected one (`--truth-file`). Prints and writes one JSON document.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default=str(ROOT / ".build-release/release"))
    ap.add_argument("--takes", type=int, default=3)
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--drift-ppm", type=float, default=100)
    ap.add_argument("--calibration", default=os.environ.get("COORD_CALIBRATION"))
    ap.add_argument("--out", default=str(ROOT / "bench/results/audio.json"))
    args = ap.parse_args()
    coord = Path(args.build_dir) / "coord"
    doc = {"benchmark": "audio", "command": shlex.join([".venv/bin/python", "bench/audio.py", *sys.argv[1:]]),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "git_commit": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                                        text=True).stdout.strip(),
           "takes": []}
    offsets, diffs, reported_p99 = [], [], []
    passed = True
    with tempfile.TemporaryDirectory(prefix="coord-bench-audio-") as work:
        for i in range(args.takes):
            seed = 100 + i
            takes, truth = Path(work) / f"takes-{seed}", Path(work) / f"truth-{seed}.json"
            argv = [str(coord), "demo", "--nodes", str(args.nodes), "--seconds", str(args.seconds), "--seed", str(seed),
                    "--drift-ppm", str(args.drift_ppm), "--takes-dir", str(takes), "--truth-file", str(truth)]
            if args.calibration:
                argv += ["--calibration", args.calibration]
            t = time.monotonic()
            run = subprocess.run(argv, capture_output=True, text=True, timeout=600)
            wall = time.monotonic() - t
            take = next(takes.iterdir())
            pictures = subprocess.run([sys.executable, str(ROOT / "scripts/check-take.py"), str(take)],
                                      capture_output=True, text=True)
            sound = json.loads(subprocess.run([sys.executable, str(ROOT / "scripts/check-audio.py"), str(take),
                                               "--truth", str(truth), "--json"], capture_output=True, text=True).stdout)
            entry = {"seed": seed, "exit": run.returncode, "wall_s": round(wall, 1),
                     "check_take_passed": pictures.returncode == 0, "check_audio_passed": sound["passed"],
                     "mics": [{k: m.get(k) for k in ("node", "clicks", "offset_us", "true_rate_error_ppm",
                                                      "reported_rate_error_ppm", "rate_error_diff_ppm",
                                                      "reported_av_offset_us", "duration_us", "video_us", "problems")}
                              for m in sound["mics"]]}
            doc["takes"].append(entry)
            passed &= run.returncode == 0 and entry["check_take_passed"] and sound["passed"]
            for m in sound["mics"]:
                offsets.append(m["offset_us"]["p99"])
                diffs.append(m["rate_error_diff_ppm"])
                reported_p99.append(m["reported_av_offset_us"]["p99"])
            print(f"take {i + 1}: seed {seed}, exit {run.returncode}, pictures ok {entry['check_take_passed']}, "
                  f"sound ok {sound['passed']}, worst click p99 {max(m['offset_us']['p99'] for m in sound['mics'])} µs, "
                  f"worst rate diff {max(m['rate_error_diff_ppm'] for m in sound['mics'])} ppm", file=sys.stderr)
    doc["result"] = {
        "mics": len(offsets),
        "true_av_offset_p99_us_worst_mic": max(offsets), "true_av_offset_p99_us_median_mic": sorted(offsets)[len(offsets) // 2],
        "rate_error_diff_ppm_worst": max(diffs), "rate_error_diff_ppm_median": sorted(diffs)[len(diffs) // 2],
        "reported_av_offset_p99_us_median": sorted(reported_p99)[len(reported_p99) // 2],
        "targets": "true A/V offset p99 ≤ 1000 µs; |reported − injected rate error| ≤ 5 ppm",
        "passed": passed and max(offsets) <= 1000 and max(diffs) <= 5,
    }
    text = json.dumps(doc, indent=1)
    Path(args.out).write_text(text + "\n")
    print(text)
    return 0 if doc["result"]["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
