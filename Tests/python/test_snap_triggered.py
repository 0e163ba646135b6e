"""A console Snap over real nodes (issue 39 item 3, CONTRACT §17/§18): node n1 (coord-node-scripted from its node
file) has a scripted UVC webcam bound to trigger output `sync` (`--trigger-log`: a scripted line that logs each
pulse's rise on CLOCK_MONOTONIC, this machine has no GPIO chip) beside a synthetic camera; node n2 has two
synthetic cameras. A cold `coord snap`, then one `coord console` and three Snaps through the API serve every
assertion:

- the cold shot records a take's span, the output pulsing each of its groups: the still is the frame of the shot
  group's pulse, and the manifest and summary name the output;
- the first warm one: no train runs while the console previews, so the node emits exactly one pulse for the shot's
  group; every camera's still is of that group, the triggered camera's centred on its pulse's measured edge plus its
  delay and half its exposure, and the manifest says it was triggered, by `sync`, with the pulse's timing error;
- a burst of 3: exactly 3 pulses, each still its own pulse's frame;
- the last: n2 is frozen (SIGSTOP) as the Snap is asked, so it never takes it: the shot is partial, names n2's
  cameras in one sentence each, and n1's stills are collected and sealed (`ascmhl verify`).
- then the operator's preview train (issue 38): on, about one rise per preview group (a Snap among them adding no
  pulse of its own), off with no rise after, on again and the console killed: the node's rises stop with the lease.

The scripted webcam free-runs on the grid (it has no trigger input): its stripes are not the pulses' truth, so the
triggered still is checked against the pulse log, the synthetic stills against their stripes."""
from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import Node
from test_snap import ASCMHL_VERIFY, stripe
from test_v4l2_node import COORD, UVC, script, scripted_node_binary

DELAY_US, EXPOSURE_US = 20, 8000
SYNC_US = 50
# The rise is stamped on the node's clock, the centres are on the rig's: one host, but the alignment's offset is
# estimated (a few µs, its bound under 100).
CLOCK_US = 100

NODE_FILE = """version: 1
name: n1
endpoint: tcp://127.0.0.1:*
staging: {staging}
triggers:
  - {{name: sync, gpio: {{chip: /dev/gpiochip0, line: 17}}, width_us: 500}}
cameras:
  - {{name: cam0, v4l2: /dev/video0, trigger: {{output: sync, source: Line0, delay_us: {delay}}}}}
  - {{name: syn0, synthetic: true}}
"""


def start_triggered_node(d: Path):
    d.mkdir(parents=True, exist_ok=True)
    (d / "node.yaml").write_text(NODE_FILE.format(staging=d / "staging", delay=DELAY_US))
    err = open(d / "node.stderr", "wb")
    proc = subprocess.Popen([str(scripted_node_binary()), "--config", str(d / "node.yaml"), "--parent-pid", str(os.getpid()),
                             "--v4l2-script", str(script(d / "cams.json", {"/dev/video0": UVC})), "--trigger-log", str(d / "pulses.log")],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, text=True)
    lines: "queue.Queue[str]" = queue.Queue()
    threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()
    m = re.match(r"READY (tcp://\S+)", lines.get(timeout=30))
    assert m, (d / "node.stderr").read_text()
    return proc, m.group(1)


