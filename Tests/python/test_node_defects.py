"""Defects a hostile test found on a trusted network (issue 17), each against a real coord-node process: an
Abort that froze the node, a take id that walked out of the staging area, memory kept per armed take, files
hashed on the request thread, and two coordinators racing for one rig."""

from __future__ import annotations

import hashlib
import json
import signal
import shutil
import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import (Client, Node, assert_hello_ok, configure_and_arm, error_name, fetch_file, new_take_id,
                      record_take)

ROOT = Path(__file__).resolve().parents[2]
COORD = Path(os.environ.get("COORD") or ROOT / ".build" / "debug" / "coord")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


# ---- 1. An Abort for a take that is not the node's ----

def test_abort_of_another_take_leaves_the_node_answering(node, client, pb):
    take_id = new_take_id("mine")
    configure_and_arm(client, take_id)
    reply = client.request("abort", pb.Abort(take_id=new_take_id("not-mine"), reason="pytest"))
    assert error_name(pb, reply) == "NOT_FOUND", reply
    # The node still answers everything, and its own take is untouched.
    status = client.call("status_request", pb.StatusRequest(), "status")
    assert status.take_id == take_id and status.state == pb.Status.ARMED, status
    assert_hello_ok(client)
    client.call("abort", pb.Abort(take_id=take_id, reason="pytest"), "ack")
    assert node.terminate() == 0, "the node did not exit 0 on SIGTERM after an Abort it refused"


def test_two_coordinators_racing_end_with_one_take_and_one_refusal(tmp_path):
    nodes = []
    try:
        for i in (1, 2, 3):
            nodes.append(Node(tmp_path / f"n{i}", extra_args=["--name", f"node-{i}", "--synthetic", "cam0"]))
        rig = tmp_path / "rig.yaml"
        rig.write_text("version: 1\nnodes:\n" + "".join(
            f"  - name: node-{i}\n    endpoint: {n.endpoint}\n" for i, n in enumerate(nodes, start=1)))
        results: dict[str, subprocess.CompletedProcess] = {}

        def run(name: str):
            results[name] = subprocess.run(
                [str(COORD), "start-take", "--rig", str(rig), "--seconds", "2", "--size", "320x240",
                 "--name", name, "--takes-dir", str(tmp_path / f"takes-{name}")],
                capture_output=True, text=True, timeout=120)

        racers = [threading.Thread(target=run, args=(name,)) for name in ("first", "second")]
        for t in racers:
            t.start()
        for t in racers:
            t.join(timeout=150)
        codes = sorted(r.returncode for r in results.values())
        report = {name: (r.returncode, r.stderr.strip().splitlines()[-1:]) for name, r in results.items()}
        assert codes == [0, 1], report
        loser = next(r for r in results.values() if r.returncode == 1)
        last = loser.stderr.strip().splitlines()[-1]
        assert "nothing was recorded" in last and re.search(r"node-\d", last) and "take" in last, last
        winner = next(name for name, r in results.items() if r.returncode == 0)
        takes = list((tmp_path / f"takes-{winner}").iterdir())
        assert len(takes) == 1
        check = subprocess.run(["python3", str(ROOT / "scripts" / "check-take.py"), str(takes[0])],
                               capture_output=True, text=True, timeout=120)
        assert check.returncode == 0, check.stdout + check.stderr
        # Every node still answers and is free for the next take.
        for n in nodes:
            assert n.proc.poll() is None
        status = subprocess.run([str(COORD), "status", "--rig", str(rig)], capture_output=True, text=True, timeout=30)
        assert status.returncode == 0, status.stdout + status.stderr
    finally:
        for n in nodes:
            n.cleanup()


# ---- 2. Take ids that leave the staging area ----

@pytest.fixture
def outside(tmp_path) -> Path:
    """A real file next to the staging area, two levels up from a take directory."""
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("not for the network\n")
    return secret


