"""Frame-rate caps and live adjustments of one camera, against a real coord-node with two synthetic cameras:
every camera's .mkv still holds exactly one frame per group it records (CONTRACT §4), the fills flagged dup.

(a) a plan-time cap (CameraConfig.record_every), (b) AdjustCamera SLOW, (c) AdjustCamera DISABLE,
(d) AdjustCamera for a camera the node does not have."""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import FRAME_PERIOD_US, NODE_NAME, TAKE_DEADLINE_S, error_name, new_take_id, now_us, wait_finished

# Long enough for the sensors' phase loops to lock before group 0, even at a capped rate on a busy machine.
ARM_LEAD_US = 1_500_000
GROUPS_PER_SECOND = 1_000_000 // FRAME_PERIOD_US  # 30
STATUS_TIMEOUT_S = 10.0


# ---- helpers ----

def configure_and_arm_two(client, take_id: str, cam0_every: int = 0):
    """cam0 (record_every `cam0_every`) and cam1 (every group), 320x240 mjpeg at 30 fps; returns t0_us."""
    pb = client.pb
    cameras = [pb.CameraConfig(camera="cam0", ordinal=0, width=320, height=240, fps=30, codec="mjpeg",
                               record_every=cam0_every),
               pb.CameraConfig(camera="cam1", ordinal=1, width=320, height=240, fps=30, codec="mjpeg")]
    client.call("configure", pb.Configure(take_id=take_id, cameras=cameras), "ack")
    t0_us = now_us() + ARM_LEAD_US
    arm = pb.Arm(take_id=take_id, clock=pb.ClockMapping(offset_us=0, rate_ppm=0, ref_local_us=0),
                 t0_us=t0_us, frame_period_us=FRAME_PERIOD_US)
    armed = client.call("arm", arm, "armed", timeout_ms=10_000)
    assert list(armed.cameras) == ["cam0", "cam1"]
    return t0_us


def camera_status(status, camera: str):
    cams = {c.camera: c for c in status.cameras}
    assert camera in cams, f"Status lists cameras {list(cams)}, not {camera}"
    return cams[camera]


def wait_for_group(client, take_id: str, group: int, camera: str = "cam1"):
    """Polls StatusRequest until `camera` has written `group`; returns that Status."""
    pb = client.pb
    deadline = time.monotonic() + STATUS_TIMEOUT_S
    last = None
    while time.monotonic() < deadline:
        status = client.call("status_request", pb.StatusRequest(), "status")
        assert status.state != pb.Status.FAILED, f"the node reports FAILED: {status.detail!r}"
        last = camera_status(status, camera).last_group
        if last >= group:
            return status
        time.sleep(0.05)
    raise AssertionError(f"{camera} of take {take_id} did not reach group {group} within {STATUS_TIMEOUT_S:.0f} s "
                         f"(last group {last})")


def adjust(client, take_id: str, camera: str, action, from_group: int, record_every: int = 0):
    pb = client.pb
    message = pb.AdjustCamera(take_id=take_id, camera=camera, action=action, from_group=from_group,
                              record_every=record_every, reason="pytest")
    return client.request("adjust_camera", message)


def staged(node, take_id: str, camera: str, suffix: str) -> Path:
    return node.staging / take_id / NODE_NAME / f"{camera}{suffix}"


def read_rows(node, take_id: str, camera: str) -> list[tuple[int, int, int, str]]:
    """frames.csv as (frame, group, center_us, flags), header and frame = row index checked."""
    text = staged(node, take_id, camera, ".frames.csv").read_text("utf-8")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows and rows[0] == ["frame", "group", "center_us", "flags"], f"{camera}.frames.csv header {rows[:1]}"
    parsed = [(int(f), int(g), int(c), flags) for f, g, c, flags in rows[1:]]
    for i, (frame, _, _, flags) in enumerate(parsed):
        assert frame == i, f"{camera}.frames.csv row {i} has frame {frame}"
        assert flags in ("", "dup"), f"{camera}.frames.csv row {i}: flags {flags!r}"
    return parsed


