"""The lab's clock truth (scripts/vmlab_lib/clocktruth.py, guest/clock_responder.py) without a VM: the responder
program answering over a real terminal line on this host (its stamp must lie inside the host's round trip, as both
read the same CLOCK_MONOTONIC), the host's exchange over a real unix socket, one clear sentence when nothing
answers, and the NTP arithmetic (the quickest exchange chosen, offset, rate, the guest → host mapping). The lab
itself (a real virtio-serial port in real guests) is test_vmlab.py's."""
from __future__ import annotations

import os
import pty
import socket
import struct
import subprocess
import sys
import threading
import time
import tty
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
from vmlab_lib import clocktruth  # noqa: E402
from vmlab_lib.image import LabError  # noqa: E402


def test_the_responder_stamps_each_request_inside_the_host_s_round_trip():
    master, slave = pty.openpty()
    tty.setraw(slave)  # bytes through as written: no line discipline, no echo
    responder = subprocess.Popen([sys.executable, str(REPO / "scripts/vmlab_lib/guest/clock_responder.py"),
                                  os.ttyname(slave)])
    try:
        for seq in (7, 8, 9):
            t1 = time.monotonic_ns()
            os.write(master, struct.pack("<I", seq))
            reply = b""
            while len(reply) < 12:
                reply += os.read(master, 12 - len(reply))
            t4 = time.monotonic_ns()
            got, t2 = struct.unpack("<Iq", reply)
            assert got == seq and t1 <= t2 <= t4, (seq, got, t1, t2, t4)
    finally:
        responder.kill()
        responder.wait()
        os.close(master)
        os.close(slave)


def serve(path: Path, offset_ns: int | None) -> socket.socket:
    """A unix socket answering as the responder would on a guest whose clock is host + offset_ns (None: never)."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)

    def run():
        conn, _ = server.accept()
        with conn:
            while data := conn.recv(4096):
                if offset_ns is not None:
                    now = time.monotonic_ns() + offset_ns
                    conn.sendall(b"".join(data[i:i + 4] + struct.pack("<q", now) for i in range(0, len(data), 4)))
    threading.Thread(target=run, daemon=True).start()
    return server


def test_a_burst_finds_the_offset_to_within_its_stated_uncertainty(tmp_path):
    server = serve(tmp_path / "clock.sock", offset_ns=-123_456_789_000)
    try:
        b = clocktruth.burst(SimpleNamespace(name="vm1", dir=tmp_path), count=50)
    finally:
        server.close()
    assert b.exchanges == 50 and 0 < b.min_rtt_us == 2 * b.uncertainty_us <= b.rtt_p50_us, b
    assert abs(b.offset_us - (-123_456_789.0)) <= b.uncertainty_us, b


def test_a_guest_that_never_answers_is_one_sentence_naming_it(tmp_path):
    server = serve(tmp_path / "clock.sock", offset_ns=None)
    try:
        with pytest.raises(LabError, match=r"^vm2's clock responder did not answer on its vmlab.clock port within "
                                           r"1 s: the lab has no clock truth for it\.$"):
            clocktruth.burst(SimpleNamespace(name="vm2", dir=tmp_path), count=5, ready_s=1.0)
    finally:
        server.close()
    with pytest.raises(LabError, match="^vm3's clock port .* cannot be reached"):
        clocktruth.burst(SimpleNamespace(name="vm3", dir=tmp_path / "none"), count=5, ready_s=1.0)


def test_the_quickest_exchange_gives_the_offset_and_two_bursts_the_rate():
    # (t1, t2, t4) ns: the guest 5 s ahead; the quickest exchange (rtt 100 µs) stamped 30 µs after t1
    rows = [(1_000_000_000, 6_000_400_000, 1_001_000_000), (2_000_000_000, 7_000_030_000, 2_000_100_000),
            (3_000_000_000, 8_000_900_000, 3_002_000_000)]
    before = clocktruth.choose(rows)
    assert (before.offset_us, before.uncertainty_us, before.min_rtt_us) == (5_000_000 - 20, 50, 100)
    # 10 s later the guest has gained 400 µs: +40 ppm
    after = clocktruth.choose([(a + 10**10, b + 10**10 + 400_000, c + 10**10) for a, b, c in rows])
    t = clocktruth.Truth("vm1", before, after)
    assert t.rate_ppm == pytest.approx(40.0) and t.uncertainty_us == 50
    host = before.at_us + 4e6
    guest = host + t.offset(host)
    assert t.to_host(guest) == pytest.approx(host, abs=1e-3)
    entry = t.entry()
    assert entry["exchanges"] == 6 and entry["offset_us"] == 4_999_980 and entry["span_s"] == 10


def test_coord_s_clock_track_is_held_against_the_truth_within_its_bound():
    t = clocktruth.Truth("vm1", clocktruth.choose([(0, 5_050_000, 100_000)]),
                         clocktruth.choose([(10**10, 10**10 + 5_050_000, 10**10 + 100_000)]))
    at = t.before.at_us + 1e6
    manifest = {"clock_track": [{"node": "vm1", "t_us": at, "offset_us": 5_000 + 300, "bound_us": 400},
                                {"node": "vm2", "t_us": at, "offset_us": 0, "bound_us": 1}]}
    assert clocktruth.against_track(t, manifest) == {"points": 1, "max_error_us": 300.0, "within_bound": True}
    manifest["clock_track"][0]["offset_us"] = 5_000 + 500  # 500 off: past the bound (400) plus the truth's ±50
    assert clocktruth.against_track(t, manifest)["within_bound"] is False
