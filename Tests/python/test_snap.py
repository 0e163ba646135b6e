"""Synchronized stills (issue 39, CONTRACT §18): `coord demo --snap` on a local rig of real coord-node processes,
6 synthetic cameras at 6 sizes, a 5-shot burst 200 ms apart. One demo is shared by every assertion: each still
decodes (ffmpeg) to its camera's size, its SYNCSTRIPE gives the frame's true exposure centre and the sensor's own
frame counter, the shots' true spreads are the rig's sync, the report's claim is held against them, the burst is
on the grid, and the ASC's own `ascmhl verify` passes. Bad input is one sentence and exit 2."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
COORD = os.environ.get("COORD", str(ROOT / ".build/debug/coord"))
ASCMHL_VERIFY = [str(Path(sys.executable).parent / "ascmhl-debug"), "verify"]

# Three sizes the synthetic cameras offer: what the encoders of this 2-core machine hold while the span records.
SIZES = ["640x480", "320x240", "1280x720", "320x240", "640x480", "320x240"]
SHOTS, EVERY_MS, FPS = 5, 200, 30


def stripe(image: Path):
    """The still's SYNCSTRIPE (CONTRACT §5) as (ordinal, sensor frame counter, true centre µs), None if unreadable."""
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", str(image), "-vf", "crop=104:64:0:0", "-f", "rawvideo",
                          "-pix_fmt", "gray", "-"], capture_output=True, timeout=60)
    assert raw.returncode == 0, f"ffmpeg cannot decode {image}: {raw.stderr.decode().strip()}"
    frame = np.frombuffer(raw.stdout, np.uint8).reshape(64, 104)
    bits = (frame.reshape(8, 8, 13, 8)[:, 2:6, :, 2:6].mean(axis=(1, 3)).reshape(-1) > 125).astype(np.uint8)
    data = np.packbits(bits).tobytes()
    crc = 0
    for byte in data[:12]:
        crc ^= byte
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    if data[0] != 0xA5 or crc != data[12]:
        return None
    return data[1], int.from_bytes(data[2:6], "big"), int.from_bytes(data[6:12], "big")


def probe_size(image: Path) -> tuple[int, int]:
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height",
                          "-of", "csv=p=0", str(image)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    w, h = out.stdout.strip().split(",")[:2]
    return int(w), int(h)


