#!/usr/bin/env python3
"""How long Python test files take, before and after a change to them: each file runs with the Tests/python of BASE
(a commit) and with the working tree's, back to back, against the same built binaries, so the machine's load is as
alike as it can be for the two. Prints a table (file: before s → after s) and writes it as JSON.

  bench/test_durations.py --base 06d317a --out bench/results/test-durations.json \\
      test_rational_rates.py test_editorial.py test_deliver.py "test_demo.py::-k default or codecs or report_prints"

A file may carry pytest arguments after `::` (as above). Needs the debug build and scripts/python-env.sh's venv."""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = (".build", ".venv", "scripts", "proto", "Sources", "clients", "deploy", "docs")


def base_tree(rev: str, into: Path) -> Path:
    """Tests/python as it was at `rev`, beside links to this tree's binaries and scripts."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "Tests/python"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    for name in SHARED:
        (into / name).symlink_to(REPO / name)
    return into


def run(root: Path, file: str, extra: list[str]) -> dict:
    env = {**os.environ, "COORD_CALIBRATION": os.environ.get("COORD_CALIBRATION", str(REPO / ".build/test-calibration.json"))}
    started = time.monotonic()
    p = subprocess.run([str(REPO / ".venv/bin/python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", f"Tests/python/{file}",
                        *extra], cwd=root, capture_output=True, text=True, env=env, timeout=3600)
    wall = time.monotonic() - started
    last = (p.stdout.strip().splitlines() or [""])[-1]
    m = re.search(r"in ([0-9.]+)s", last)
    return {"seconds": float(m.group(1)) if m else round(wall, 2), "result": last.strip("= ")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the commit whose Tests/python is 'before'")
    ap.add_argument("--out", type=Path, help="JSON file for the table")
    ap.add_argument("files", nargs="+", help="test files, each optionally FILE::PYTEST ARGS")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = base_tree(args.base, Path(tmp))
        for spec in args.files:
            file, _, extra = spec.partition("::")
            extra_args = extra.split(" ", 1) if extra else []
            before = run(base, file, extra_args)
            after = run(REPO, file, extra_args)
            rows.append({"file": spec, "before": before, "after": after})
            print(f"{spec}: {before['seconds']:.1f} s → {after['seconds']:.1f} s   ({before['result']} | {after['result']})",
                  flush=True)
    total_b = sum(r["before"]["seconds"] for r in rows)
    total_a = sum(r["after"]["seconds"] for r in rows)
    print(f"total: {total_b:.1f} s → {total_a:.1f} s ({total_b - total_a:.1f} s less)")
    if args.out:
        args.out.write_text(json.dumps({"command": shlex.join(["bench/test_durations.py", *sys.argv[1:]]),
                                        "base": args.base, "head": subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                                                                  capture_output=True, text=True).stdout.strip(),
                                        "load_average_at_end": os.getloadavg()[0], "rows": rows,
                                        "total_before_s": total_b, "total_after_s": total_a}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
