"""Issue 34 item 7, the lower ones, against the real binaries: a device id from the command line is repeated cut
short with its control characters escaped (a 10 kB id was echoed whole, a newline split the sentence); the metrics
URL brackets an IPv6 host (it was printed http://::1:PORT); a bad take name is 'take name', not 'take name name'.
(A rig file's -0.0 and deliver's manifest field are unit tests: RigFileControlsTests, JSONFieldProblemTests.)"""
from __future__ import annotations

import re
import subprocess
import urllib.request

import pytest

from conftest import Node, node_binary
from test_console import ConsoleDemo

LONG = "/dev/" + "v" * 10_000


def node_refusal(tmp_path, *args: str) -> tuple[int, str]:
    proc = subprocess.run([str(node_binary()), "--name", "node-a", "--endpoint", "tcp://127.0.0.1:*",
                           "--staging", str(tmp_path / "staging"), *args], capture_output=True, text=True, timeout=30)
    return proc.returncode, proc.stderr


def one_readable_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("coord-node: ")]
    assert len(lines) == 1, stderr[:2000]
    assert len(lines[0].encode()) < 400, lines[0][:400]
    return lines[0]


@pytest.mark.parametrize("device", [LONG, "/dev/vid\neo0", "/dev/vid\x1b[31meo0"])
def test_a_v4l2_device_that_cannot_be_opened_is_named_short_on_one_line(tmp_path, device):
    code, stderr = node_refusal(tmp_path, "--v4l2", f"cam0={device}")
    assert code == 1, stderr[:2000]
    line = one_readable_line(stderr)
    assert line.startswith("coord-node: camera cam0: "), line
    if device == LONG:
        assert "… (10005 bytes)" in line, line
    else:
        assert "\x1b" not in line and (r"\n" in line or r"\u{1B}" in line), line


@pytest.mark.parametrize("option,entry", [("--v4l2", "cam0=relative" + "x" * 10_000), ("--audio", "mic0" + "\n" * 3),
                                          ("--genicam", "cam0" + "x" * 10_000)])
def test_a_refused_entry_is_named_short_on_one_line(tmp_path, option, entry):
    code, stderr = node_refusal(tmp_path, "--synthetic", "cam9", option, entry)
    assert code == 2, stderr[:2000]
    line = one_readable_line(stderr)
    assert f"{option} entry \"" in line, line


def test_the_metrics_url_of_an_ipv6_address_is_bracketed(tmp_path):
    node = Node(tmp_path, ["--metrics", "[::1]:0"])
    try:
        line = node.stdout_lines.get(timeout=20)
        m = re.match(r"^METRICS (http://\[::1\]:(\d+)/metrics)$", line or "")
        assert m, f"METRICS line {line!r}"
        with urllib.request.urlopen(m.group(1), timeout=5) as r:
            assert r.status == 200 and b"coord_" in r.read()
    finally:
        node.terminate()


def test_a_bad_take_name_says_take_name_once_on_one_line(tmp_path):
    demo = ConsoleDemo(tmp_path, nodes=1, cameras=1)
    try:
        status, body = demo.send("POST", "/api/takes", {"name": "a\nb"})
        assert status == 422, body
        assert body["error"] == 'take name "a\\nb" is not allowed: use 1 to 64 of A-Z a-z 0-9 . _ -', body
        status, body = demo.send("POST", "/api/takes", {"name": "n" * 10_000})
        assert status == 422 and "take name name" not in body["error"] and len(body["error"]) < 300, body
    finally:
        demo.close()