def traversing_take_ids(node: Node, outside: Path) -> list[tuple[str, str]]:
    rel = os.path.relpath(outside.parent.parent, node.staging)   # ".." : staging's parent holds outside/
    deep = "/".join([".."] * len(node.staging.parts))              # up to / from anywhere
    return [(rel, "outside/secret.txt"),
            (deep + "/etc", "os-release/x"),
            (deep, "etc/os-release"),
            (str(outside.parent.parent), "outside/secret.txt"),
            ("x/../..", "outside/secret.txt")]


def test_fetch_list_and_confirm_refuse_take_ids_outside_staging(node, client, pb, outside):
    for take_id, path in traversing_take_ids(node, outside):
        fetched = client.request("fetch_chunk", pb.FetchChunk(take_id=take_id, path=path, offset=0, length=4096))
        assert fetched.WhichOneof("body") == "error", f"FetchChunk {take_id!r} {path!r} answered {fetched}"
        assert b"not for the network" not in fetched.SerializeToString()
        assert b"Debian" not in fetched.SerializeToString()
        listed = client.request("list_files", pb.ListFiles(take_id=take_id))
        assert listed.WhichOneof("body") == "error", f"ListFiles {take_id!r} answered {listed}"
        digest = hashlib.sha256(outside.read_bytes()).hexdigest()
        confirm = pb.ConfirmCollected(take_id=take_id, files=[pb.FileInfo(
            path=path, bytes=outside.stat().st_size, sha256=digest)])
        confirmed = client.request("confirm_collected", confirm)
        assert confirmed.WhichOneof("body") == "error", f"ConfirmCollected {take_id!r} answered {confirmed}"
        assert "take id" in confirmed.error.message, confirmed.error.message
    assert outside.exists(), "a peer deleted a file outside the staging area"
    assert outside.parent.is_dir()
    assert_hello_ok(client)


def test_a_symlinked_take_directory_leading_out_is_not_served(node, client, pb, outside):
    take_id = new_take_id("link")
    (node.staging / take_id).symlink_to(outside.parent.parent, target_is_directory=True)
    fetched = client.request("fetch_chunk", pb.FetchChunk(take_id=take_id, path="outside/secret.txt", offset=0,
                                                          length=4096))
    assert fetched.WhichOneof("body") == "error", fetched
    assert b"not for the network" not in fetched.SerializeToString()
    listed = client.request("list_files", pb.ListFiles(take_id=take_id))
    assert listed.WhichOneof("body") == "error" or list(listed.file_list.files) == [], listed


# ---- 5. Memory per armed take ----

def test_fifty_armed_and_aborted_takes_keep_memory_bounded(tmp_path, zctx, pb):
    n = Node(tmp_path, extra_args=["--synthetic", "cam0,cam1"])
    client = Client(zctx, n.endpoint, pb)
    try:
        def arm_and_abort(i: int):
            take_id = new_take_id(f"mem{i}")
            configure = pb.Configure(take_id=take_id, cameras=[
                pb.CameraConfig(camera=c, ordinal=k, width=1920, height=1080, fps=30, codec="mjpeg")
                for k, c in enumerate(["cam0", "cam1"])])
            client.call("configure", configure, "ack")
            t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000 + 2_000_000
            client.call("arm", pb.Arm(take_id=take_id, clock=pb.ClockMapping(), t0_us=t0, frame_period_us=33333),
                        "armed", timeout_ms=15_000)
            client.call("abort", pb.Abort(take_id=take_id, reason="pytest"), "ack")

        for i in range(3):   # allocator and codec tables warm up
            arm_and_abort(i)
        first = rss_kib(n.proc.pid)
        for i in range(3, 50):
            arm_and_abort(i)
        # An aborted take's recorders end on their own threads: wait until the node has let them go.
        deadline = time.monotonic() + 10
        while rss_kib(n.proc.pid) > first * 1.2 and time.monotonic() < deadline:
            time.sleep(0.2)
        last = rss_kib(n.proc.pid)
        assert last <= first * 1.2, f"RSS grew from {first} KiB to {last} KiB over 47 armed and aborted takes"
    finally:
        client.close()
        n.cleanup()


