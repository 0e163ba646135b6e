"""A console Snap at a size a V4L2 webcam does not preview at (issue 39 item 2, CONTRACT §18): node n1
(coord-node-scripted) has the scripted uvcvideo webcam (a C920's formats: YUYV 640x480 at up to 30 fps, 1920x1080
only at 5), previewing at the take's 640x480 YUYV. A Snap at `max` switches it through VIDIOC_S_FMT to its largest
mode for the shot and back: the still is 1920x1080, the manifest and sync report say it came through a mode switch
with its phase error as measured, and the webcam previews at 640x480 again afterwards (a plain Snap's still is that
size, with no switch)."""
from __future__ import annotations

import json
import subprocess

import pytest
from PIL import Image

from test_snap_triggered import Console, snap, wait_previews
from test_v4l2_node import UVC, script, v4l2_node


@pytest.fixture(scope="module")
def switched(tmp_path_factory):
    d = tmp_path_factory.mktemp("snap-v4l2")
    node = v4l2_node(d, "n1", {"cam0": "/dev/video0"}, script(d / "cams.json", {"/dev/video0": UVC}))
    rig = d / "rig.yaml"
    # A raw take codec: the webcam delivers YUYV, kept losslessly.
    rig.write_text(f"version: 1\nnodes:\n  - name: n1\n    endpoint: {node.endpoint}\n"
                   "take:\n  size: 640x480\n  fps: 30\n  codec: ffv1\n")
    console = Console(rig, d / "takes")
    try:
        wait_previews(console, cameras=1, groups=30)
        big = snap(console, "big", size="max")
        wait_previews(console, cameras=1, groups=15)  # previewing again
        plain = snap(console, "plain")
        yield d / "takes", big, plain
    finally:
        console.close()
        node.cleanup()


def test_a_snap_at_max_switches_the_webcam_to_its_largest_format_and_back(switched):
    takes, (status, big), (plain_status, plain) = switched
    assert status == 200 and big["status"] == "complete", big
    assert big["switched"] == ["n1/cam0"] and big["switch_lead_us"] > 0, big
    directory = takes / big["take_id"]
    manifest = json.loads((directory / "manifest.json").read_text())
    [still] = manifest["stills"]
    with Image.open(directory / still["path"]) as image:
        assert image.format == "PNG" and image.size == (1920, 1080) == (still["width"], still["height"]), still
    # Not from the preview's exposure timing, and its phase error as measured, never hidden.
    assert still["mode_switch"] is True and still["phase_error_us"] == still["center_us"] - big["center_us"], still
    report = json.loads((directory / "sync-report.json").read_text())
    [m] = report["mode_switches"]
    assert (m["node"], m["camera"]) == ("n1", "cam0") and m["phase_error_us"] == [still["phase_error_us"]], m
    assert "not from the preview's exposure timing" in m["exposure_timing"], m
    r = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=width,height", "-of", "json",
                        str(directory / still["path"])], capture_output=True, text=True, timeout=60)
    assert json.loads(r.stdout)["streams"][0] == {"width": 1920, "height": 1080}, r.stdout + r.stderr
    # Back in the preview's mode: a plain Snap keeps a 640x480 still with no switch.
    assert plain_status == 200 and plain["status"] == "complete" and plain["switched"] == [], plain
    [again] = json.loads((takes / plain["take_id"] / "manifest.json").read_text())["stills"]
    assert (again["width"], again["height"]) == (640, 480) and "mode_switch" not in again, again
