"""Issue 37 / CONTRACT §16: libcamera cameras on a node, as far as a machine without a camera can show — the real
libcamera (Debian's libcamera 0.0.3 here) lists none without failing, a camera id it does not list is one sentence
naming the id and what libcamera lists, and the node file's `libcamera:` entries are checked like the others."""
from __future__ import annotations

import subprocess

import pytest

from conftest import node_binary


def run(args, timeout=60) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_list_cameras_lists_libcamera_and_finds_none_here():
    done = run([node_binary(), "--list-cameras"])
    assert done.returncode == 0, done.stderr
    assert "libcamera: no cameras found" in done.stdout.splitlines(), done.stdout
    assert "libcamera" not in done.stderr.lower() or "error" not in done.stderr.lower(), done.stderr


def test_a_camera_id_libcamera_does_not_list_is_one_sentence(tmp_path):
    done = run([node_binary(), "--name", "n1", "--endpoint", "tcp://127.0.0.1:*", "--staging", tmp_path / "staging",
                "--libcamera", "x=missing"])
    lines = [l for l in done.stderr.splitlines() if l.strip()]
    assert done.returncode == 1 and done.stdout == "", (done.returncode, done.stdout, done.stderr)
    assert lines == ["coord-node: camera x: libcamera has no camera missing (it lists none)."], lines


@pytest.mark.parametrize("body, needle", [
    ("cameras:\n  - {name: c, libcamera: /base/x/imx708@1a, v4l2: /dev/video0}\n", "line 3: cameras[0] (camera c) has libcamera and also"),
    ("cameras:\n  - {name: c, libcamera: \"\"}\n", "line 3: cameras[0].libcamera is empty"),
    ("cameras:\n  - {name: c, libcamera: /base/x/imx708@1a, bus: usb1}\n", "cameras[0].bus is for synthetic cameras"),
])
def test_a_bad_libcamera_entry_in_the_node_file_is_one_sentence(tmp_path, body, needle):
    path = tmp_path / "node.yaml"
    path.write_text("version: 1\n" + body)
    done = run([node_binary(), "--config", path], timeout=30)
    assert done.returncode == 2 and needle in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_node_file_names_a_libcamera_camera(tmp_path):
    path = tmp_path / "node.yaml"
    path.write_text(f"version: 1\nname: n1\nendpoint: tcp://127.0.0.1:*\nstaging: {tmp_path / 'staging'}\n"
                    "cameras:\n  - {name: cam0, libcamera: /base/axi/pcie@120000/rp1/i2c@88000/imx708@1a}\n")
    done = run([node_binary(), "--config", path])
    lines = [l for l in done.stderr.splitlines() if l.strip()]
    assert done.returncode == 1, lines
    assert lines[-1] == "coord-node: camera cam0: libcamera has no camera /base/axi/pcie@120000/rp1/i2c@88000/imx708@1a (it lists none).", lines
