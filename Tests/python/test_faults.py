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


def test_a_staging_disk_gone_read_only_mid_take_ends_that_nodes_cameras_and_loses_nothing(tmp_path, ext4):
    disk, trigger = ext4
    left = Node(tmp_path / "left", extra_args=["--name", "left", "--synthetic", "cam0,cam1", "--staging", str(disk / "staging")])
    right = Node(tmp_path / "right", extra_args=["--name", "right", "--synthetic", "cam0"])
    try:
        rig = tmp_path / "rig.yaml"
        rig.write_text(f"version: 1\nnodes:\n  - name: left\n    endpoint: {left.endpoint}\n"
                       f"  - name: right\n    endpoint: {right.endpoint}\n")
        takes = tmp_path / "takes"
        proc = subprocess.Popen([str(COORD), "start-take", "--rig", str(rig), "--seconds", "8", "--size", "320x240",
                                 "--takes-dir", str(takes)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Wait until left's frames.csv holds 60 rows (2 s of frames), then fail its disk.
        deadline = time.monotonic() + 60

        def rows() -> int:
            found = list((disk / "staging").rglob("cam0.frames.csv"))
            return max(0, len(found[0].read_text().splitlines()) - 1) if found else 0
        while rows() < 60:
            assert time.monotonic() < deadline and proc.poll() is None, "left never recorded 60 frames"
            time.sleep(0.2)
        trigger.write_text("1")
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(f"start-take did not finish within 120 s after the disk failed:\n{err[-3000:]}")
        assert proc.returncode == 4, err  # partial: some cameras ended early
        take = next(d for d in takes.iterdir() if d.is_dir())
        manifest = json.loads((take / "manifest.json").read_text())
        assert manifest["status"] == "partial"
        failed = [e for e in manifest["events"] if e["kind"] == "write-failed"]
        assert {e["camera"] for e in failed} == {"cam0", "cam1"} and all(e["node"] == "left" for e in failed), manifest["events"]
        assert all("Read-only" in e["detail"] or "read-only" in e["detail"] for e in failed), failed
        cameras = {(c["node"], c["camera"]): c for c in manifest["cameras"]}
        groups = manifest["groups"]
        assert cameras[("right", "cam0")]["frames"] == groups, "the other node's camera did not record every group"
        for cam in ("cam0", "cam1"):
            c = cameras[("left", cam)]
            assert 30 <= c["frames"] < groups, (cam, c["frames"], groups)
            # Every frame the node says it recorded is in the collected file and plays.
            assert frames_in(take / "left" / f"{cam}.mkv") >= c["frames"], (cam, c["frames"])
        failures, _ = check_take.check(take)
        assert not [f for f in failures if "right" in f], failures
    finally:
        left.cleanup()
        right.cleanup()


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
    left = Node(tmp_path / "left", extra_args=["--name", "left", "--synthetic", "cam0,cam1", "--staging", str(tmpfs / "staging")])
    right = Node(tmp_path / "right", extra_args=["--name", "right", "--synthetic", "cam0"])
    try:
        rig = tmp_path / "rig.yaml"
        rig.write_text(f"version: 1\nnodes:\n  - name: left\n    endpoint: {left.endpoint}\n"
                       f"  - name: right\n    endpoint: {right.endpoint}\n")
        takes = tmp_path / "takes"
        # A camera asks its disk for more room about every frame: it meets the full disk at its next frame, before
        # (or, at the latest, within the two groups of) a stop for the node's pressure, sampled twice a second.
        proc = subprocess.Popen([str(COORD), "start-take", "--rig", str(rig), "--seconds", "10", "--size", "320x240",
                                 "--takes-dir", str(takes)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60

        def rows() -> int:
            found = list((tmpfs / "staging").rglob("cam0.frames.csv"))
            return max(0, len(found[0].read_text().splitlines()) - 1) if found else 0
        while rows() < 30:
            assert time.monotonic() < deadline and proc.poll() is None, "left never recorded 30 frames"
            time.sleep(0.1)
        fill(tmpfs)
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(f"start-take did not finish within 120 s after the disk filled:\n{err[-3000:]}")
        assert proc.returncode == 4, err
        take = next(d for d in takes.iterdir() if d.is_dir())
        manifest = json.loads((take / "manifest.json").read_text())
        assert manifest["status"] == "partial"
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
        groups = manifest["groups"]
        assert cameras[("right", "cam0")]["frames"] == groups, "the other node's camera did not record every group"
        for cam in ("cam0", "cam1"):
            c = cameras[("left", cam)]
            assert 30 <= c["frames"] < groups, (cam, c["frames"], groups)
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
        failures, _ = check_take.check(take)
        assert not [f for f in failures if "right" in f], failures
    finally:
        left.cleanup()
        right.cleanup()