class Console:
    def __init__(self, rig: Path, takes: Path):
        self.proc = subprocess.Popen([str(COORD), "console", "--rig", str(rig), "--listen", "127.0.0.1:0", "--takes-dir", str(takes)],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        m = re.search(r"^CONSOLE (http://[\d.:]+)/\?token=(\S+)$", self.proc.stdout.readline().strip())
        assert m, "coord console printed no CONSOLE line"
        self.base, self.auth = m.group(1), {"Authorization": f"Bearer {m.group(2)}"}

    def call(self, method: str, path: str, body=None, timeout: float = 10):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json", **self.auth})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def close(self):
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


def wait_previews(console: Console, cameras: int, groups: int = 60, timeout: float = 90):
    """Until a complete multiview set of every camera, then `groups` more groups (the phase fits settle)."""
    deadline, first = time.monotonic() + timeout, None
    while True:
        assert time.monotonic() < deadline, "the console never showed every camera's tile"
        status, mv = console.call("GET", "/api/multiview")
        if status == 200 and len(mv.get("tiles", [])) == cameras:
            first = mv["group"] if first is None else first
            if mv["group"] >= first + groups:
                return
        time.sleep(0.1)


def snap(console: Console, name: str, **burst):
    deadline = time.monotonic() + 30
    while True:
        status, shot = console.call("POST", "/api/snap", {"name": name, **burst}, timeout=60)
        # 409 until every node's clock is followed and its tiles subscribed; anything else is the answer.
        if status != 409 or "no node previews" not in shot.get("error", "") or time.monotonic() > deadline:
            return status, shot
        time.sleep(0.2)


def preview_train(console: Console, log: Path) -> dict:
    """The operator's preview train: on for 60 preview groups with a Snap among them, off, on again, then the
    console killed. The scripted line appends a train's rises when its line is released, so the log read after each
    step holds that train's whole pulses."""
    out: dict = {"before": len(log.read_text().splitlines())}
    out["on"] = console.call("PUT", "/api/triggers/preview", {"on": True})
    out["on_at"] = time.monotonic()
    out["rig"] = console.call("GET", "/api/rig")[1].get("preview_train")
    wait_previews(console, cameras=4, groups=30)
    out["snap"] = snap(console, "trained")
    wait_previews(console, cameras=4, groups=30)
    out["multiview"] = console.call("GET", "/api/multiview")
    out["off"] = console.call("PUT", "/api/triggers/preview", {"on": False})
    out["off_at"] = time.monotonic()
    out["first_train"] = log.read_text().splitlines()[out["before"]:]
    out["again"] = console.call("PUT", "/api/triggers/preview", {"on": True})
    out["again_at"] = time.monotonic()
    wait_previews(console, cameras=4, groups=15)
    console.proc.kill()
    out["killed_at"] = time.monotonic()
    # The node ends the train with the preview once the console's lease (5 s) runs out: its rises land in the log.
    deadline, before = time.monotonic() + 20, out["before"] + len(out["first_train"])
    while time.monotonic() < deadline and len(log.read_text().splitlines()) == before:
        time.sleep(0.2)
    out["ended_at"] = time.monotonic()
    out["second_train"] = log.read_text().splitlines()[before:]
    return out


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    d = tmp_path_factory.mktemp("snap-triggered")
    n1, endpoint1 = start_triggered_node(d / "n1")
    n2 = Node(d / "n2", extra_args=["--name", "n2"])
    rig = d / "rig.yaml"
    # A raw take codec, so the webcam delivers YUYV the node can keep losslessly. The exposure set is a take's
    # (the cold path's): a take places each pulse delay + exposure/2 ahead of its group; the console's preview
    # leaves the webcam at its own exposure, which the Snap's pulse is placed by.
    rig.write_text(f"version: 1\nnodes:\n  - name: n1\n    endpoint: {endpoint1}\n"
                   f"    cameras:\n      - {{name: cam0, controls: {{exposure_us: {EXPOSURE_US}}}}}\n      - {{name: syn0}}\n"
                   f"  - name: n2\n    endpoint: {n2.endpoint}\n"
                   "take:\n  size: 640x480\n  fps: 30\n  codec: ffv1\n")
    # The cold path first, while the nodes are idle: `coord snap` records the span from group 0 to the shot, the
    # output pulsing every group of it as in any take.
    cold = subprocess.run([str(COORD), "snap", "--rig", str(rig), "--name", "cold", "--takes-dir", str(d / "cold")],
                          capture_output=True, text=True, timeout=180)
    log = d / "n1" / "pulses.log"
    cold_rises = log.read_text().splitlines() if log.exists() else []
    console = Console(rig, d / "takes")
    frozen = False
    try:
        wait_previews(console, cameras=4)
        # The webcam's exposure as its node read it back: the cold take's, which it keeps while it previews.
        exposure = next(c["controls"]["exposure_us"] for c in console.call("GET", "/api/rig")[1]["cameras"] if (c["node"], c["camera"]) == ("n1", "cam0"))
        first = snap(console, "trig")
        rises_after_first = log.read_text().splitlines()[len(cold_rises):]
        # A burst: one pulse per shot, none between (3 shots 100 ms apart, every third group at 30 fps).
        burst = snap(console, "burst", count=3, every=100)
        burst_rises = log.read_text().splitlines()[len(cold_rises) + len(rises_after_first):]
        # n2 frozen as the Snap is asked: it cannot answer KeepStills (nor anything) until it is continued.
        n2.proc.send_signal(signal.SIGSTOP)
        frozen = True
        second = snap(console, "part")
        n2.proc.send_signal(signal.SIGCONT)
        frozen = False
        train = preview_train(console, log)
        yield d / "takes", first, second, rises_after_first, (d / "n1" / "node.stderr"), (cold, d / "cold", cold_rises), exposure, (burst, burst_rises), train
    finally:
        if frozen:
            n2.proc.send_signal(signal.SIGCONT)
        console.close()
        n1.terminate()
        try:
            n1.wait(timeout=15)
        except subprocess.TimeoutExpired:
            n1.kill()
        n2.cleanup()


def test_a_triggered_cameras_still_is_its_one_pulses_frame_at_the_shots_group(shots):
    takes, (status, shot), _, rises, node_log, _, exposure, _, _ = shots
    assert status == 200, shot
    assert shot["status"] == "complete", (shot, node_log.read_text()[-3000:])
    directory = takes / shot["take_id"]
    manifest = json.loads((directory / "manifest.json").read_text())
    stills = {(s["node"], s["camera"]): s for s in manifest["stills"]}
    assert sorted(stills) == [("n1", "cam0"), ("n1", "syn0"), ("n2", "cam0"), ("n2", "cam1")], sorted(stills)
    assert {s["group"] for s in stills.values()} == {shot["group"]}
    # Exactly one pulse, for the shot's group: no train runs while the console previews.
    assert len(rises) == 1 and rises[0].split()[0] == "sync", rises
    rise = int(rises[0].split()[1])
    instant = shot["center_us"]
    triggered = stills[("n1", "cam0")]
    cameras = {(c["node"], c["camera"]): c for c in manifest["cameras"]}
    t = cameras[("n1", "cam0")].get("trigger")
    assert t is not None and (t["output"], t["source"], t["pulses"]) == ("sync", "Line0", 1), t
    error = t["error_us"]
    assert 0 <= error["p50"] == error["p99"] == error["max"] < 5_000, t
    # The still's centre is the pulse's measured edge (the line's rise, on the node's clock) plus
    # the delay and half the exposure the webcam runs at (its frames report it; its control reads in 100 µs steps)...
    half = triggered["center_us"] - rise - DELAY_US
    assert abs(half - exposure / 2) <= CLOCK_US + 100, (triggered, rise, exposure)
    # ...and the edge led the group's instant by that much, so the centre is the instant, late by the edge's error.
    assert abs(instant - half - DELAY_US + error["max"] - rise) <= CLOCK_US, (instant, rise, half, error)
    assert abs(triggered["center_us"] - instant - error["max"]) <= CLOCK_US, (triggered, instant, error)
    assert all("trigger" not in c for k, c in cameras.items() if k != ("n1", "cam0")), cameras
    # The synthetic cameras' true centres (their stripes) are on the same group's instant.
    for key in (("n1", "syn0"), ("n2", "cam0"), ("n2", "cam1")):
        truth = stripe(directory / stills[key]["path"])
        assert truth is not None and abs(truth[2] - instant) <= SYNC_US, (key, truth, instant)
    # The node's sidecar became the manifest's block: only stills and the shot's documents remain.
    assert not list(directory.glob("*/*.json")) and not list(directory.glob("*/*.csv"))


def test_a_node_that_never_takes_the_snap_makes_a_partial_shot_naming_it_and_the_rest_is_sealed(shots):
    takes, _, (status, shot), _, _, _, _, _, _ = shots
    assert status == 200, shot
    assert shot["status"] == "partial", shot
    directory = takes / shot["take_id"]
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["status"] == "partial"
    assert sorted((s["node"], s["camera"]) for s in manifest["stills"]) == [("n1", "cam0"), ("n1", "syn0")]
    missing = [e for e in manifest["events"] if e["kind"] == "incomplete"]
    assert sorted(e["camera"] for e in missing) == ["cam0", "cam1"] and {e["node"] for e in missing} == {"n2"}, missing
    for e in missing:
        assert e["detail"].startswith(f"camera n2/{e['camera']} has no still of group {shot['group']}: ") and "n2" in e["detail"][20:], e
        assert "\n" not in e["detail"], e
    assert shot["message"] == missing[0]["detail"] or shot["message"] in [e["detail"] for e in missing], shot
    for s in manifest["stills"]:
        assert (directory / s["path"]).stat().st_size == s["bytes"]
    r = subprocess.run([*ASCMHL_VERIFY, str(directory)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_coord_snap_keeps_the_frame_of_the_shots_pulse_and_says_the_camera_was_triggered(shots):
    *_, (cold, takes, rises), _, _, _ = shots
    assert cold.returncode == 0, cold.stdout + cold.stderr
    [directory] = [p for p in takes.iterdir() if p.is_dir()]
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["kind"] == "stills" and manifest["status"] == "complete", manifest.get("events")
    stills = {(s["node"], s["camera"]): s for s in manifest["stills"]}
    group = stills[("n1", "cam0")]["group"]
    assert {s["group"] for s in stills.values()} == {group}
    # The span's take pulsed once per group from group 0 through the shot's, and the manifest says so.
    t = {(c["node"], c["camera"]): c for c in manifest["cameras"]}[("n1", "cam0")]["trigger"]
    assert (t["output"], t["source"]) == ("sync", "Line0") and t["pulses"] == len(rises) >= group + 1, (t, len(rises), group)
    assert "n1/cam0: triggered by sync on Line0" in cold.stdout, cold.stdout
    # The still is the frame of the shot group's pulse: centred its delay and half the set exposure after that
    # pulse's rise, which led the group's instant by as much (late by the generator's error only).
    instant = manifest["t0_us"] + group * manifest["frame_period_us"]
    lead = DELAY_US + EXPOSURE_US // 2
    rise = min((int(r.split()[1]) for r in rises), key=lambda r: abs(r - (instant - lead)))
    assert 0 <= rise - (instant - lead) < 5_000, (rise, instant)
    assert abs(stills[("n1", "cam0")]["center_us"] - rise - lead) <= CLOCK_US, (stills[("n1", "cam0")], rise)
    # So its centre is the synthetic cameras' instant, give or take the edge's error and their phase.
    assert json.loads((directory / "sync-report.json").read_text())["spread_us"]["max"] < 5_000


def test_a_burst_from_the_console_is_one_pulse_per_shot_each_still_its_own_pulses_frame(shots):
    takes, *_, exposure, ((status, shot), rises), _ = shots
    assert status == 200 and shot["status"] == "complete", shot
    manifest = json.loads((takes / shot["take_id"] / "manifest.json").read_text())
    groups = shot["groups"]
    assert len(groups) == 3 and all(b - a == 3 for a, b in zip(groups, groups[1:])), groups
    assert len(rises) == 3, rises
    mine = sorted((s for s in manifest["stills"] if (s["node"], s["camera"]) == ("n1", "cam0")), key=lambda s: s["shot"])
    assert [s["group"] for s in mine] == groups and [s["path"] for s in mine] == [f"n1/cam0_{k}.png" for k in range(3)], mine
    for still, rise in zip(mine, (int(r.split()[1]) for r in rises)):
        assert abs(still["center_us"] - rise - DELAY_US - exposure / 2) <= CLOCK_US + 100, (still, rise)
    t = {(c["node"], c["camera"]): c for c in manifest["cameras"]}[("n1", "cam0")]["trigger"]
    assert (t["output"], t["pulses"]) == ("sync", 3), t


PERIOD_US = 1_000_000 / 30


def test_the_operators_preview_train_pulses_every_group_until_off_and_ends_with_a_lost_console(shots):
    takes, *_, t = shots
    # On: n1 runs it (n2 has no trigger outputs and is not named as running), and the rig view says so.
    assert t["on"] == (200, {"on": True, "nodes": ["n1"]}), t["on"]
    assert t["rig"] == {"on": True, "nodes": ["n1"]}, t["rig"]
    status, mv = t["multiview"]
    assert status == 200 and ("n1", "cam0") in {(x["node"], x["camera"]) for x in mv["tiles"]}, mv
    # About one rise per preview group while it ran, a period apart, none after off.
    rises = [int(r.split()[1]) for r in t["first_train"]]
    assert t["off"] == (200, {"on": False, "nodes": []}), t["off"]
    assert rises and all(r.split()[0] == "sync" for r in t["first_train"]), t["first_train"]
    expected = (t["off_at"] - t["on_at"]) * 30
    assert 0.8 * expected <= len(rises) <= 1.1 * expected + 5, (len(rises), expected)
    gaps = [b - a for a, b in zip(rises, rises[1:])]
    # One per group: no second pulse of a group (a Snap's own pulse), at most a rare skipped group under load.
    assert min(gaps) > PERIOD_US / 2 and sorted(gaps)[len(gaps) // 2] == pytest.approx(PERIOD_US, abs=1_000), gaps
    assert rises[0] >= t["on_at"] * 1e6 - 500_000 and rises[-1] <= t["off_at"] * 1e6, (rises[0], rises[-1], t)
    # A Snap while the train runs keeps the train's frame of the shot's group: no pulse of its own.
    status, shot = t["snap"]
    assert status == 200 and shot["status"] == "complete", shot
    manifest = json.loads((takes / shot["take_id"] / "manifest.json").read_text())
    assert {(s["node"], s["camera"], s["group"]) for s in manifest["stills"]} >= {("n1", "cam0", shot["group"])}, manifest["stills"]
    # Again on, then the console killed: the node's rises stop with the preview's lease, within a few seconds.
    assert t["again"][0] == 200, t["again"]
    again = [int(r.split()[1]) for r in t["second_train"]]
    assert again, f"the train never ended after the console was killed ({t['ended_at'] - t['killed_at']:.1f} s waited)"
    assert again[0] >= t["again_at"] * 1e6 - 500_000, (again[0], t["again_at"])
    assert again[-1] - t["killed_at"] * 1e6 < 8_000_000, (again[-1], t["killed_at"])
