"""V4L2 cameras on a real coord-node process: `--list-cameras`, a configured device that is missing, and whole
takes through `coord start-take --rig` from a scripted UVC webcam (`coord-node-scripted --v4l2-script`), checked by
scripts/check-take.py as a demo take is: MJPEG muxed as it arrives, YUYV converted and encoded, a camera
unplugged mid-take, frames the driver dropped, and a camera that cannot start streaming.

No real camera exists on the machines this was built on: the scripted driver (Sources/V4L2Simulator/ScriptedV4L2Driver.swift)
answers every ioctl like uvcvideo with a C920-like webcam, in real time, and paints the test pattern and the
SYNCSTRIPE, so the stripes give the truth each frame's centre is checked against. It is linked into the test-only
coord-node-scripted (coord-node's commands, V4L2 scripted), never into coord-node."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from conftest import Node, node_binary

ROOT = Path(__file__).resolve().parents[2]
COORD = Path(os.environ.get("COORD") or ROOT / ".build" / "debug" / "coord")

_spec = importlib.util.spec_from_file_location("check_take", ROOT / "scripts" / "check-take.py")
check_take = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_take)


def scripted_node_binary() -> Path:
    """coord-node-scripted: coord-node with the scripted V4L2 driver behind `--v4l2-script` (built by swift build)."""
    path = Path(os.environ.get("COORD_NODE_SCRIPTED") or ROOT / ".build" / "debug" / "coord-node-scripted")
    if not path.is_file() or not os.access(path, os.X_OK):
        pytest.fail(f"the coord-node-scripted binary is missing at {path}; build it (swift build) or set COORD_NODE_SCRIPTED.")
    return path


def run(args, timeout=60) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def script(path: Path, devices: dict) -> Path:
    path.write_text(json.dumps({"devices": devices}))
    return path


def v4l2_node(tmp_path: Path, name: str, cameras: dict[str, str], script_path: Path) -> Node:
    """A node with only V4L2 cameras ({name: device}), every device access scripted."""
    d = tmp_path / name
    d.mkdir(parents=True, exist_ok=True)
    args = ["--name", name, "--synthetic", "", "--v4l2-script", str(script_path)]
    for camera, device in cameras.items():
        args += ["--v4l2", f"{camera}={device}"]
    return Node(d, extra_args=args, binary=scripted_node_binary())


def rig(path: Path, node: Node, name: str, codec: str, size: str = "640x480", fps: int = 30, extra: str = "") -> Path:
    path.write_text(f"version: 1\nnodes:\n  - name: {name}\n    endpoint: {node.endpoint}\n"
                    f"take:\n  size: {size}\n  fps: {fps}\n  codec: {codec}\n{extra}")
    return path


def take(tmp_path: Path, rig_path: Path, seconds: float) -> tuple[subprocess.CompletedProcess, Path | None]:
    takes = tmp_path / "takes"
    done = run([COORD, "start-take", "--rig", rig_path, "--seconds", seconds, "--takes-dir", takes], timeout=120)
    dirs = sorted(takes.iterdir()) if takes.exists() else []
    return done, (dirs[0] if dirs else None)


def rows(take_dir: Path, node: str, camera: str) -> list[list[str]]:
    lines = (take_dir / node / f"{camera}.frames.csv").read_text().splitlines()
    return [l.split(",") for l in lines[1:] if l]


def ffprobe_codec(mkv: Path) -> str:
    out = run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=codec_name",
               "-of", "csv=p=0", mkv])
    return out.stdout.strip()


def decodes_cleanly(mkv: Path) -> bool:
    out = run(["ffmpeg", "-v", "error", "-i", mkv, "-f", "null", "-"], timeout=120)
    return out.returncode == 0 and not out.stderr.strip()


def assert_estimates_near_truth(figures: dict, node: str, camera: str, bound_us: int = 1000):
    """frames.csv's centres (from the buffer timestamps) against the stripes' true exposure centres."""
    cam = next(c for c in figures["cameras"] if c["node"] == node and c["camera"] == camera)
    assert cam["estimate_error_us"]["p99"] < bound_us, cam


UVC = {"profile": "uvc-webcam", "timestampJitterUs": 30, "rateErrorPPM": 20}


# ---- listing and start-up ----

def test_list_cameras_on_this_machine_exits_0_with_a_clear_answer():
    done = run([node_binary(), "--list-cameras"])
    assert done.returncode == 0, done.stderr
    if not any(Path("/dev").glob("video*")):
        # Then the GenICam cameras: none, and no GigE Vision discovery was sent (no --genicam-interface); then libcamera's.
        assert done.stdout.strip() == ("no cameras found (no /dev/video* devices)\nno GenICam cameras found; GigE Vision not looked for"
                                       " (name the interface its cameras are on with --genicam-interface IFACE)"
                                       "\nlibcamera: no cameras found"), done.stdout
    else:
        assert done.stdout.strip().splitlines()[-1], done.stdout


def test_list_cameras_shows_formats_and_why_a_device_was_skipped(tmp_path):
    s = script(tmp_path / "cams.json", {
        "/dev/video0": UVC, "/dev/video1": {"profile": "metadata-node"},
        "/dev/video2": {"profile": "uvc-webcam", "openError": "EBUSY"},
        "/dev/video4": {"profile": "uvc-webcam", "openError": "EACCES"}})
    done = run([scripted_node_binary(), "--list-cameras", "--v4l2-script", s])
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert re.search(r"^/dev/video0\n  driver: uvcvideo\n  card: HD Pro Webcam C920\n  bus: usb-0000:00:14\.0-1", out, re.M), out
    assert "MJPG (Motion-JPEG):" in out and "1920x1080 @ 30, 24, 20, 15, 10, 5 fps" in out, out
    assert "YUYV (YUYV 4:2:2):" in out and "1280x720 @ 10, 5 fps" in out, out
    assert re.search(r"^  skipped: /dev/video1 .*is not a video capture node", out, re.M), out
    assert "  skipped: /dev/video2 is busy" in out, out
    assert "  skipped: /dev/video4 cannot be opened: permission denied" in out, out
    assert out.strip().splitlines()[-1].startswith("1 camera(s) coord can record from: /dev/video0"), out


@pytest.mark.skipif(Path("/dev/video0").exists(), reason="this machine has a /dev/video0")
def test_a_node_asked_for_a_missing_device_fails_at_once_naming_it(tmp_path):
    done = run([node_binary(), "--name", "n1", "--endpoint", "tcp://127.0.0.1:*", "--staging", tmp_path / "staging",
                "--v4l2", "cam0=/dev/video0"], timeout=30)
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert done.stdout == "", "no READY line"
    lines = [l for l in done.stderr.splitlines() if l.strip()]
    assert lines == ["coord-node: camera cam0: /dev/video0 does not exist (is the camera plugged in?)."], done.stderr


def test_a_node_whose_camera_is_busy_or_not_a_camera_fails_at_once(tmp_path):
    s = script(tmp_path / "cams.json", {"/dev/video0": {"profile": "uvc-webcam", "openError": "EBUSY"},
                                        "/dev/video1": {"profile": "metadata-node"}})
    for device, words in [("/dev/video0", "is busy"), ("/dev/video1", "is not a video capture node")]:
        done = run([scripted_node_binary(), "--name", "n1", "--endpoint", "tcp://127.0.0.1:*", "--staging", tmp_path / "staging",
                    "--v4l2", f"cam0={device}", "--v4l2-script", s], timeout=30)
        lines = [l for l in done.stderr.splitlines() if l.strip()]
        assert done.returncode == 1 and len(lines) == 1, done.stderr
        assert lines[0].startswith(f"coord-node: camera cam0: {device}") and words in lines[0], lines


def test_the_handshake_declares_what_the_device_offers(tmp_path, zctx, pb):
    from conftest import Client
    s = script(tmp_path / "cams.json", {"/dev/video0": UVC})
    node = v4l2_node(tmp_path, "n1", {"cam0": "/dev/video0"}, s)
    client = Client(zctx, node.endpoint, pb)
    try:
        reply = client.hello()
        [cam] = reply.cameras
        assert cam.name == "cam0" and cam.source == "v4l2" and cam.device == "/dev/video0", cam
        formats = [(f.pixel_format, f.width, f.height, f.min_frame_period_us, f.max_frame_period_us) for f in cam.formats]
        # MJPG first at every size (an mjpeg take costs no encoding), then the raw format.
        assert formats[:2] == [("MJPG", 640, 480, 33333, 200000), ("YUYV", 640, 480, 33333, 200000)], formats
        assert ("YUYV", 1280, 720, 100000, 200000) in formats and ("MJPG", 1920, 1080, 33333, 200000) in formats, formats
        assert set(cam.codecs) == {"mjpeg", "ffv1", "h264"}
    finally:
        client.close()
        node.cleanup()


# ---- takes from a scripted webcam ----

def test_an_mjpeg_take_muxes_the_cameras_jpegs_and_passes_check_take(tmp_path):
    s = script(tmp_path / "cams.json", {"/dev/video0": UVC})
    node = v4l2_node(tmp_path, "n1", {"cam0": "/dev/video0"}, s)
    try:
        done, take_dir = take(tmp_path, rig(tmp_path / "rig.yaml", node, "n1", "mjpeg"), 3)
        assert done.returncode == 0, done.stdout + done.stderr
        failures, figures = check_take.check(take_dir)
        assert not failures, failures
        assert ffprobe_codec(take_dir / "n1" / "cam0.mkv") == "mjpeg"
        log = node.stderr_tail(200)
        assert re.search(r"format=MJPG .*passthrough=true", log), log
        assert_estimates_near_truth(figures, "n1", "cam0")
        # The camera cannot be steered: the arm says so, and the report gives the measured phase.
        assert "cannot steer its frame timing" in done.stderr, done.stderr
        report = json.loads((take_dir / "sync-report.json").read_text())
        # The phase the report states is the one the frames really had (truth from the stripes), not the grid.
        stated = report["cameras"][0]["phase_error_us"]["p99"]
        true = next(c for c in figures["cameras"] if c["camera"] == "cam0")["true_phase_us"]["p99"]
        assert abs(stated - true) < 1000, (stated, true)
    finally:
        node.cleanup()


def test_a_camera_that_takes_an_interval_while_streaming_is_re_phased_onto_the_grid(tmp_path):
    # vivid-like: S_PARM while streaming runs from the next frame on. A 3000 ppm fast clock drifts the phase by
    # 3 ms a second, which the node takes out a step (one frame at 1/24 s: +8.3 ms) at a time.
    s = script(tmp_path / "cams.json", {"/dev/video0": {**UVC, "rateErrorPPM": 3000, "sParmWhileStreaming": "resync"}})
    node = v4l2_node(tmp_path, "n1", {"cam0": "/dev/video0"}, s)
    try:
        done, take_dir = take(tmp_path, rig(tmp_path / "rig.yaml", node, "n1", "mjpeg"), 5)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "re-phases it onto the grid" in done.stderr, done.stderr
        failures, figures = check_take.check(take_dir)
        assert not failures, failures
        assert "camera re-phased" in node.stderr_tail(400)
        true = next(c for c in figures["cameras"] if c["camera"] == "cam0")["true_phase_us"]["p99"]
        # A step (+8.3 or +16.7 ms: this webcam offers 24 and 20 fps) is taken once the median of 15 frames is
        # past −5 ms, and the drift goes on for that window: about −7 ms at worst.
        assert true < 9_000, true
    finally:
        node.cleanup()
    # The same camera answering EBUSY, as uvcvideo does: left alone, it drifts (the baseline).
    s = script(tmp_path / "cams2.json", {"/dev/video0": {**UVC, "rateErrorPPM": 3000}})
    node = v4l2_node(tmp_path / "base", "n1", {"cam0": "/dev/video0"}, s)
    try:
        done, take_dir = take(tmp_path / "base", rig(tmp_path / "rig2.yaml", node, "n1", "mjpeg"), 5)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "cannot steer its frame timing" in done.stderr and "refused a frame interval" in done.stderr, done.stderr
        _, figures = check_take.check(take_dir)
        free = next(c for c in figures["cameras"] if c["camera"] == "cam0")["true_phase_us"]["p99"]
        assert free > 9_000, free
    finally:
        node.cleanup()


def test_a_yuyv_take_is_converted_and_encoded_with_the_take_codec(tmp_path):
    # End-of-frame timestamps this time: the centre comes from the readout assumption.
    s = script(tmp_path / "cams.json", {"/dev/video0": {**UVC, "timestampSource": "eof"}})
    node = v4l2_node(tmp_path, "n1", {"cam0": "/dev/video0"}, s)
    try:
        done, take_dir = take(tmp_path, rig(tmp_path / "rig.yaml", node, "n1", "ffv1"), 3)
        assert done.returncode == 0, done.stdout + done.stderr
        failures, figures = check_take.check(take_dir)
        assert not failures, failures
        assert ffprobe_codec(take_dir / "n1" / "cam0.mkv") == "ffv1"
        log = node.stderr_tail(200)
        assert re.search(r"format=YUYV .*passthrough=false", log), log
        assert_estimates_near_truth(figures, "n1", "cam0")
    finally:
        node.cleanup()


def test_a_camera_unplugged_mid_take_ends_cleanly_and_the_other_records_every_group(tmp_path):
    # About 2 s of pre-roll at 30 fps, then ~1.5 s of the take, then the cable is pulled.
    s = script(tmp_path / "cams.json", {"/dev/video0": {**UVC, "unplugAfterFrames": 110},
                                        "/dev/video2": {**UVC, "timestampSource": "eof"}})
    node = v4l2_node(tmp_path, "n1", {"cam0": "/dev/video0", "cam1": "/dev/video2"}, s)
    try:
        done, take_dir = take(tmp_path, rig(tmp_path / "rig.yaml", node, "n1", "mjpeg"), 4)
        assert done.returncode == 4, done.stdout + done.stderr
        last = [l for l in done.stderr.splitlines() if l.strip()][-1]
        assert "n1/cam0" in last and "/dev/video0" in last, last
        manifest = json.loads((take_dir / "manifest.json").read_text())
        assert manifest["status"] == "partial"
        groups = manifest["groups"]
        ended = [e for e in manifest["events"] if e["kind"] == "camera-ended"]
        assert len(ended) == 1 and ended[0]["node"] == "n1" and ended[0]["camera"] == "cam0", manifest["events"]
        assert "/dev/video0" in ended[0]["detail"] and "unplugged" in ended[0]["detail"], ended
        # The unplugged camera's file ends where it was pulled, plays, and has a row for every frame.
        cam0 = rows(take_dir, "n1", "cam0")
        assert 0 < len(cam0) < groups, (len(cam0), groups)
        assert check_take.ffprobe_frames(take_dir / "n1" / "cam0.mkv") == len(cam0)
        assert decodes_cleanly(take_dir / "n1" / "cam0.mkv")
        # The other camera lost nothing.
        cam1 = rows(take_dir, "n1", "cam1")
        assert len(cam1) == groups and not [r for r in cam1 if r[3] == "dup"]
        failures, _ = check_take.check(take_dir)
        expected = f"{len(cam0)} rows for {groups} groups", f"counts {len(cam0)} frames"
        assert failures and all(f.startswith("n1/cam0:") and any(e in f for e in expected) for f in failures), failures
    finally:
        node.cleanup()


def test_frames_the_driver_dropped_are_dup_rows_counted_as_dropped(tmp_path):
    # Sequence numbers count from the last STREAMON (about 2 s of pre-roll at 30 fps): these fall inside the take.
    s = script(tmp_path / "cams.json", {"/dev/video0": {**UVC, "dropSequences": [95, 130]}})
    node = v4l2_node(tmp_path, "n1", {"cam0": "/dev/video0"}, s)
    try:
        # A dup is read as a node not keeping up; here it is the camera, so the pressure policy must not act.
        extra = "pressure:\n  serious: none\n  critical: none\n"
        done, take_dir = take(tmp_path, rig(tmp_path / "rig.yaml", node, "n1", "mjpeg", extra=extra), 4)
        assert done.returncode == 0, done.stdout + done.stderr
        failures, _ = check_take.check(take_dir)
        assert not failures, failures
        manifest = json.loads((take_dir / "manifest.json").read_text())
        [cam] = manifest["cameras"]
        dups = [r for r in rows(take_dir, "n1", "cam0") if r[3] == "dup"]
        assert 1 <= cam["dropped"] <= 2 and cam["dropped"] == len(dups), (cam, dups)
        # Each dup repeats the frame before it; the frame after it is a later sensor frame (its counter jumps).
        counters = [st[1] for st in check_take.stripes(take_dir / "n1" / "cam0.mkv")]
        jumps = sum(1 for a, b in zip(counters, counters[1:]) if b == a + 2)
        assert jumps == len(dups), counters
    finally:
        node.cleanup()


def test_a_camera_that_cannot_stream_fails_the_arm_naming_it(tmp_path):
    s = script(tmp_path / "cams.json", {"/dev/video0": {**UVC, "streamonError": "ENOSPC"}})
    node = v4l2_node(tmp_path, "n1", {"cam0": "/dev/video0"}, s)
    try:
        done, take_dir = take(tmp_path, rig(tmp_path / "rig.yaml", node, "n1", "mjpeg"), 2)
        assert done.returncode == 1, done.stdout + done.stderr
        last = [l for l in done.stderr.splitlines() if l.strip()][-1]
        assert "nothing was recorded" in last and "n1/cam0" in last and "VIDIOC_STREAMON" in last and "USB bandwidth" in last, last
        assert take_dir is None or not any(take_dir.iterdir())
    finally:
        node.cleanup()


def test_a_rate_the_camera_does_not_offer_fails_the_arm_with_what_it_offers(tmp_path):
    s = script(tmp_path / "cams.json", {"/dev/video0": UVC})
    node = v4l2_node(tmp_path, "n1", {"cam0": "/dev/video0"}, s)
    try:
        # 1280x720 YUYV runs at most 10 fps; MJPG could, but only an mjpeg take records MJPG.
        done, _ = take(tmp_path, rig(tmp_path / "rig.yaml", node, "n1", "ffv1", size="1280x720", fps=30), 2)
        assert done.returncode == 1, done.stdout + done.stderr
        last = [l for l in done.stderr.splitlines() if l.strip()][-1]
        assert "n1/cam0" in last and "/dev/video0 cannot deliver 1280x720 at 30 fps for ffv1" in last, last
        assert "YUYV at 10, 5 fps" in last and "codec mjpeg" in last, last
    finally:
        node.cleanup()


def test_the_console_sets_a_scripted_webcams_controls_through_its_ioctls(tmp_path):
    """`coord console` over a node whose camera is the scripted uvcvideo webcam: PUT controls reach the device as
    VIDIOC_S_CTRL (the applied values come back from VIDIOC_G_CTRL, in the device's own steps) and a value
    outside the device's range (from VIDIOC_QUERYCTRL) is 422 with the sentence."""
    import signal
    import urllib.error
    import urllib.request
    s = script(tmp_path / "cams.json", {"/dev/video0": UVC})
    node = v4l2_node(tmp_path, "n1", {"cam0": "/dev/video0"}, s)
    console = subprocess.Popen([str(COORD), "console", "--rig", str(rig(tmp_path / "rig.yaml", node, "n1", "mjpeg")),
                                "--listen", "127.0.0.1:0", "--takes-dir", str(tmp_path / "takes")],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        match = re.search(r"^CONSOLE (http://[\d.:]+)/\?token=(\S+)$", console.stdout.readline().strip())
        base, auth = match.group(1), {"Authorization": f"Bearer {match.group(2)}"}

        def put(body):
            request = urllib.request.Request(base + "/api/cameras/n1/cam0/controls", data=json.dumps(body).encode(),
                                             method="PUT", headers={"Content-Type": "application/json", **auth})
            try:
                with urllib.request.urlopen(request, timeout=10) as r:
                    return r.status, json.loads(r.read())
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read())

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until the console has reached the node
            with urllib.request.urlopen(urllib.request.Request(base + "/api/rig", headers=auth), timeout=10) as r:
                if all(n["reachable"] for n in json.loads(r.read())["nodes"]):
                    break
            time.sleep(0.2)
        # Before the camera is open: checked against the ranges the device declared at the node's start.
        status, answer = put({"exposure_us": 900000})
        assert status == 422, answer
        assert "n1/cam0" in answer["error"] and "exposure_us" in answer["error"] and "300…204700" in answer["error"], answer
        while time.monotonic() < deadline:  # until the camera previews (opened, streaming)
            try:
                with urllib.request.urlopen(urllib.request.Request(base + "/api/multiview", headers=auth), timeout=10) as r:
                    break
            except urllib.error.HTTPError:
                time.sleep(0.2)
        # Before anyone sets one, the rig shows the device's values as its node read them back (VIDIOC_G_CTRL).
        def shown():
            with urllib.request.urlopen(urllib.request.Request(base + "/api/rig", headers=auth), timeout=10) as r:
                return json.loads(r.read())["cameras"][0]["controls"]
        while time.monotonic() < deadline and set(shown()) != {"exposure_us", "gain_db", "white_balance_k", "focus"}:
            time.sleep(0.2)
        current = shown()
        assert current.get("white_balance_k") == 5000 and current.get("exposure_us", 1) % 100 == 0, current
        status, answer = put({"exposure_us": 10050})
        assert status == 200, answer
        # Exposure goes to the device in its 100 µs units; the answer is what VIDIOC_G_CTRL read back.
        assert answer["controls"]["exposure_us"] == 10000
        status, answer = put({"white_balance_k": 4500, "focus": 0.5, "gain_db": 64})
        assert status == 200, answer
        assert answer["controls"]["white_balance_k"] == 4500 and answer["controls"]["gain_db"] == 64
        assert answer["controls"]["focus"] == pytest.approx(0.5, abs=0.02)
        status, answer = put({"exposure_us": 900000})
        assert status == 422, answer
        assert "n1/cam0" in answer["error"] and "exposure_us" in answer["error"] and "300…204700" in answer["error"], answer
        log = node.stderr_tail(200)
        assert "controls set" in log, log
    finally:
        console.send_signal(signal.SIGINT)
        try:
            console.wait(timeout=20)
        except subprocess.TimeoutExpired:
            console.kill()
        node.cleanup()
