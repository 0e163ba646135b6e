"""Faults a real rig meets, as tests (issue 14 item 4), beyond those in test_node_defects.py, test_collect.py and
test_lab_take.py (SIGKILL and restart, SIGSTOP for 5 s, the staging directory deleted, a killed coordinator, two
coordinators at once, a 10 s link cut):

- a node's staging disk goes read-only mid-take, as ext4 does on an I/O error (errors=remount-ro): that node's
  cameras end at once with a `write-failed` event naming the error, the other node records every group, the take
  is partial and says which cameras ended, and every frame written before the error is collected and plays.
- a node's staging disk is filled to the last byte mid-take (a tmpfs): its cameras end at their last whole frame,
  their .mkv files finished and playing to their end with a frames.csv row for every frame (issue 34 item 7).

Needs root (a loop-mounted ext4 filesystem, a tmpfs); skipped otherwise.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import Node
from test_budget_pressure import COORD, check_take

if os.geteuid() != 0:
    pytest.skip("a read-only disk needs root (a loop-mounted ext4 filesystem)", allow_module_level=True)
for _tool in ("losetup", "mkfs.ext4", "mount", "ffprobe"):
    if shutil.which(_tool) is None:
        pytest.skip(f"`{_tool}` is not installed", allow_module_level=True)


@pytest.fixture
def ext4(tmp_path):
    """A 300 MB ext4 filesystem that goes read-only on its first error, mounted at tmp_path/disk."""
    image, mount = tmp_path / "disk.img", tmp_path / "disk"
    with open(image, "wb") as f:
        f.truncate(300 << 20)
    subprocess.run(["mkfs.ext4", "-q", str(image)], check=True)
    mount.mkdir()
    subprocess.run(["mount", "-o", "loop,errors=remount-ro", str(image), str(mount)], check=True)
    device = subprocess.run(["findmnt", "-n", "-o", "SOURCE", str(mount)], capture_output=True, text=True).stdout.strip()
    yield mount, Path("/sys/fs/ext4") / Path(device).name / "trigger_fs_error"
    subprocess.run(["umount", "-l", str(mount)], check=False)
    subprocess.run(["losetup", "-d", device], check=False)


def frames_in(path: Path) -> int:
    out = subprocess.run(["ffprobe", "-v", "error", "-count_packets", "-select_streams", "v:0", "-show_entries",
                          "stream=nb_read_packets", "-of", "csv=p=0", str(path)], capture_output=True, text=True)
    return int(out.stdout.strip() or 0)


def take_with_a_failing_disk(tmp_path: Path, staging: Path, seconds: int, rows_before: int, fail, what: str):
    """Nodes left (cam0, cam1, staging on `staging`) and right (cam0) record a `seconds` take with `coord start-take`;
    once left's cam0 has `rows_before` rows, `fail()` breaks its disk. The take must end partial (exit 4) within
    120 s; returns its directory and manifest, and checks that right recorded every group and nothing of right fails."""
    left = Node(tmp_path / "left", extra_args=["--name", "left", "--synthetic", "cam0,cam1", "--staging", str(staging)])
    right = Node(tmp_path / "right", extra_args=["--name", "right", "--synthetic", "cam0"])
    try:
        rig = tmp_path / "rig.yaml"
        rig.write_text(f"version: 1\nnodes:\n  - name: left\n    endpoint: {left.endpoint}\n"
                       f"  - name: right\n    endpoint: {right.endpoint}\n")
        takes = tmp_path / "takes"
        proc = subprocess.Popen([str(COORD), "start-take", "--rig", str(rig), "--seconds", str(seconds), "--size", "320x240",
                                 "--takes-dir", str(takes)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60

        def rows() -> int:
            found = list(staging.rglob("cam0.frames.csv"))
            return max(0, len(found[0].read_text().splitlines()) - 1) if found else 0
        while rows() < rows_before:
            assert time.monotonic() < deadline and proc.poll() is None, f"left never recorded {rows_before} frames"
            time.sleep(0.1)
        fail()
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(f"start-take did not finish within 120 s after the disk {what}:\n{err[-3000:]}")
        assert proc.returncode == 4, err  # partial: some cameras ended early
        take = next(d for d in takes.iterdir() if d.is_dir())
        manifest = json.loads((take / "manifest.json").read_text())
        assert manifest["status"] == "partial"
        cameras = {(c["node"], c["camera"]): c for c in manifest["cameras"]}
        assert cameras[("right", "cam0")]["frames"] == manifest["groups"], "the other node's camera did not record every group"
        failures, _ = check_take.check(take)
        assert not [f for f in failures if "right" in f], failures
        return take, manifest
    finally:
        left.cleanup()
        right.cleanup()


def test_a_staging_disk_gone_read_only_mid_take_ends_that_nodes_cameras_and_loses_nothing(tmp_path, ext4):
    disk, trigger = ext4
    # Left's disk fails once its frames.csv holds 60 rows (2 s of frames).
    take, manifest = take_with_a_failing_disk(tmp_path, disk / "staging", 8, 60, lambda: trigger.write_text("1"), "failed")
    failed = [e for e in manifest["events"] if e["kind"] == "write-failed"]
    assert {e["camera"] for e in failed} == {"cam0", "cam1"} and all(e["node"] == "left" for e in failed), manifest["events"]
    assert all("Read-only" in e["detail"] or "read-only" in e["detail"] for e in failed), failed
    cameras = {(c["node"], c["camera"]): c for c in manifest["cameras"]}
    for cam in ("cam0", "cam1"):
        c = cameras[("left", cam)]
        assert 30 <= c["frames"] < manifest["groups"], (cam, c["frames"], manifest["groups"])
        # Every frame the node says it recorded is in the collected file and plays.
        assert frames_in(take / "left" / f"{cam}.mkv") >= c["frames"], (cam, c["frames"])


@pytest.fixture
def tmpfs(tmp_path):
    """A 256 MB tmpfs mounted at tmp_path/small (room for minutes of the take, so the node's pressure stays fair)."""
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path):
    """Fills the tmpfs `disk` at once, as a large copy landing on it would (faster than the node samples its
    pressure): its size is cut to what is used plus 1 MiB, then a file takes that to the last byte (ENOSPC)."""
    st = os.statvfs(disk)
    used_kib = (st.f_blocks - st.f_bfree) * st.f_frsize // 1024
    subprocess.run(["mount", "-o", f"remount,size={used_kib + 1024}k", str(disk)], check=True)
    with open(disk / "filler", "wb", buffering=0) as f:
        for chunk in (65536, 4096, 1):
            try:
                while True:
                    f.write(b"\0" * chunk)
            except OSError as e:
                assert e.errno == 28, e


