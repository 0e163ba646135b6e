"""Issue 37: synthetic cameras that behave like a Raspberry Pi sensor under libcamera (CONTRACT §16) — a requested
frame duration applies 3 frames after it is asked and only in whole 20 µs lines — are still held on the grid by the
nodes' phase law: a real `coord demo` of 4 coord-node processes on loopback, its true spread read from the stripes by
scripts/check-take.py."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COORD = os.environ.get("COORD", str(ROOT / ".build/debug/coord"))

_spec = importlib.util.spec_from_file_location("check_take", ROOT / "scripts/check-take.py")
check_take = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_take)

PI = ["--sensor-delay-frames", "3", "--sensor-line-us", "20"]


@pytest.fixture(scope="module")
def pi_take(tmp_path_factory):
    takes = tmp_path_factory.mktemp("pi") / "takes"
    proc = subprocess.run([COORD, "demo", "--nodes", "4", "--seconds", "20", "--seed", "37", "--no-audio",
                           "--takes-dir", str(takes), *PI], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    dirs = [d for d in takes.iterdir() if d.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def test_pi_like_sensors_are_locked_within_50us_p99_from_the_stripes(pi_take):
    failures, figures = check_take.check(pi_take)
    assert failures == [], failures
    manifest = json.loads((pi_take / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["groups"] == 600 and len(manifest["cameras"]) == 4
    true = figures["true_spread_us"]
    assert true["p99"] <= 50, f"true spread {true}"
    # The claim the report makes stays honest against the truth.
    assert abs(figures["claimed_spread_us"]["p99"] - true["p99"]) <= max(20, 0.25 * true["p99"]), figures


def test_the_sensors_really_ran_whole_lines(pi_take):
    """Consecutive frames' true centres differ by a duration of whole 20 µs lines (times the sensor's rate error of
    at most 20 ppm, under 1 µs): the nodes ran their cameras with the option, not as before."""
    manifest = json.loads((pi_take / "manifest.json").read_text())
    for cam in manifest["cameras"]:
        decoded = [s for s in check_take.stripes(pi_take / cam["node"] / f"{cam['camera']}.mkv") if s is not None]
        steps = [b[2] - a[2] for a, b in zip(decoded, decoded[1:]) if b[1] - a[1] == 1]
        assert len(steps) > 500, cam
        off_line = [d for d in steps if min(d % 20, 20 - d % 20) > 2]
        assert len(off_line) <= len(steps) // 100, f"{cam['node']}: {len(off_line)} of {len(steps)} steps not whole lines: {off_line[:5]}"
        assert len({d for d in steps}) > 1, "the law steers: not every frame runs the same duration"


@pytest.mark.parametrize("flags,named", [(["--sensor-delay-frames", "-1"], "--sensor-delay-frames"),
                                         (["--sensor-line-us", "nan"], "--sensor-line-us")])
def test_a_bad_sensor_option_is_one_sentence(tmp_path, flags, named):
    proc = subprocess.run([COORD, "demo", "--takes-dir", str(tmp_path), *flags], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2, proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and named in lines[0], proc.stderr
    assert not any(tmp_path.iterdir()), "nothing was recorded"