def ffprobe_frames(path: Path) -> int:
    ffprobe = shutil.which("ffprobe")
    if ffprobe is None:
        pytest.fail("ffprobe is not installed (Debian: apt-get install ffmpeg).")
    out = subprocess.run([ffprobe, "-v", "error", "-count_frames", "-select_streams", "v:0",
                          "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"ffprobe cannot read {path}: {out.stderr.strip()}"
    return int(out.stdout.strip().rstrip(","))


def stripes(mkv: Path) -> list[tuple[int, int, int] | None]:
    """Each frame's SYNCSTRIPE (CONTRACT §5) as (ordinal, sensor frame counter, true centre µs), None if unreadable:
    ground truth only the simulation knows (the decoder of scripts/check-take.py, kept here so this test stands alone)."""
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", str(mkv), "-vf", "crop=104:64:0:0", "-f", "rawvideo",
                          "-pix_fmt", "gray", "-"], capture_output=True, timeout=120)
    assert raw.returncode == 0, f"ffmpeg cannot decode {mkv}: {raw.stderr.decode().strip()}"
    decoded = []
    for frame in np.frombuffer(raw.stdout, np.uint8).reshape(-1, 64, 104):
        # Each 8x8 block's inner 4x4 mean, block b at row b // 13, column b % 13; bits MSB first.
        bits = (frame.reshape(8, 8, 13, 8)[:, 2:6, :, 2:6].mean(axis=(1, 3)).reshape(-1) > 125).astype(np.uint8)
        data = np.packbits(bits).tobytes()
        crc = 0
        for byte in data[:12]:
            crc ^= byte
            for _ in range(8):
                crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
        ok = data[0] == 0xA5 and crc == data[12]
        decoded.append((data[1], int.from_bytes(data[2:6], "big"), int.from_bytes(data[6:12], "big")) if ok else None)
    return decoded


def assert_one_frame_per_group(node, take_id: str, camera: str, groups: int):
    """The camera's files hold exactly groups [0, groups), frame i in group i, by frames.csv and ffprobe."""
    rows = read_rows(node, take_id, camera)
    assert [g for _, g, _, _ in rows] == list(range(groups)), \
        f"{camera}: frames.csv holds {len(rows)} rows for groups {rows[0][1] if rows else '-'}…" \
        f"{rows[-1][1] if rows else '-'}, expected groups 0…{groups - 1}"
    frames = ffprobe_frames(staged(node, take_id, camera, ".mkv"))
    assert frames == groups, f"ffprobe counts {frames} frames in {camera}.mkv, expected {groups}"
    return rows


def dup_groups(rows, from_group: int = 0) -> list[int]:
    return [g for _, g, _, flags in rows if flags == "dup" and g >= from_group]


# ---- (a) a plan-time cap ----

def test_a_capped_camera_holds_every_other_group(node, client, pb):
    groups = 3 * GROUPS_PER_SECOND
    take_id = new_take_id("cap")
    configure_and_arm_two(client, take_id, cam0_every=2)
    client.call("start_at", pb.StartAt(take_id=take_id, start_group=0, stop_group=groups), "ack")
    status = wait_finished(client, take_id, TAKE_DEADLINE_S)

    cam0, cam1 = camera_status(status, "cam0"), camera_status(status, "cam1")
    capped = assert_one_frame_per_group(node, take_id, "cam0", groups)
    full = assert_one_frame_per_group(node, take_id, "cam1", groups)

    assert [flags for _, _, _, flags in capped] == ["" if g % 2 == 0 else "dup" for g in range(groups)], \
        f"cam0 (record_every 2) should alternate real/dup from a real row; its dup groups are {dup_groups(capped)}"
    assert dup_groups(full) == [], f"cam1 (no cap) has dup rows at groups {dup_groups(full)}"
    assert cam0.dropped == 0, f"cam0 reports {cam0.dropped} dropped groups"
    assert abs(cam0.held - groups / 2) <= 1, f"cam0 reports {cam0.held} held groups, expected about {groups // 2}"
    assert cam0.record_every == 2 and cam1.record_every == 1, \
        f"record_every reported as cam0 {cam0.record_every}, cam1 {cam1.record_every}"
    assert cam1.held == 0 and cam1.dropped == 0, f"cam1 reports held {cam1.held}, dropped {cam1.dropped}"
    for cam in (cam0, cam1):
        size = staged(node, take_id, cam.camera, ".mkv").stat().st_size
        assert cam.bytes_written == size, f"{cam.camera} reports {cam.bytes_written} bytes written, its .mkv has {size}"

    # The capped sensor really runs at 15 fps: consecutive real frames are consecutive sensor frames, a grid
    # period × 2 apart in true time, and each dup repeats the picture before it.
    decoded = stripes(staged(node, take_id, "cam0", ".mkv"))
    assert all(s is not None for s in decoded), "a cam0 frame carries no readable SYNCSTRIPE"
    real = [decoded[g] for g in range(0, groups, 2)]
    counters = [s[1] for s in real]
    assert counters == list(range(counters[0], counters[0] + len(real))), \
        f"cam0's real frames are not consecutive sensor frames: counters {counters}"
    spacing = [(b[2] - a[2]) for a, b in zip(real, real[1:])]
    assert all(abs(d - 2 * FRAME_PERIOD_US) < 2_000 for d in spacing), f"cam0's true frame spacing (µs): {spacing}"
    assert all(decoded[g] == decoded[g - 1] for g in range(1, groups, 2)), "a cam0 dup does not repeat the frame before it"