def test_a_staging_disk_filled_mid_take_ends_that_nodes_cameras_with_files_that_play_to_their_end(tmp_path, tmpfs):
    """Issue 34 item 7: something else fills a node's staging disk mid-take (to the last byte). Each of that node's
    cameras ends at its last whole frame with its .mkv finished (the space its files held past their end takes the
    trailer) and a row in frames.csv for every frame in it; the event says which camera stopped after which group,
    and that node's disk is full. The take is partial, the other node records every group."""
    # A camera asks its disk for more room about every frame: it meets the full disk at its next frame, before
    # (or, at the latest, within the two groups of) a stop for the node's pressure, sampled twice a second.
    take, manifest = take_with_a_failing_disk(tmp_path, tmpfs / "staging", 10, 30, lambda: fill(tmpfs), "filled")
    events = [e for e in manifest["events"] if e["node"] == "left"]
    full = [e for e in events if e["kind"] == "write-failed"]
    # The cameras met the full disk (a pressure shutdown sampled first may have stopped one of them a frame
    # or two before it did: that too ends with finished files).
    assert full, events
    for e in full:
        assert "the staging disk of node left" in e["detail"] and "is full (No space left on device)" in e["detail"], e
        assert "finalized with all" in e["detail"] and "could not be finished" not in e["detail"], e
    assert "files were finalized" not in json.dumps([e for e in events if e["kind"] != "pressure-shutdown"])
    cameras = {(c["node"], c["camera"]): c for c in manifest["cameras"]}
    for cam in ("cam0", "cam1"):
        c = cameras[("left", cam)]
        assert 30 <= c["frames"] < manifest["groups"], (cam, c["frames"], manifest["groups"])
        mkv, csv = take / "left" / f"{cam}.mkv", take / "left" / f"{cam}.frames.csv"
        probe = subprocess.run(["ffprobe", "-v", "error", "-count_packets", "-select_streams", "v:0", "-show_entries",
                                "stream=nb_read_packets", "-of", "csv=p=0", str(mkv)], capture_output=True, text=True)
        # Plays to its end: ffprobe has nothing to say ("File ended prematurely" before), every frame has its row.
        assert probe.returncode == 0 and probe.stderr == "", (cam, probe.stderr)
        table = csv.read_text().splitlines()[1:]
        assert int(probe.stdout) == len(table) == c["frames"], (cam, probe.stdout, len(table), c["frames"])
        assert [int(r.split(",")[1]) for r in table] == list(range(len(table))), cam
        said = [e for e in full if e["camera"] == cam]
        if said:
            assert f"stopped after group {len(table) - 1}:" in said[0]["detail"], (said, len(table))
