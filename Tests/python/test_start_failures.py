"""A start that cannot happen on every node happens on none: real coord-node processes on loopback, one of them
with a camera that takes longer to open than the rig leaves before group 0 (as a slow USB camera can), and the
real `coord start-take`. The start fails for all with that node named, no take directory is left, and every
node ends idle, the slow one included once its camera has opened."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

from conftest import Node
from test_demo import check_take

ROOT = Path(__file__).resolve().parents[2]
COORD = Path(os.environ.get("COORD") or ROOT / ".build" / "debug" / "coord")


def all_idle(rig_file: Path) -> tuple[bool, str]:
    """Whether every node answered `coord status` and is idle (no take armed or recording)."""
    out = subprocess.run([str(COORD), "status", "--rig", str(rig_file)], capture_output=True, text=True, timeout=30)
    text = out.stdout + out.stderr
    idle = all(re.search(rf"^node-{i}\s+\S+\s+yes\s+idle\b", out.stdout, re.M) for i in (1, 2, 3))
    return out.returncode == 0 and idle, text


def test_a_node_not_armed_in_time_fails_the_start_for_all(tmp_path):
    nodes = []
    try:
        for i, extra in enumerate([[], [], ["--synthetic-open-ms", "4000"]], start=1):
            nodes.append(Node(tmp_path / f"n{i}", extra_args=["--name", f"node-{i}", "--synthetic", "cam0", *extra]))
        rig = tmp_path / "rig.yaml"
        rig.write_text("version: 1\nnodes:\n" + "".join(
            f"  - name: node-{i}\n    endpoint: {n.endpoint}\n" for i, n in enumerate(nodes, start=1)))
        takes = tmp_path / "takes"
        done = subprocess.run([str(COORD), "start-take", "--rig", str(rig), "--seconds", "3", "--takes-dir", str(takes)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 1, done.stderr
        last = done.stderr.strip().splitlines()[-1]
        assert "nothing was recorded" in last and "node-3" in last and "arming" in last, last
        assert not takes.exists() or not any(takes.iterdir()), "a failed start leaves no take directory"
        # The fast nodes were aborted at once; the slow one gets its abort once its camera has opened.
        deadline = time.monotonic() + 30
        while True:
            idle, states = all_idle(rig)
            if idle:
                break
            assert time.monotonic() < deadline, states
            time.sleep(0.5)
        for n in nodes:
            recorded = [p for p in n.staging.rglob("*.mkv")]
            assert recorded == [], f"a node kept files of a take that never started: {recorded}"
    finally:
        for n in nodes:
            n.cleanup()


def test_an_arming_that_runs_past_the_start_instant_is_armed_again_with_more_lead(tmp_path):
    """Every node answers the arm, but one only after the start instant's margin (its camera opens in 1.3 s; at
    2 fps a node needs the start three frames, 1.5 s, before group 0): instead of losing the take, the coordinator
    drops the arm on every node, configures and arms them again with group 0 placed as far ahead as the first
    arming showed it needs, and the take records in full. Each node re-arms the same take id over the files of
    the dropped arm, which must not disturb the new ones."""
    nodes = []
    try:
        for i, extra in enumerate([[], ["--synthetic-open-ms", "1300"]], start=1):
            nodes.append(Node(tmp_path / f"n{i}", extra_args=["--name", f"node-{i}", "--synthetic", "cam0",
                                                               "--synthetic-mic", "mic0", *extra]))
        rig = tmp_path / "rig.yaml"
        rig.write_text("version: 1\nnodes:\n" + "".join(
            f"  - name: node-{i}\n    endpoint: {n.endpoint}\n" for i, n in enumerate(nodes, start=1)))
        takes = tmp_path / "takes"
        done = subprocess.run([str(COORD), "start-take", "--rig", str(rig), "--seconds", "3", "--fps", "2",
                               "--size", "320x240", "--takes-dir", str(takes)], capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr
        assert "node node-2 took" in done.stderr and "arming every node again with more lead" in done.stderr, done.stderr
        leads = [int(m) for m in re.findall(r"arming; group 0 in (\d+) ms", done.stderr)]
        assert len(leads) == 2 and leads[1] >= leads[0] + 1300, f"the second lead makes room for the slow arm: {leads}"
        [take] = [d for d in takes.iterdir() if d.is_dir()]
        manifest = json.loads((take / "manifest.json").read_text())
        assert manifest["status"] == "complete", manifest.get("events")
        assert [e["kind"] for e in manifest["events"]].count("armed-again") == 1
        assert all(c["frames"] == 6 for c in manifest["cameras"]) and len(manifest["cameras"]) == 2
        # The files of the second arm, whole: every stripe decodes, every group is there, and both microphones.
        assert sorted(a["path"] for a in manifest["audio"]) == ["node-1/mic0.mka", "node-2/mic0.mka"]
        failures, _ = check_take.check(take)
        assert failures == [], failures
    finally:
        for n in nodes:
            n.cleanup()
