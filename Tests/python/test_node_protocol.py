"""The node agent speaks the coord.v1 protocol: real protobuf over a real ZeroMQ DEALER, against
a real coord-node process with two synthetic cameras."""

from __future__ import annotations

import csv
import hashlib
import io
import re
import shutil
import subprocess
import sys
import time

import pytest

from conftest import (CAMERAS, FRAME_PERIOD_US, NODE_NAME, STOP_TIMEOUT_S, Client, Node,
                      assert_hello_ok, configure_and_arm, fetch_file, new_take_id, now_us, record_take,
                      wait_finished)

GROUPS = 15
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


def test_ready_line_and_sigterm_exit_zero(node, client):
    assert_hello_ok(client)
    code = node.terminate()
    if code is None:
        node.kill()
        pytest.fail(f"coord-node did not exit within {STOP_TIMEOUT_S:.0f} s of SIGTERM")
    assert code == 0, f"coord-node exited with {code} on SIGTERM, expected 0"
    extra = node.remaining_stdout()
    assert extra == [], f"coord-node printed more than the READY line on stdout: {extra[:5]!r}"


def test_hello(client, pb):
    reply = client.hello()
    assert reply.node == NODE_NAME
    assert [c.name for c in reply.cameras] == CAMERAS
    for cam in reply.cameras:
        assert cam.source == "synthetic", f"{cam.name}: source {cam.source!r}"
        assert cam.device == "", f"{cam.name}: a synthetic camera has no device, got {cam.device!r}"
        assert len(cam.formats) > 0, f"{cam.name} lists no formats"
        for f in cam.formats:
            assert f.width > 0 and f.height > 0, f"{cam.name}: format {f.pixel_format} has size {f.width}x{f.height}"
            assert 0 < f.min_frame_period_us <= f.max_frame_period_us, \
                f"{cam.name}: frame periods {f.min_frame_period_us}..{f.max_frame_period_us} µs"
        assert "mjpeg" in cam.codecs, f"{cam.name}: codecs {list(cam.codecs)} lack mjpeg"


def test_clock_probe(client, pb):
    for _ in range(5):
        t1 = now_us()
        reply = client.call("clock_probe", pb.ClockProbe(t1_us=t1), "clock_probe_reply")
        t4 = now_us()
        assert reply.t1_us == t1, "ClockProbeReply does not echo t1_us"
        assert reply.t3_us >= reply.t2_us, f"t3 {reply.t3_us} < t2 {reply.t2_us}"
        # An unsimulated node's local clock is this host's CLOCK_MONOTONIC, like time.monotonic_ns().
        assert t1 <= reply.t2_us <= reply.t3_us <= t4, \
            f"probe not causal on one clock: t1={t1} t2={reply.t2_us} t3={reply.t3_us} t4={t4}"


def test_status_when_idle(client, pb):
    status = client.call("status_request", pb.StatusRequest(), "status")
    assert status.node == NODE_NAME
    assert status.state == pb.Status.IDLE, f"a fresh node is {pb.Status.State.Name(status.state)}"


def ffprobe_stream(path) -> dict:
    ffprobe = shutil.which("ffprobe")
    if ffprobe is None:
        pytest.fail("ffprobe is not installed (Debian: apt-get install ffmpeg).")
    out = subprocess.run(
        [ffprobe, "-v", "error", "-count_frames", "-select_streams", "v:0",
         "-show_entries", "stream=codec_name,width,height,nb_read_frames", "-of", "default=noprint_wrappers=1",
         str(path)],
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"ffprobe cannot read {path}: {out.stderr.strip()}"
    return dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)


def parse_frames_csv(data: bytes) -> tuple[list[str], list[list[str]]]:
    text = data.decode("utf-8")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows, "frames.csv is empty"
    return rows[0], rows[1:]