# ---- (b) a live slow-down ----

def test_slow_keeps_every_third_group_from_its_group_on(node, client, pb):
    groups = 4 * GROUPS_PER_SECOND
    take_id = new_take_id("slow")
    configure_and_arm_two(client, take_id)
    client.call("start_at", pb.StartAt(take_id=take_id, start_group=0, stop_group=groups), "ack")

    status = wait_for_group(client, take_id, 15)
    from_group = camera_status(status, "cam1").last_group + GROUPS_PER_SECOND  # about a second ahead
    reply = adjust(client, take_id, "cam0", pb.AdjustCamera.SLOW, from_group, record_every=3)
    assert reply.WhichOneof("body") == "ack", f"AdjustCamera SLOW answered {error_name(pb, reply)}: {reply}"
    before = camera_status(status, "cam0")
    assert before.record_every == 1, f"cam0 reports record_every {before.record_every} before its slow-down"
    assert camera_status(wait_for_group(client, take_id, from_group + 3, camera="cam0"), "cam0").record_every == 3, \
        "cam0 does not report record_every 3 once its slow-down's group is reached"

    status = wait_finished(client, take_id, TAKE_DEADLINE_S)
    slowed = assert_one_frame_per_group(node, take_id, "cam0", groups)
    full = assert_one_frame_per_group(node, take_id, "cam1", groups)

    expected = [g for g in range(from_group, groups) if (g - from_group) % 3 != 0]
    assert dup_groups(slowed, from_group) == expected, \
        f"cam0 slowed to 1 in 3 from group {from_group}: dup groups from there {dup_groups(slowed, from_group)}"
    assert dup_groups(full) == [], f"cam1 (not slowed) has dup rows at groups {dup_groups(full)}"
    cam0 = camera_status(status, "cam0")
    assert cam0.held == len(expected), f"cam0 reports {cam0.held} held groups, expected {len(expected)}"
    assert cam0.record_every == 3 and not cam0.disabled


# ---- (c) disabling one camera ----

def test_disable_ends_one_camera_and_the_node_finishes(node, client, pb):
    groups = 4 * GROUPS_PER_SECOND
    take_id = new_take_id("disable")
    configure_and_arm_two(client, take_id)
    client.call("start_at", pb.StartAt(take_id=take_id, start_group=0, stop_group=groups), "ack")

    status = wait_for_group(client, take_id, 15)
    from_group = camera_status(status, "cam1").last_group + GROUPS_PER_SECOND
    reply = adjust(client, take_id, "cam0", pb.AdjustCamera.DISABLE, from_group)
    assert reply.WhichOneof("body") == "ack", f"AdjustCamera DISABLE answered {error_name(pb, reply)}: {reply}"

    status = wait_finished(client, take_id, TAKE_DEADLINE_S)
    cam0, cam1 = camera_status(status, "cam0"), camera_status(status, "cam1")
    assert_one_frame_per_group(node, take_id, "cam0", from_group)
    full = assert_one_frame_per_group(node, take_id, "cam1", groups)
    assert dup_groups(full) == [], f"cam1 has dup rows at groups {dup_groups(full)}"
    assert cam0.disabled and cam0.finished and cam0.last_group == from_group - 1, \
        f"cam0: disabled {cam0.disabled}, finished {cam0.finished}, last group {cam0.last_group}"
    assert cam0.error == "", f"disabling cam0 on purpose reported an error: {cam0.error!r}"
    assert not cam1.disabled and cam1.last_group == groups - 1 and cam1.frames == groups


# ---- (d) an unknown camera ----

def test_adjusting_an_unknown_camera_is_an_error_naming_it(node, client, pb):
    take_id = new_take_id("unknown")
    configure_and_arm_two(client, take_id)
    try:
        reply = adjust(client, take_id, "cam9", pb.AdjustCamera.SLOW, 30, record_every=2)
        assert reply.WhichOneof("body") == "error", f"AdjustCamera for cam9 answered {reply.WhichOneof('body')}"
        assert reply.error.code == pb.Error.NOT_FOUND, f"error code {error_name(pb, reply)}"
        assert "cam9" in reply.error.message, f"the error does not name the camera: {reply.error.message!r}"
    finally:
        client.call("abort", pb.Abort(take_id=take_id, reason="pytest"), "ack")
