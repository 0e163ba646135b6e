#!/usr/bin/env python3
"""How true a console Snap's centres are, from the first tiles on (issue 39): a 2-node, 4-camera demo console is
snapped every half second from the moment its previews show, and each shot's stills are held against their
SYNCSTRIPE truth — the worst |node's centre − true centre| and |report's spread − true spread| per shot.

Run it against two checkouts (each uses its own built binaries and test helpers), e.g. the tree before a change as
the baseline and the tree after it, on the same machine one after the other:

    python3 bench/console_snap_centres.py --repo /path/to/old-checkout --repo . --shots 10 --json out.json
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path


def measure(repo: Path, shots: int, spacing: float) -> list[dict]:
    sys.path.insert(0, str(repo / "Tests/python"))
    for name in ("test_console", "test_snap"):
        sys.modules.pop(name, None)
    console = importlib.import_module("test_console")
    snap = importlib.import_module("test_snap")
    os.environ["COORD_CALIBRATION"] = str(repo / ".build/test-calibration.json")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        demo = console.ConsoleDemo(Path(tmp), nodes=2, cameras=2)
        try:
            first = demo.wait_multiview()
            began = time.monotonic()
            for k in range(shots):
                status, shot = demo.send("POST", "/api/snap", {})
                if status != 200:
                    rows.append({"shot": k, "error": shot})
                    continue
                directory = demo.takes / shot["take_id"]
                manifest = json.loads((directory / "manifest.json").read_text())
                report = json.loads((directory / "sync-report.json").read_text())
                truth = {s["path"]: snap.stripe(directory / s["path"]) for s in manifest["stills"]}
                errors = [s["center_us"] - truth[s["path"]][2] for s in manifest["stills"] if truth[s["path"]]]
                centres = [t[2] for t in truth.values() if t]
                true_spread = max(centres) - min(centres)
                rows.append({"shot": k, "after_first_tile_s": round(time.monotonic() - began, 2),
                             "groups_after_first": shot["group"] - first["group"],
                             "centre_error_max_us": max(abs(e) for e in errors),
                             "true_spread_us": true_spread, "report_spread_us": report["spread_us"]["max"],
                             "spread_error_us": abs(report["spread_us"]["max"] - true_spread)})
                time.sleep(spacing)  # a pace for the shots, not a synchronization: each answer is awaited above
        finally:
            demo.close()
    sys.path.remove(str(repo / "Tests/python"))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", action="append", required=True, help="a checkout with built binaries (repeat: baseline first)")
    parser.add_argument("--shots", type=int, default=10)
    parser.add_argument("--spacing", type=float, default=0.5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = {}
    for repo in args.repo:
        rows = measure(Path(repo).resolve(), args.shots, args.spacing)
        results[repo] = rows
        print(f"== {repo}")
        for r in rows:
            print("  " + ("  ".join(f"{k} {v}" for k, v in r.items())))
        good = [r for r in rows if "error" not in r]
        if good:
            print(f"  worst centre error {max(r['centre_error_max_us'] for r in good)} µs, "
                  f"worst spread error {max(r['spread_error_us'] for r in good)} µs over {len(good)} shots")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