@pytest.fixture(scope="module")
def burst(tmp_path_factory):
    takes = tmp_path_factory.mktemp("snap") / "takes"
    proc = subprocess.run([COORD, "demo", "--snap", "--count", str(SHOTS), "--every", str(EVERY_MS), "--nodes", "3",
                           "--cameras-per-node", "2", "--camera-sizes", ",".join(SIZES), "--fps", str(FPS),
                           "--seed", "39", "--takes-dir", str(takes)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    dirs = [d for d in takes.iterdir() if d.is_dir()]
    assert len(dirs) == 1, dirs
    shot = dirs[0]
    manifest = json.loads((shot / "manifest.json").read_text())
    report = json.loads((shot / "sync-report.json").read_text())
    truth = {}
    for still in manifest["stills"]:
        decoded = stripe(shot / still["path"])
        assert decoded is not None, f"{still['path']}: the SYNCSTRIPE does not decode"
        truth[still["path"]] = decoded
    return proc, shot, manifest, report, truth


def test_every_camera_has_one_lossless_still_per_shot_at_its_own_size(burst):
    _, shot, manifest, _, truth = burst
    assert manifest["kind"] == "stills" and manifest["status"] == "complete"
    cameras = sorted((c["node"], c["camera"]) for c in manifest["cameras"])
    assert len(cameras) == 6
    stills = manifest["stills"]
    assert len(stills) == 6 * SHOTS
    keys = {"node", "camera", "shot", "group", "center_us", "width", "height", "path", "bytes", "xxh128"}
    assert all(keys <= s.keys() for s in stills)
    # Cameras in rig order (node by node) took the sizes in turn.
    expected = {(f"node-{n + 1}", f"cam{k}"): SIZES[n * 2 + k] for n in range(3) for k in range(2)}
    for s in stills:
        assert s["path"] == f"{s['node']}/{s['camera']}_{s['shot']}.png"
        path = shot / s["path"]
        assert path.stat().st_size == s["bytes"]
        assert probe_size(path) == (s["width"], s["height"]) and f"{s['width']}x{s['height']}" == expected[(s["node"], s["camera"])]
    # No video of the span is left: the shot is its stills.
    assert not list(shot.rglob("*.mkv")) and not list(shot.rglob("*.frames.csv"))
    # The stripe's ordinal is the camera's, as the manifest numbers them.
    ordinal = {(c["node"], c["camera"]): c["ordinal"] for c in manifest["cameras"]}
    assert all(truth[s["path"]][0] == ordinal[(s["node"], s["camera"])] for s in stills)


def test_the_stills_of_a_shot_share_one_instant_and_the_report_says_how_closely(burst):
    _, _, manifest, report, truth = burst
    spreads = []
    for k in range(SHOTS):
        centres = [truth[s["path"]][2] for s in manifest["stills"] if s["shot"] == k]
        assert len(centres) == 6
        spreads.append(max(centres) - min(centres))
    # The sync figure of video takes on loopback: the true centres within 50 µs of each other (p99 over the shots).
    assert np.percentile(spreads, 99) <= 50, spreads
    claimed = report["spread_us"]["max"]
    assert report["groups"] == SHOTS and report["groups_measured"] == SHOTS
    assert abs(claimed - max(spreads)) <= max(20, 0.25 * max(spreads)), (report["spread_us"], spreads)
    # The manifest's centres are the report's: one shot's spread is the largest minus the smallest of them.
    claimed_per_shot = [max(c) - min(c) for c in ([s["center_us"] for s in manifest["stills"] if s["shot"] == k]
                                                  for k in range(SHOTS))]
    assert max(claimed_per_shot) == claimed


def test_a_burst_keeps_every_shot_on_the_grid(burst):
    _, _, manifest, _, truth = burst
    step = EVERY_MS * FPS // 1000
    for camera in {(s["node"], s["camera"]) for s in manifest["stills"]}:
        mine = sorted((s for s in manifest["stills"] if (s["node"], s["camera"]) == camera), key=lambda s: s["shot"])
        g0 = mine[0]["group"]
        assert [s["group"] for s in mine] == [g0 + k * step for k in range(SHOTS)]
        # The sensor's own frame counter: the same whole number of its frames between shots (it may run at a rate
        # the shot's groups divide), so the shots are exactly 200 ms apart on its clock.
        counters = [truth[s["path"]][1] for s in mine]
        per_shot = counters[1] - counters[0]
        assert per_shot >= 1 and step % per_shot == 0, counters
        assert [c - counters[0] for c in counters] == [k * per_shot for k in range(SHOTS)], counters
        centres = [truth[s["path"]][2] for s in mine]
        gaps = [b - a for a, b in zip(centres, centres[1:])]
        assert all(abs(g - EVERY_MS * 1000) <= 50 for g in gaps), gaps


def test_the_shot_is_sealed_with_asc_mhl(burst):
    _, shot, manifest, _, _ = burst
    generation = "".join(p.read_text() for p in (shot / "ascmhl").glob("*.mhl"))
    for s in manifest["stills"]:
        assert f">{s['path']}</path>" in generation and s["xxh128"] in generation
    r = subprocess.run([*ASCMHL_VERIFY, str(shot)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("args, words", [
    (["--snap", "--count", "2", "--every", "7"], "--every 7 ms is not a whole number of frame periods at 30 fps"),
    (["--snap", "--count", "0"], "--count must be between 1 and 1000"),
    (["--snap", "--format", "bmp"], "--format must be png, tiff or jpeg"),
])
def test_bad_shots_are_one_sentence(tmp_path, args, words):
    r = subprocess.run([COORD, "demo", "--takes-dir", str(tmp_path), *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not list(tmp_path.iterdir())


def test_a_size_no_camera_can_take_is_one_sentence(tmp_path):
    rig = tmp_path / "rig.yaml"
    rig.write_text("version: 1\nnodes:\n  - name: box1\n    endpoint: tcp://127.0.0.1:9\n")
    r = subprocess.run([COORD, "snap", "--rig", str(rig), "--size", "99999x1", "--takes-dir", str(tmp_path / "t")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--size must be max or an even WxH" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_coord_snap_on_a_rig_of_real_nodes_writes_one_tiff_per_camera(tmp_path):
    """`coord snap --rig` across two coord-node processes, each camera at its rig-file size: one still per camera,
    named <node>/<camera>.tiff (one shot: no number), each holding its frame's stripe, all on one instant."""
    from conftest import Node
    nodes = []
    try:
        for name, cameras in (("left", "cam0,cam1"), ("right", "cam0")):
            d = tmp_path / name
            d.mkdir()
            nodes.append(Node(d, extra_args=["--name", name, "--synthetic", cameras]))
        rig = tmp_path / "rig.yaml"
        rig.write_text("version: 1\nnodes:\n"
                       f"  - name: left\n    endpoint: {nodes[0].endpoint}\n    cameras:\n"
                       "      - name: cam0\n        size: 1280x720\n      - name: cam1\n"
                       f"  - name: right\n    endpoint: {nodes[1].endpoint}\n"
                       "take:\n  size: 320x240\n")
        # The plan first: the span's budget and the shot's bytes against the staging disks and the takes directory.
        r = subprocess.run([COORD, "plan", "--rig", str(rig), "--snap", "--count", "5", "--every", "200", "--format", "tiff"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "the shot: 5 shot(s) of 3 camera(s), tiff" in r.stdout and "the shot fits its disks." in r.stdout, r.stdout
        assert "  left: span " in r.stdout and "collection into " in r.stdout, r.stdout
        r = subprocess.run([COORD, "snap", "--rig", str(rig), "--name", "turntable", "--format", "tiff",
                            "--takes-dir", str(tmp_path / "takes")], capture_output=True, text=True, timeout=180)
        assert r.returncode == 0, r.stderr[-3000:]
        assert "a cold snap plans, aligns clocks and arms every camera first" in r.stderr
        shot = next((tmp_path / "takes").iterdir())
        assert "-turntable-" in shot.name and shot.name in r.stdout
        manifest = json.loads((shot / "manifest.json").read_text())
        assert manifest["kind"] == "stills" and manifest["status"] == "complete"
        stills = {s["path"]: s for s in manifest["stills"]}
        assert sorted(stills) == ["left/cam0.tiff", "left/cam1.tiff", "right/cam0.tiff"]
        assert len({s["group"] for s in stills.values()}) == 1
        sizes = {"left/cam0.tiff": (1280, 720), "left/cam1.tiff": (320, 240), "right/cam0.tiff": (320, 240)}
        centres = []
        for path, s in stills.items():
            assert probe_size(shot / path) == sizes[path] == (s["width"], s["height"])
            decoded = stripe(shot / path)
            assert decoded is not None, path
            centres.append(decoded[2])
        assert max(centres) - min(centres) <= 50, centres
        r = subprocess.run([*ASCMHL_VERIFY, str(shot)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        for n in nodes:
            n.kill()


def test_size_max_takes_each_camera_at_its_largest_mode(tmp_path):
    """`--size max`: the synthetic camera's largest mode (3840x2160), at a rate its encoder holds (2 fps), whatever
    the rig file's take.size says."""
    from conftest import Node
    node = Node(tmp_path, extra_args=["--name", "solo", "--synthetic", "cam0"])
    try:
        rig = tmp_path / "rig.yaml"
        rig.write_text(f"version: 1\nnodes:\n  - name: solo\n    endpoint: {node.endpoint}\ntake:\n  fps: 2\n  size: 320x240\n")
        r = subprocess.run([COORD, "snap", "--rig", str(rig), "--size", "max", "--takes-dir", str(tmp_path / "takes")],
                           capture_output=True, text=True, timeout=180)
        assert r.returncode == 0, r.stderr[-3000:]
        assert "the shot took " in r.stderr and "planning, clock alignment and arming come first" in r.stderr
        shot = next((tmp_path / "takes").iterdir())
        manifest = json.loads((shot / "manifest.json").read_text())
        [still] = manifest["stills"]
        assert still["path"] == "solo/cam0.png" and (still["width"], still["height"]) == (3840, 2160)
        assert probe_size(shot / still["path"]) == (3840, 2160)
        assert stripe(shot / still["path"]) is not None
    finally:
        node.kill()
