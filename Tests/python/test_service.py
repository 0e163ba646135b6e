"""coord-node as a systemd service (issue 13 item 2), against a real datagram socket standing in for systemd's
NOTIFY_SOCKET: READY=1 only once the node answers a handshake; WATCHDOG=1 at half of WATCHDOG_USEC, sent by the
thread that serves requests, so a node stopped with SIGSTOP misses it; STATUS= says the take in progress;
STOPPING=1 on SIGTERM, and the recording in progress is finalized. With JOURNAL_STREAM naming its stderr, the
node logs journald's way: a <N> priority prefix and no timestamp of its own."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import zmq

from conftest import CAMERAS, Client, NoReply, configure_and_arm, new_take_id, node_binary


class Notifications:
    """A datagram socket systemd would own; remembers every notification with its arrival time."""

    def __init__(self, tmp_path: Path):
        self.path = str(tmp_path / "notify.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.received: list[tuple[float, str]] = []

    def wait_for(self, prefix: str, timeout: float) -> tuple[float, str]:
        deadline = time.monotonic() + timeout
        for t, text in self.received:
            if any(line.startswith(prefix) for line in text.splitlines()):
                return t, text
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {prefix} notification within {timeout} s; got {[m for _, m in self.received]}")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            entry = (time.monotonic(), data.decode())
            self.received.append(entry)
            if any(line.startswith(prefix) for line in entry[1].splitlines()):
                return entry

    def collect(self, seconds: float) -> list[tuple[float, str]]:
        end = time.monotonic() + seconds
        got = []
        while (left := end - time.monotonic()) > 0:
            self.sock.settimeout(left)
            try:
                entry = (time.monotonic(), self.sock.recv(4096).decode())
            except socket.timeout:
                break
            self.received.append(entry)
            got.append(entry)
        return got

    def close(self):
        self.sock.close()


def start(tmp_path: Path, notify: Notifications, watchdog_usec: int | None = None, stderr=None) -> subprocess.Popen:
    env = dict(os.environ, NOTIFY_SOCKET=notify.path)
    if watchdog_usec:
        env["WATCHDOG_USEC"] = str(watchdog_usec)
    argv = [str(node_binary()), "--name", "svc", "--endpoint", "tcp://127.0.0.1:*", "--staging", str(tmp_path / "staging"),
            "--synthetic", ",".join(CAMERAS)]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=stderr or subprocess.DEVNULL, text=True)


@pytest.fixture
def notify(tmp_path):
    n = Notifications(tmp_path)
    yield n
    n.close()


def endpoint_of(proc: subprocess.Popen) -> str:
    line = proc.stdout.readline()
    assert line.startswith("READY "), line
    return line.split()[1]


def test_ready_comes_once_the_node_answers_and_status_says_the_take(tmp_path, notify, zctx, pb):
    proc = start(tmp_path, notify)
    try:
        _, text = notify.wait_for("READY=1", 20)
        assert "STATUS=idle, 2 camera(s)" in text, text
        # READY means requests are served: a handshake right now is answered.
        client = Client(zctx, endpoint_of(proc), pb, timeout_ms=2000)
        assert client.hello().node == "svc"
        take_id = new_take_id("svc")
        configure_and_arm(client, take_id)
        client.call("start_at", pb.StartAt(take_id=take_id, start_group=0, stop_group=90), "ack")
        _, text = notify.wait_for(f"STATUS=recording take {take_id}", 10)
        client.close()
    finally:
        proc.kill()
        proc.wait()


def test_the_watchdog_is_kept_at_half_the_interval_and_missed_while_stopped(tmp_path, notify):
    proc = start(tmp_path, notify, watchdog_usec=1_000_000)
    try:
        notify.wait_for("READY=1", 20)
        beats = [t for t, m in notify.collect(3.0) if "WATCHDOG=1" in m]
        assert 4 <= len(beats) <= 8, f"{len(beats)} WATCHDOG=1 in 3 s with WATCHDOG_USEC=1 s"
        gaps = [b - a for a, b in zip(beats, beats[1:])]
        assert max(gaps) < 0.9, gaps
        os.kill(proc.pid, signal.SIGSTOP)
        stopped = [m for _, m in notify.collect(2.0) if "WATCHDOG=1" in m]
        os.kill(proc.pid, signal.SIGCONT)
        assert stopped == [], "a stopped node kept its watchdog"
        notify.wait_for("WATCHDOG=1", 2)
    finally:
        proc.kill()
        proc.wait()


def test_sigterm_says_stopping_and_finalizes_the_recording(tmp_path, notify, zctx, pb):
    proc = start(tmp_path, notify)
    try:
        notify.wait_for("READY=1", 20)
        client = Client(zctx, endpoint_of(proc), pb, timeout_ms=3000)
        take_id = new_take_id("term")
        configure_and_arm(client, take_id)
        client.call("start_at", pb.StartAt(take_id=take_id, start_group=0, stop_group=3000), "ack")
        deadline = time.monotonic() + 10
        while client.call("status_request", pb.StatusRequest(), "status").cameras[0].frames < 30:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        client.close()
        proc.send_signal(signal.SIGTERM)
        notify.wait_for("STOPPING=1", 5)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    mkv = next((tmp_path / "staging" / take_id).rglob("cam0.mkv"))
    probe = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", str(mkv)],
                           capture_output=True, text=True)
    assert probe.returncode == 0 and float(probe.stdout.strip()) >= 1.0, probe.stdout + probe.stderr


def test_logs_follow_journald_conventions_when_stderr_is_the_journal(tmp_path):
    log = tmp_path / "stderr"
    with open(log, "wb") as err:
        info = os.fstat(err.fileno())
        env = dict(os.environ, JOURNAL_STREAM=f"{info.st_dev}:{info.st_ino}")
        proc = subprocess.Popen([str(node_binary()), "--name", "j", "--endpoint", "tcp://127.0.0.1:*", "--staging",
                                 str(tmp_path / "s"), "--synthetic", "cam0"], env=env, stdout=subprocess.PIPE, stderr=err, text=True)
        endpoint_of(proc)
        proc.terminate()
        proc.wait(timeout=15)
    lines = [l for l in log.read_text().splitlines() if l]
    assert lines and all(l.startswith(("<6>", "<5>", "<4>", "<3>", "<7>")) for l in lines), lines
    assert any(l.startswith("<6>coord-node: listening") for l in lines), lines
    # No timestamp of our own: the journal stamps lines.
    assert not any(l[3:7].isdigit() for l in lines), lines
