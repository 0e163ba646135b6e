"""scripts/netlab.py, the network lab: node namespaces behind a bridge with kernel-level delay and jitter.

Every figure here is measured through the real kernel path (veth, bridge, iptables NFQUEUE, the delayer
process): TCP round trips to an echo server and to a real coord-node started inside a node namespace,
a Hello across the lab, block/unblock, and that nothing of a lab outlives down() or its owner process.
Needs root, iproute2 and iptables (scripts/setup.sh); skipped otherwise.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import zmq

from conftest import CAMERAS, NODE_NAME, Client, NoReply, assert_hello_ok, node_binary

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import netlab  # noqa: E402

if os.geteuid() != 0:
    pytest.skip("netlab needs root (network namespaces, veth, iptables)", allow_module_level=True)
for _tool in ("ip", "iptables", "ping"):
    if shutil.which(_tool) is None:
        pytest.skip(f"`{_tool}` is not installed (scripts/setup.sh installs iproute2, iptables, iputils-ping)",
                    allow_module_level=True)

DELAY_MS = 2.0      # per link and direction: a root↔node round trip crosses the node's link twice
JITTER_MS = 4.0     # one-sided uniform per crossing: RTT = 2·DELAY + U1 + U2, U ~ U(0, JITTER)
MIN_RTT_MS = 2 * DELAY_MS
# p50 of U1 + U2 is JITTER (triangular on [0, 2·JITTER]); the lab's own path adds ~0.1-0.3 ms and a busy
# 2-core box more. Bounds are wide enough for load yet fail if the jitter or the delay went missing.
P50_LOW_MS = 2 * DELAY_MS + 0.5 * JITTER_MS
P50_HIGH_MS = 2 * (DELAY_MS + JITTER_MS) + 4.0
NODE_PORT = 5710
ECHO_PORT = 7007


def pct(samples, q):
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def ns_of_prefix(prefix: str) -> list[str]:
    return [ns for ns in netlab.list_netns() if ns.startswith(prefix + "-")]


def links_of_prefix(prefix: str) -> list[str]:
    return [link for link in netlab.root_links() if link.startswith(prefix + "-")]


def alive(pid: int) -> bool:
    return netlab.process_alive(pid, None) and not netlab._is_zombie(pid)


@pytest.fixture(scope="module")
def lab():
    with netlab.Lab(nodes=2, delay_ms=DELAY_MS, jitter_ms=JITTER_MS, seed=7, tag="pytest") as lab:
        yield lab


@pytest.fixture(scope="module")
def lab_ctx(lab):
    """A ZeroMQ context of our own, destroyed before the lab goes down (no socket reconnects to a node
    address once its route is gone)."""
    ctx = zmq.Context()
    yield ctx
    ctx.destroy(linger=0)


@pytest.fixture(scope="module")
def echo(lab):
    proc = netlab.start_echo(lab, 1, ECHO_PORT)
    yield (lab.node_address(1), ECHO_PORT)
    proc.terminate()


@pytest.fixture(scope="module")
def lab_node(lab, tmp_path_factory):
    """A real coord-node in node 2's namespace, listening on the node's lab address."""
    staging = tmp_path_factory.mktemp("lab-node-staging")
    stderr = open(staging.parent / "lab-coord-node.stderr", "wb")
    endpoint = f"tcp://{lab.node_address(2)}:{NODE_PORT}"
    proc = lab.start_node(2, [str(node_binary()), "--name", NODE_NAME, "--endpoint", endpoint,
                              "--staging", str(staging), "--synthetic", ",".join(CAMERAS),
                              "--parent-pid", str(os.getpid()),
                              # A namespace address without keys: this test is about the wire protocol itself.
                              "--insecure"],
                          stdout=subprocess.PIPE, stderr=stderr)
    line = netlab._read_line(proc, 20.0)
    assert line == f"READY {endpoint}", f"coord-node in the lab printed {line!r}, expected 'READY {endpoint}'"
    yield endpoint
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    stderr.close()


def test_a_lab_refuses_more_than_16_nodes():
    with pytest.raises(ValueError, match="1..16"):
        netlab.Lab(nodes=17)
    with pytest.raises(ValueError):
        netlab.Lab(nodes=0)


def test_addresses_are_private_and_each_node_has_its_own_namespace(lab):
    net = lab.subnet
    assert net.is_private and net.prefixlen == 24 and str(net).startswith("10.213.")
    assert lab.coordinator_address == str(net.network_address + 1)
    assert [lab.node_address(i) for i in (1, 2)] == [str(net.network_address + 11), str(net.network_address + 12)]
    for i in (1, 2):
        out = lab.exec(i, ["ip", "-4", "-o", "addr", "show"], timeout=5).stdout
        assert f"inet {lab.node_address(i)}/24" in out
        routes = lab.exec(i, ["ip", "-4", "route", "show"], timeout=5).stdout
        assert "default" not in routes, f"node {i} has a default route: {routes!r}"
    assert len(lab.root_if) <= 15 and re.fullmatch(r"cl[0-9a-f]{4}", lab.prefix)


def test_tcp_round_trips_carry_the_configured_delay_and_jitter(lab, echo):
    samples = netlab.tcp_rtts_ms(*echo, count=150)
    p10, p50, p90 = pct(samples, 0.1), pct(samples, 0.5), pct(samples, 0.9)
    figures = f"min {min(samples):.3f} p10 {p10:.3f} p50 {p50:.3f} p90 {p90:.3f} max {max(samples):.3f} ms"
    assert min(samples) >= MIN_RTT_MS, f"a round trip beat 2 × delay = {MIN_RTT_MS} ms: {figures}"
    assert P50_LOW_MS <= p50 <= P50_HIGH_MS, f"p50 outside [{P50_LOW_MS}, {P50_HIGH_MS}] ms: {figures}"
    # the p10..p90 width of U1 + U2 is ~1.1 × JITTER; without jitter it would be a few tens of µs
    assert p90 - p10 >= 0.5 * JITTER_MS, f"round trips do not spread as jitter {JITTER_MS} ms should: {figures}"


def test_ping_sees_the_delay_in_both_directions(lab):
    samples = netlab.ping_rtts_ms(lab.node_address(1), 40)
    assert len(samples) >= 38, f"ping lost replies: {len(samples)}/40"
    assert min(samples) >= MIN_RTT_MS * 0.999, f"ICMP round trip {min(samples)} ms < 2 × delay"
    # node to node crosses two links each way: 4 × delay at least
    out = lab.exec(2, ["ping", "-n", "-U", "-c", "10", "-i", "0.01", "-W", "2", lab.node_address(1)],
                   timeout=15).stdout
    n2n = [float(x) for x in re.findall(r"time=([0-9.]+) ms", out)]
    assert len(n2n) >= 9 and min(n2n) >= 4 * DELAY_MS * 0.999, f"node-to-node ping: {n2n}"


def test_coord_node_handshake_and_requests_across_the_lab(lab, lab_ctx, lab_node, pb):
    client = Client(lab_ctx, lab_node, pb)
    try:
        reply = assert_hello_ok(client)
        assert reply.node == NODE_NAME
        samples = []
        for _ in range(40):
            t0 = time.perf_counter()
            client.hello()
            samples.append((time.perf_counter() - t0) * 1000)
    finally:
        client.close()
    figures = f"min {min(samples):.3f} p50 {pct(samples, 0.5):.3f} max {max(samples):.3f} ms"
    assert min(samples) >= MIN_RTT_MS, f"a Hello round trip beat 2 × delay: {figures}"
    # the node's own work adds to the wire time; a debug build answers Hello in well under a millisecond
    assert P50_LOW_MS <= pct(samples, 0.5) <= P50_HIGH_MS + 4.0, f"Hello p50 out of range: {figures}"


def test_block_makes_requests_time_out_and_unblock_restores_them(lab, lab_ctx, lab_node, pb, echo):
    import socket
    # an open TCP connection: stalls while blocked, recovers by retransmission after unblock
    with socket.create_connection(echo, timeout=5) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(b"ping")
        assert s.recv(4) == b"ping"
        lab.block(1)
        try:
            assert lab.is_blocked(1)
            s.settimeout(0.6)
            s.sendall(b"lost")
            with pytest.raises(socket.timeout):
                s.recv(4)
        finally:
            lab.unblock(1)
        assert not lab.is_blocked(1)
        s.settimeout(8)          # the next retransmission (RTO backs off from 200 ms) carries it
        assert s.recv(4) == b"lost"
    # ZeroMQ requests to the coord-node: a timed block ends by itself
    client = Client(lab_ctx, lab_node, pb, timeout_ms=5000)
    try:
        assert_hello_ok(client)
        lab.block(2, 1.5)
        t0 = time.monotonic()
        with pytest.raises(NoReply):
            client.call("hello", pb.Hello(coordinator="pytest"), "hello_reply", timeout_ms=700)
        assert lab.is_blocked(2)
        # the request sent while blocked is answered once the block lifts (after 1.5 s, within a
        # retransmission or two)
        late = client.recv_envelope(timeout_ms=8000, what="the Hello sent while blocked")
        assert late.WhichOneof("body") == "hello_reply"
        assert time.monotonic() - t0 >= 1.4, "a reply got through while the node was blocked"
        assert not lab.is_blocked(2)
        assert_hello_ok(client)
    finally:
        lab.unblock(2)
        client.close()


def test_down_leaves_no_namespace_link_or_process(tmp_path):
    lab = netlab.Lab(nodes=2, delay_ms=0.2, jitter_ms=0.5, tag="pytest-down")
    lab.up()
    try:
        prefix = lab.prefix
        assert len(ns_of_prefix(prefix)) == 3 and lab.root_if in links_of_prefix(prefix)
        delayers = lab.delayer_pids
        assert len(delayers) == 2 and all(alive(p) for p in delayers)
        sleeper = lab.start_node(1, ["sleep", "300"])
        stubborn = lab.start_node(2, [sys.executable, "-c",
                                      "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                                      "time.sleep(300)"])
        time.sleep(0.3)
        assert sleeper.poll() is None and stubborn.poll() is None
    except BaseException:
        lab.down()
        raise
    t0 = time.monotonic()
    lab.down()
    took = time.monotonic() - t0
    assert took < 10, f"down() took {took:.1f} s"
    assert ns_of_prefix(prefix) == [], f"namespaces left: {ns_of_prefix(prefix)}"
    assert links_of_prefix(prefix) == [], f"root links left: {links_of_prefix(prefix)}"
    assert not any(alive(p) for p in delayers), "a delayer outlived down()"
    assert sleeper.poll() is not None and stubborn.poll() is not None, "a process started in the lab outlived it"
    assert not (netlab.STATE_DIR / f"{prefix}.json").exists()
    assert set(lab.delayer_stats) == {1, 2}, "the delayers did not report on SIGTERM"
    lab.down()   # twice is fine
    with pytest.raises(netlab.LabError):
        lab.start_node(1, ["true"])


def _start_cli_lab() -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "netlab.py"), "up", "--nodes", "1",
                             "--delay-ms", "0.5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    line = netlab._read_line(proc, 20.0)
    try:
        return proc, json.loads(line or "")
    except ValueError:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        pytest.fail(f"`netlab.py up` printed {line!r}, not one line of JSON; stderr {proc.stderr.read()!r}")


def test_cli_up_tears_down_on_sigterm():
    proc, info = _start_cli_lab()
    prefix = info["prefix"]
    delayers = netlab.netns_pids(f"{prefix}-n1")
    assert len(delayers) == 1 and info["nodes"][0]["address"].startswith("10.213.")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 0
    assert ns_of_prefix(prefix) == [] and links_of_prefix(prefix) == []
    assert not any(alive(p) for p in delayers)


def test_a_killed_owner_leaves_a_stale_lab_that_cleanup_removes():
    proc, info = _start_cli_lab()
    prefix = info["prefix"]
    delayers = netlab.netns_pids(f"{prefix}-n1")
    assert len(delayers) == 1
    proc.kill()                       # SIGKILL: no atexit, no handler
    proc.wait(timeout=5)
    deadline = time.monotonic() + 3
    while any(alive(p) for p in delayers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in delayers), "the delayer outlived its lab's process"
    assert ns_of_prefix(prefix), "expected the stale namespaces to still be there"
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "netlab.py"), "cleanup"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert prefix in json.loads(out.stdout)["removed"]
    assert ns_of_prefix(prefix) == [] and links_of_prefix(prefix) == []