def test_full_take(node, client, pb, tmp_path):
    take_id = new_take_id()
    t0_us, armed, status = record_take(client, take_id, groups=GROUPS)

    assert armed.take_id == take_id
    assert list(armed.cameras) == ["cam0"]

    assert status.take_id == take_id
    assert status.node == NODE_NAME
    cams = {c.camera: c for c in status.cameras}
    assert "cam0" in cams, f"Status lists cameras {list(cams)}, not cam0"
    assert cams["cam0"].frames == GROUPS, f"cam0 wrote {cams['cam0'].frames} frames, expected {GROUPS}"
    assert cams["cam0"].finished

    # ---- list ----
    listing = client.call("list_files", pb.ListFiles(take_id=take_id), "file_list")
    assert listing.final, "FileList.final is false after FINISHED"
    files = {f.path: f for f in listing.files}
    mkv, frames_csv = f"{NODE_NAME}/cam0.mkv", f"{NODE_NAME}/cam0.frames.csv"
    assert set(files) == {mkv, frames_csv}, f"FileList holds {sorted(files)}"
    for f in listing.files:
        assert f.bytes > 0, f"{f.path} is empty"
        assert SHA256_RE.match(f.sha256), f"{f.path}: sha256 {f.sha256!r} is not lower-case hex"

    # ---- fetch and verify ----
    fetched = {}
    for path in (mkv, frames_csv):
        data = fetch_file(client, take_id, path, chunk=64 * 1024)
        assert len(data) == files[path].bytes, f"{path}: fetched {len(data)} bytes, listed {files[path].bytes}"
        assert hashlib.sha256(data).hexdigest() == files[path].sha256, f"{path}: sha256 differs from the listing"
        fetched[path] = data

    local_mkv = tmp_path / "cam0.mkv"
    local_mkv.write_bytes(fetched[mkv])
    stream = ffprobe_stream(local_mkv)
    assert stream.get("nb_read_frames") == str(GROUPS), f"ffprobe counts {stream.get('nb_read_frames')} frames"
    assert stream.get("codec_name") == "mjpeg", f"codec {stream.get('codec_name')}"
    assert (stream.get("width"), stream.get("height")) == ("320", "240"), f"size {stream.get('width')}x{stream.get('height')}"

    header, rows = parse_frames_csv(fetched[frames_csv])
    assert header == ["frame", "group", "center_us", "flags"], f"frames.csv header {header}"
    assert len(rows) == GROUPS, f"frames.csv has {len(rows)} rows, expected {GROUPS}"
    for i, row in enumerate(rows):
        assert len(row) == 4, f"frames.csv row {i}: {row}"
        frame, group, center_us, flags = row
        assert int(frame) == i and int(group) == i, f"frames.csv row {i}: frame {frame}, group {group}"
        int(center_us)
        assert flags in ("", "dup"), f"frames.csv row {i}: flags {flags!r}"

    # ---- confirm and release ----
    client.call("confirm_collected", pb.ConfirmCollected(take_id=take_id, files=list(listing.files)), "ack")
    after = client.request("list_files", pb.ListFiles(take_id=take_id))
    kind = after.WhichOneof("body")
    if kind == "error":
        assert after.error.code == pb.Error.NOT_FOUND, \
            f"ListFiles after ConfirmCollected: {pb.Error.Code.Name(after.error.code)} {after.error.message!r}"
    else:
        assert kind == "file_list", f"ListFiles after ConfirmCollected answered {kind}"
        assert list(after.file_list.files) == [], \
            f"files still listed after ConfirmCollected: {[f.path for f in after.file_list.files]}"

    # The node is still healthy, and a graceful stop after a take still exits 0.
    assert_hello_ok(client)
    code = node.terminate()
    assert code == 0, f"coord-node exited with {code} on SIGTERM after a take (None: still running after {STOP_TIMEOUT_S:.0f} s)"


def test_frame_centres_lie_on_the_grid(client, pb):
    """Each written frame's centre estimate is within half a period of its group's grid instant."""
    take_id = new_take_id()
    t0_us, _, _ = record_take(client, take_id, groups=GROUPS)
    data = fetch_file(client, take_id, f"{NODE_NAME}/cam0.frames.csv")
    _, rows = parse_frames_csv(data)
    assert len(rows) == GROUPS
    for frame, group, center_us, flags in rows:
        if flags == "dup":
            continue
        grid = t0_us + int(group) * FRAME_PERIOD_US
        assert abs(int(center_us) - grid) <= FRAME_PERIOD_US // 2, \
            f"frame {frame}: centre {center_us} is {int(center_us) - grid} µs from group {group}'s instant {grid}"


def test_a_second_client_is_served(node, client, zctx, pb):
    other = Client(zctx, node.endpoint, pb)
    try:
        assert_hello_ok(other)
        assert_hello_ok(client)
    finally:
        other.close()


def test_node_exits_when_its_parent_dies(tmp_path, zctx, pb):
    """--parent-pid: a node whose parent is gone stops by itself, so no orphan outlives a crashed coordinator."""
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    node = None
    try:
        node = Node(tmp_path, parent_pid=parent.pid)
        c = Client(zctx, node.endpoint, pb)
        try:
            assert_hello_ok(c)
        finally:
            c.close()
        parent.kill()
        parent.wait(timeout=5)
        try:
            node.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"coord-node still runs {STOP_TIMEOUT_S:.0f} s after its --parent-pid {parent.pid} died")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(timeout=5)
        if node is not None:
            node.cleanup()


def test_a_vanished_coordinator_loses_no_frame(node, zctx, pb):
    """Once started, recording does not depend on the network: the coordinator's socket goes away mid-take,
    and a new coordinator later finds every group recorded and the files ready to collect."""
    first = Client(zctx, node.endpoint, pb)
    take_id = new_take_id("vanish")
    configure_and_arm(first, take_id)
    first.call("start_at", pb.StartAt(take_id=take_id, start_group=0, stop_group=45), "ack")
    first.close()  # the coordinator is gone before the first frame is written

    later = Client(zctx, node.endpoint, pb)
    try:
        status = wait_finished(later, take_id)
        assert [c.frames for c in status.cameras] == [45]
        listing = later.call("list_files", pb.ListFiles(take_id=take_id), "file_list")
        mkv = next(f for f in listing.files if f.path.endswith(".mkv"))
        data = fetch_file(later, take_id, mkv.path)
        assert hashlib.sha256(data).hexdigest() == mkv.sha256
    finally:
        later.close()