# ---- 7. ListFiles never hashes on the request thread ----

def test_file_list_of_a_restarted_node_does_not_stall_status(tmp_path, zctx, pb):
    """A take recorded before a restart: its checksums come from the index written when its files were final,
    and a take without one (written by an older node) is hashed off the request thread while status answers."""
    n = Node(tmp_path)
    client = Client(zctx, n.endpoint, pb)
    take_id = new_take_id("index")
    record_take(client, take_id)
    listed = client.call("list_files", pb.ListFiles(take_id=take_id), "file_list")
    assert listed.final
    client.close()
    n.cleanup()
    # A big file the index does not know, as a take from an older node would be.
    old = new_take_id("old")
    big = n.staging / old / "node-a" / "cam0.mkv"
    big.parent.mkdir(parents=True)
    with open(big, "wb") as f:
        f.truncate(1 << 30)   # sparse: hashing it reads 1 GiB
    n2 = Node(tmp_path)
    client = Client(zctx, n2.endpoint, pb)
    try:
        again = client.call("list_files", pb.ListFiles(take_id=take_id), "file_list")
        assert again.final and [(f.path, f.sha256) for f in again.files] == [(f.path, f.sha256) for f in listed.files]
        for f in listed.files:
            assert hashlib.sha256((n.staging / take_id / f.path).read_bytes()).hexdigest() == f.sha256
        began = time.monotonic()
        first = client.call("list_files", pb.ListFiles(take_id=old), "file_list", timeout_ms=500)
        assert not first.final and list(first.files) == [], "an unindexed take is listed before it is hashed"
        worst = 0.0
        final = None
        while time.monotonic() - began < 60:
            t = time.monotonic()
            client.call("status_request", pb.StatusRequest(), "status", timeout_ms=500)
            worst = max(worst, time.monotonic() - t)
            listing = client.call("list_files", pb.ListFiles(take_id=old), "file_list", timeout_ms=500)
            if listing.final:
                final = listing
                break
            time.sleep(0.05)
        assert final is not None, "the old take was never hashed"
        assert [(f.path, f.bytes) for f in final.files] == [("node-a/cam0.mkv", 1 << 30)]
        assert final.files[0].sha256 == hashlib.sha256(bytes(1 << 30)).hexdigest()
        assert worst < 0.5, f"a status request waited {worst:.2f} s while the node hashed"
    finally:
        client.close()
        n2.cleanup()


# ---- 9e. An abort or a disable sent by someone else is named at once ----

