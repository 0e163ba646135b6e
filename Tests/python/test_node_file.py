"""The node file (CONTRACT §7): `coord-node --config node.yaml` alone runs a node that records a take passing the
contract checker; flags override the file; unknown keys are warned about; a bad value is refused in one sentence
naming the file and its line."""
from __future__ import annotations

import queue
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import node_binary
from test_budget_pressure import check_take, run_coord


class FileNode:
    """coord-node started with --config (and any extra flags), READY read from stdout."""

    def __init__(self, tmp_path: Path, text: str, *flags: str):
        self.path = tmp_path / "node.yaml"
        self.path.write_text(text)
        self.stderr_path = tmp_path / "node.stderr"
        self._err = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen([str(node_binary()), "--config", str(self.path), *flags],
                                     stdout=subprocess.PIPE, stderr=self._err, text=True)
        lines: "queue.Queue[str]" = queue.Queue()
        threading.Thread(target=lambda: lines.put(self.proc.stdout.readline()), daemon=True).start()
        line = lines.get(timeout=20)
        m = re.match(r"READY (tcp://\S+)", line)
        assert m, f"no READY line (got {line!r}); stderr: {self.stderr_path.read_text()}"
        self.endpoint = m.group(1)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=15)
        self._err.close()


def test_a_node_run_from_its_node_file_alone_records_a_good_take(tmp_path):
    node = FileNode(tmp_path, f"""version: 1
name: from-file
endpoint: tcp://127.0.0.1:*
staging: {tmp_path / 'staging'}
cameras:
  - {{name: cam0, synthetic: true, bus: usb1}}
  - {{name: cam1, synthetic: true}}
buses: {{usb1: 5000}}
audio:
  - {{name: mic0, synthetic: true}}
log_level: info
""")
    try:
        rig = tmp_path / "rig.yaml"
        rig.write_text(f"version: 1\nnodes:\n  - name: from-file\n    endpoint: {node.endpoint}\n")
        takes = tmp_path / "takes"
        r = run_coord("start-take", "--rig", rig, "--seconds", "2", "--size", "320x240", "--takes-dir", takes)
        assert r.returncode == 0, r.stderr
        take = next(d for d in takes.iterdir() if d.is_dir())
        failures, _ = check_take.check(take)
        assert failures == [], failures
        assert sorted(p.name for p in (take / "from-file").glob("*.mkv")) == ["cam0.mkv", "cam1.mkv"]
        assert [p.name for p in (take / "from-file").glob("*.mka")] == ["mic0.mka"], "the file's microphone records"
    finally:
        node.stop()


def test_flags_override_the_file_and_unknown_keys_are_warned_about(tmp_path):
    node = FileNode(tmp_path, f"""version: 1
name: in-file
endpoint: tcp://127.0.0.1:*
staging: {tmp_path / 'staging'}
cameras: [{{name: cam0, synthetic: true}}]
colour: blue
""", "--name", "on-command-line")
    try:
        rig = tmp_path / "rig.yaml"
        rig.write_text(f"version: 1\nnodes:\n  - name: on-command-line\n    endpoint: {node.endpoint}\n")
        r = run_coord("status", "--rig", rig)
        assert r.returncode == 0 and "on-command-line" in r.stdout, r.stdout + r.stderr
    finally:
        node.stop()
    assert re.search(r"unknown key colour ignored \(line 6\)", node.stderr_path.read_text()), node.stderr_path.read_text()


@pytest.mark.parametrize("body, needle", [
    ("version: 2\n", "version 2 is not supported"),
    ("name: a b\n", "line 2: name \"a b\" is not allowed"),
    ("endpoint: http://x:1\n", "line 2: endpoint must be a ZeroMQ endpoint"),
    ("staging: relative/dir\n", "line 2: staging must be an absolute path"),
    ("cameras:\n  - {name: c, v4l2: /dev/video0, synthetic: true}\n", "line 3: cameras[0] (camera c) has both"),
    ("cameras:\n  - {name: c}\n", "needs v4l2"),
    ("cameras:\n  - {name: c, synthetic: true, bus: usb9}\n", "line 3: cameras[0].bus usb9 is not declared"),
    ("cameras:\n  - {name: c, synthetic: true}\n  - {name: c, synthetic: true}\n", "line 4: cameras[1].name c is listed twice"),
    ("log_level: loud\n", "line 2: log_level must be one of"),
    ("audio:\n  - {name: m}\n", "line 3: audio[0] (microphone m) needs alsa"),
    ("audio:\n  - {name: m, alsa: default, synthetic: true}\n", "line 3: audio[0] (microphone m) has both"),
    ("insecure: maybe\n", "line 2: insecure must be true or false"),
    ("keys: {cert: /x.key_secret}\n", "keys has no authorized"),
    ("version: 1:0:0:0:0:0:0:0:0:0:0:0\n", "base-60"),
    ("- a\n- b\n", "must be a mapping"),
    ("name: [unclosed\n", "not valid YAML"),
])
def test_a_bad_node_file_is_one_sentence_naming_its_line(tmp_path, body, needle):
    path = tmp_path / "node.yaml"
    path.write_text(body if body.startswith(("version", "-")) else "version: 1\n" + body)
    r = subprocess.run([str(node_binary()), "--config", str(path)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr and str(path) in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_missing_node_file_is_named(tmp_path):
    r = subprocess.run([str(node_binary()), "--config", str(tmp_path / "nope.yaml")], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "no such node file" in r.stderr, r.stderr


def alias_bomb(top: str) -> str:
    """Nine levels of nine aliases: a few hundred bytes that expand to 9⁹ values (minutes of CPU unguarded)."""
    text = "a: &a [" + ",".join(['"lol"'] * 9) + "]\n"
    names = "abcdefghi"
    for previous, name in zip(names, names[1:]):
        text += f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]\n"
    return text + f"{top}: *i\n"


@pytest.mark.parametrize("reader", ["coord plan --rig", "coord-node --config"])
def test_an_alias_bomb_is_refused_in_one_sentence_within_seconds(tmp_path, reader):
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb("nodes" if reader.startswith("coord plan") else "cameras"))
    argv = ["plan", "--rig", str(path)] if reader.startswith("coord plan") else None
    started = time.monotonic()
    if argv:
        r = run_coord(*argv, timeout=30)
    else:
        r = subprocess.run([str(node_binary()), "--config", str(path)], capture_output=True, text=True, timeout=30)
    took = time.monotonic() - started
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert took < 5, f"{reader} took {took:.1f} s to refuse the bomb"
    assert "aliases" in r.stderr and str(path) in r.stderr and "line " in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