def test_abort_keeps_a_recorded_take_and_drops_one_that_never_started(node, client, pb):
    # A finished take not yet collected: an abort (e.g. from a coordinator that gave up) must not cost its files.
    take_id = new_take_id("abort-kept")
    record_take(client, take_id)
    listed = client.call("list_files", pb.ListFiles(take_id=take_id), "file_list")
    client.call("abort", pb.Abort(take_id=take_id, reason="pytest"), "ack")
    after = client.call("list_files", pb.ListFiles(take_id=take_id), "file_list")
    assert [(f.path, f.sha256) for f in after.files] == [(f.path, f.sha256) for f in listed.files]
    assert (node.staging / take_id).is_dir()

    # Armed, never started: nothing was recorded, and the empty files go.
    other = new_take_id("abort-dropped")
    configure_and_arm(client, other)
    client.call("abort", pb.Abort(take_id=other, reason="pytest"), "ack")
    assert not (node.staging / other).exists()


def test_status_and_probes_are_answered_while_cameras_open(tmp_path, zctx, pb):
    """Arm opens cameras on a lane of its own: a node whose cameras take 2 s to open still answers clock probes
    and status at once meanwhile, and an Abort sent then wins over the arm."""
    n = Node(tmp_path, extra_args=["--synthetic-open-ms", "2000"])
    armer = Client(zctx, n.endpoint, pb)
    other = Client(zctx, n.endpoint, pb)
    try:
        take_id = new_take_id("slow-open")
        armer.call("configure", pb.Configure(take_id=take_id, cameras=[pb.CameraConfig(
            camera="cam0", ordinal=0, width=320, height=240, fps=30, codec="mjpeg")]), "ack")
        arm = armer.envelope("arm", pb.Arm(take_id=take_id, clock=pb.ClockMapping(), t0_us=now_us() + 5_000_000,
                                           frame_period_us=FRAME_PERIOD_US))
        armer.send_raw(arm.SerializeToString())
        began = time.monotonic()
        worst = 0.0
        answered = 0
        while time.monotonic() - began < 1.5:
            t = time.monotonic()
            other.call("clock_probe", pb.ClockProbe(t1_us=now_us()), "clock_probe_reply", timeout_ms=1000)
            status = other.call("status_request", pb.StatusRequest(), "status", timeout_ms=1000)
            assert status.take_id == take_id
            worst = max(worst, time.monotonic() - t)
            answered += 1
        assert worst < 0.3, f"a probe and status took {worst:.2f} s while the cameras opened"
        other.call("abort", pb.Abort(take_id=take_id, reason="pytest"), "ack")
        reply = armer.recv_envelope(10_000, what="the arm")
        assert reply.request_id == arm.request_id
        assert reply.WhichOneof("body") == "error" and "aborted" in reply.error.message, reply
        status = other.call("status_request", pb.StatusRequest(), "status")
        assert status.state == pb.Status.IDLE and list(status.cameras) == [], status
    finally:
        armer.close()
        other.close()
        n.cleanup()


def test_raw_frame_chunks_in_flight_together(client, pb):
    """FetchChunk with raw_frame: the node answers [Envelope, bytes] with Chunk.data empty; several asked at once
    come back (in any order) and put together make the listed file; a refused one is a single Error frame."""
    take_id = new_take_id()
    record_take(client, take_id, groups=GROUPS)
    listing = client.call("list_files", pb.ListFiles(take_id=take_id), "file_list")
    mkv = next(f for f in listing.files if f.path.endswith(".mkv"))
    chunk = 16 * 1024
    asked = {}
    for offset in range(0, mkv.bytes, chunk):
        env = client.envelope("fetch_chunk", pb.FetchChunk(take_id=take_id, path=mkv.path, offset=offset,
                                                           length=chunk, raw_frame=True))
        asked[env.request_id] = offset
        client.send_raw(env.SerializeToString())
    pieces = {}
    while len(pieces) < len(asked):
        frames = client.sock.recv_multipart()
        assert len(frames) == 2, f"a raw-frame chunk came as {len(frames)} frames"
        env = pb.Envelope()
        env.ParseFromString(frames[0])
        assert env.WhichOneof("body") == "chunk", f"answered with {env}"
        offset = asked[env.request_id]
        assert env.chunk.offset == offset and env.chunk.path == mkv.path
        assert env.chunk.data == b"", "the bytes must be in the second frame only"
        assert env.chunk.eof == (offset + len(frames[1]) >= mkv.bytes)
        pieces[offset] = frames[1]
    data = b"".join(pieces[o] for o in sorted(pieces))
    assert len(data) == mkv.bytes and hashlib.sha256(data).hexdigest() == mkv.sha256

    missing = client.request("fetch_chunk", pb.FetchChunk(take_id=take_id, path="node-0/nope.mkv", offset=0,
                                                          length=chunk, raw_frame=True))
    assert missing.WhichOneof("body") == "error" and "nope.mkv" in missing.error.message