def _start_take_and_find_it(tmp_path, seconds: float = 6):
    """Two one-camera nodes and a `coord start-take` recording on them (stdout and stderr piped)."""
    nodes = [Node(tmp_path / f"n{i}", extra_args=["--name", f"node-{i}", "--synthetic", "cam0"]) for i in (1, 2)]
    rig = tmp_path / "rig.yaml"
    rig.write_text("version: 1\nnodes:\n" + "".join(
        f"  - name: node-{i}\n    endpoint: {n.endpoint}\n" for i, n in enumerate(nodes, start=1)))
    proc = subprocess.Popen([str(COORD), "start-take", "--rig", str(rig), "--seconds", str(seconds), "--size", "320x240",
                             "--takes-dir", str(tmp_path / "takes")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return nodes, proc


def _recording_take(client, pb, deadline_s=30):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        status = client.call("status_request", pb.StatusRequest(), "status")
        if status.state == pb.Status.RECORDING and any(c.frames > 10 for c in status.cameras):
            return status.take_id
        time.sleep(0.1)
    raise AssertionError("the take never started recording")


@pytest.mark.parametrize("what", ["abort", "disable"])
def test_an_abort_or_disable_from_someone_else_is_named_promptly(tmp_path, zctx, pb, what):
    nodes, proc = _start_take_and_find_it(tmp_path)
    stranger = Client(zctx, nodes[1].endpoint, pb)
    try:
        take_id = _recording_take(stranger, pb)
        sent = time.monotonic()
        if what == "abort":
            stranger.call("abort", pb.Abort(take_id=take_id, reason="pytest stranger"), "ack")
            needle = "was aborted on node node-2 by another coordinator"
        else:
            stranger.call("adjust_camera", pb.AdjustCamera(take_id=take_id, camera="cam0", action=pb.AdjustCamera.DISABLE,
                                                           from_group=0, reason="pytest stranger"), "ack")
            needle = "camera node-2/cam0 was disabled by another coordinator"
        named_after = None
        lines = []
        for line in proc.stderr:
            lines.append(line)
            if needle in line and named_after is None:
                named_after = time.monotonic() - sent
        proc.wait(timeout=60)
        text = "".join(lines)
        assert named_after is not None and named_after < 3, f"named after {named_after} s: {text}"
        assert proc.returncode == 4, text
        last = lines[-1]
        assert "node-2" in last and ("aborted" in last or "disabled by another" in last), last
        assert "frames.csv holds" not in last or "disabled by another" in last, last
    finally:
        stranger.close()
        if proc.poll() is None:
            proc.kill()
        for n in nodes:
            n.cleanup()


# ---- 3. The staging directory removed mid-take ----

def test_a_staging_directory_removed_mid_take_ends_the_cameras_with_an_event(node, client, pb):
    take_id = new_take_id("rmrf")
    configure_and_arm(client, take_id)
    client.call("start_at", pb.StartAt(take_id=take_id, start_group=0, stop_group=600), "ack")
    deadline = time.monotonic() + 15
    while client.call("status_request", pb.StatusRequest(), "status").cameras[0].frames < 30:
        assert time.monotonic() < deadline, "the take never recorded a second"
        time.sleep(0.1)
    shutil.rmtree(node.staging / take_id)
    removed = time.monotonic()
    while True:
        status = client.call("status_request", pb.StatusRequest(), "status")
        if status.cameras[0].finished:
            break
        assert time.monotonic() - removed < 5, "the camera went on recording into deleted files"
        time.sleep(0.1)
    where = str(node.staging / take_id)
    assert where in status.cameras[0].error and "deleted" in status.cameras[0].error, status.cameras[0].error
    lost = [e for e in status.events if e.kind == "staging-lost"]
    assert len(lost) == 1 and where in lost[0].detail and lost[0].camera == "cam0", list(status.events)
    assert status.cameras[0].frames < 600
    assert "deleted" in node.stderr_tail()
    assert_hello_ok(client)


# ---- 8. A 5 s stall does not halve a camera for the rest of the take ----

def test_a_node_stalled_for_five_seconds_gets_its_camera_back_and_the_repeats_are_said(tmp_path, zctx, pb):
    nodes, proc = _start_take_and_find_it(tmp_path, seconds=24)
    watcher = Client(zctx, nodes[1].endpoint, pb)
    try:
        _recording_take(watcher, pb)
        os.kill(nodes[1].proc.pid, signal.SIGSTOP)
        time.sleep(5)  # the stall itself is what is tested: five seconds of a frozen node
        os.kill(nodes[1].proc.pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        take = next((tmp_path / "takes").iterdir())
        manifest = json.loads((take / "manifest.json").read_text())
        kinds = [(e["kind"], e["node"]) for e in manifest["events"]]
        rows = (take / "node-2" / "cam0.frames.csv").read_text().splitlines()[1:]
        dups = sum(1 for r in rows if r.endswith(",dup"))
        if ("camera-slowed", "node-2") in kinds:
            assert ("camera-restored", "node-2") in kinds, kinds
            restored = next(e for e in manifest["events"] if e["kind"] == "camera-restored")
            slowed = next(e for e in manifest["events"] if e["kind"] == "camera-slowed")
            assert restored["t_us"] - slowed["t_us"] < 15_000_000, (slowed, restored)
        # The stall fills about 5 s of frames; a camera left at one group in 2 would repeat half of the rest too.
        assert dups < 0.45 * len(rows), f"{dups} of {len(rows)} frames of node-2/cam0 are repeats"
        first = out.splitlines()[0]
        assert "of the frames are repeats" in first and "node-2/cam0" in first, first
        report = json.loads((take / "sync-report.json").read_text())
        assert report["repeats_note"] and report["repeated_fraction"] > 0.02, report.get("repeats_note")
    finally:
        watcher.close()
        if proc.poll() is None:
            proc.kill()
        for n in nodes:
            os.kill(n.proc.pid, signal.SIGCONT) if n.proc.poll() is None else None
            n.cleanup()


# ---- 4. A node killed with SIGKILL mid-take ----

def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def two_nodes_recording(tmp_path: Path, zctx, pb):
    """node-1 and node-2 (one synthetic camera each, on fixed ports so a restart keeps its endpoint) recording an 8 s
    take from `coord start-take`: their arguments, the nodes, the coordinator's process and a client on node-2."""
    ports = [free_port(), free_port()]
    args = [["--name", f"node-{i}", "--synthetic", "cam0", "--endpoint", f"tcp://127.0.0.1:{p}"] for i, p in zip((1, 2), ports)]
    nodes = [Node(tmp_path / f"n{i}", extra_args=a) for i, a in zip((1, 2), args)]
    rig = tmp_path / "rig.yaml"
    rig.write_text("version: 1\nnodes:\n" + "".join(
        f"  - name: node-{i}\n    endpoint: tcp://127.0.0.1:{p}\n" for i, p in zip((1, 2), ports)))
    proc = subprocess.Popen([str(COORD), "start-take", "--rig", str(rig), "--seconds", "8", "--size", "320x240",
                             "--takes-dir", str(tmp_path / "takes")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return args, nodes, proc, Client(zctx, nodes[1].endpoint, pb)


def test_a_node_killed_mid_take_is_repaired_on_restart_and_the_take_names_it(tmp_path, zctx, pb):
    args, nodes, proc, watcher = two_nodes_recording(tmp_path, zctx, pb)
    try:
        deadline = time.monotonic() + 30
        while True:
            status = watcher.call("status_request", pb.StatusRequest(), "status")
            if status.state == pb.Status.RECORDING and status.cameras[0].frames >= 100:
                break
            assert time.monotonic() < deadline, "the take never recorded"
            time.sleep(0.05)
        take_id = status.take_id
        watcher.close()
        nodes[1].proc.kill()   # SIGKILL: no trailer, rows still buffered
        nodes[1].proc.wait(timeout=10)
        nodes[1] = Node(tmp_path / "n2", extra_args=args[1])
        assert "recovered a take interrupted by a crash" in nodes[1].stderr_tail(), nodes[1].stderr_tail()
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 4, err
        last = err.strip().splitlines()[-1]
        assert "node-2/cam0 was recovered after node node-2 stopped mid-take" in last, last
        take = next((tmp_path / "takes").iterdir())
        mkv, csv = take / "node-2" / "cam0.mkv", take / "node-2" / "cam0.frames.csv"
        probe = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
                                "stream=nb_read_frames:format=duration", "-of", "json", str(mkv)],
                               capture_output=True, text=True, timeout=60)
        assert probe.returncode == 0 and probe.stderr == "", probe.stderr
        info = json.loads(probe.stdout)
        frames = int(info["streams"][0]["nb_read_frames"])
        # Clusters reach the disk once a second: what was flushed before the kill is all there.
        assert float(info["format"]["duration"]) > 0 and frames >= 60, info
        rows = csv.read_text().splitlines()[1:]
        assert len(rows) == frames, f"{len(rows)} rows for {frames} frames"
        assert [int(r.split(",")[1]) for r in rows] == list(range(frames))
        assert any(r.endswith(",recovered") for r in rows), "no rebuilt row: the rows were not lost?"
        manifest = json.loads((take / "manifest.json").read_text())
        assert manifest["status"] == "partial"
        assert any(e["kind"] == "recovered" and e["node"] == "node-2" for e in manifest["events"])
        # Every frame node-2 recorded before the kill plays, and the checker reports instead of crashing.
        check = subprocess.run(["python3", str(ROOT / "scripts" / "check-take.py"), str(take)],
                               capture_output=True, text=True, timeout=300)
        assert check.returncode == 1 and "Traceback" not in check.stderr, check.stderr
        assert "node-2/cam0" in check.stderr and "recovered" in check.stderr, check.stderr
        assert take_id in manifest["take_id"]
    finally:
        if proc.poll() is None:
            proc.kill()
        for n in nodes:
            n.cleanup()


# ---- A node stopped by its own SIGTERM (issue 34 item 7) ----

@pytest.mark.parametrize("restarted", [False, True], ids=["left-stopped", "restarted"])
def test_a_node_stopped_by_its_own_sigterm_mid_take_is_named_as_such(tmp_path, zctx, pb, restarted):
    """SIGTERM to one node mid-take: its cameras end two groups on with their files finalized, its status says why
    before it exits, and the manifest names the node's own SIGTERM, never "another coordinator or peer" (what a
    coordinator concluded when a restarted node answered with no take). Restarted (as systemd would), the node
    still says so, and its files are collected and play to their end, every frame with its row."""
    args, nodes, proc, watcher = two_nodes_recording(tmp_path, zctx, pb)
    try:
        deadline = time.monotonic() + 30
        while True:
            status = watcher.call("status_request", pb.StatusRequest(), "status")
            if status.state == pb.Status.RECORDING and status.cameras[0].frames >= 60:
                break
            assert time.monotonic() < deadline, "the take never recorded"
            time.sleep(0.05)
        watcher.close()
        assert nodes[1].terminate(timeout=20) == 0, nodes[1].stderr_tail()
        assert "was stopped (SIGTERM, its service shutting down)" in nodes[1].stderr_tail(), nodes[1].stderr_tail()
        if restarted:
            nodes[1] = Node(tmp_path / "n2", extra_args=args[1])
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 4, err
        take = next((tmp_path / "takes").iterdir())
        manifest = json.loads((take / "manifest.json").read_text())
        assert manifest["status"] == "partial"
        everything = json.dumps(manifest) + err
        assert "another coordinator" not in everything, [e for e in manifest["events"] if "another" in e["detail"]]
        stopped = [e for e in manifest["events"] if e["kind"] == "node-stopped"]
        assert len(stopped) == 1 and stopped[0]["node"] == "node-2", manifest["events"]
        assert "node node-2 was stopped (SIGTERM, its service shutting down)" in stopped[0]["detail"], stopped
        ended = int(re.search(r"after group (\d+)", stopped[0]["detail"]).group(1))
        cameras = {(c["node"], c["camera"]): c for c in manifest["cameras"]}
        assert cameras[("node-1", "cam0")]["frames"] == manifest["groups"]
        if restarted:
            # Collected after the restart: the file plays to its end and ends on the group the event names.
            mkv, csv = take / "node-2" / "cam0.mkv", take / "node-2" / "cam0.frames.csv"
            probe = subprocess.run(["ffprobe", "-v", "error", "-count_packets", "-select_streams", "v:0", "-show_entries",
                                    "stream=nb_read_packets", "-of", "csv=p=0", str(mkv)], capture_output=True, text=True)
            assert probe.returncode == 0 and probe.stderr == "", probe.stderr
            rows = csv.read_text().splitlines()[1:]
            assert int(probe.stdout) == len(rows) == cameras[("node-2", "cam0")]["frames"] == ended + 1
            assert [int(r.split(",")[1]) for r in rows] == list(range(ended + 1))
    finally:
        if proc.poll() is None:
            proc.kill()
        for n in nodes:
            n.cleanup()
