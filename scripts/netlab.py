#!/usr/bin/env python3
"""netlab: a network lab for coord's tests and benchmarks.

Starts N coord-node agents (or any program) in their own Linux network namespaces, with kernel-level
delay and jitter on every node's link, and tears everything down again, bounded in time. It uses network
namespaces and private addresses only: nothing it creates has a route off this machine.

Topology of one lab (prefix P = "cl" + 4 hex, unique per lab; K a free 10.213.K.0/24 on this host):

    root namespace            P-sw (switch namespace)           P-n1 … P-nN (one per node)
    P-r 10.213.K.1/24  ---  P-b0 ┐
                                 ├ bridge br0
                           P-bI ┘  ---------------------------  eth0 10.213.K.(10+I)/24

The coordinator and the test process stay in the root namespace and reach node I at 10.213.K.(10+I)
directly (`Lab.node_address(I)`); nodes see the coordinator at 10.213.K.1 (`Lab.coordinator_address`).
Node namespaces have no default route, IPv6 is off on every lab interface, and the root namespace gains
only the connected route of its /24, so lab traffic cannot leave the machine while the lab is up; once it
is down the route is gone, so close every socket to a node address before `down()`.

Delay and jitter (what the lab emulates)
----------------------------------------
The kernel has no netem here, so the delay is made with iptables NFQUEUE: in each node namespace every IPv4
packet (TCP, ICMP, UDP, …) on eth0 is queued, in BOTH directions (INPUT: arriving at the node, OUTPUT:
leaving it), to a *delayer* process running inside that namespace (`netlab.py delayer`). The delayer holds
each packet and then accepts it:

  * per packet, per direction: a packet queued at time t is released at
        t + delay + U, with U drawn uniformly from [0, jitter)   (one-sided uniform jitter, seeded)
  * no reordering within a direction (default): a packet is never released before the one queued before it
    in the same direction, like a real link; under a burst the later packet waits for the earlier one, so
    its delay can exceed delay + jitter. `reorder=True` (`--reorder`) releases each packet at its own time.
  * so one request/reply between the root namespace and a node crosses the node's link twice: its round
    trip is 2·delay + U1 + U2 (+ the hosts' own latency): min ≥ 2·delay, mean ≈ 2·delay + jitter.
    Node-to-node traffic crosses two links each way: 4·delay + four jitter draws per round trip.
  * precision: the delayer runs at SCHED_FIFO priority 10 when allowed (`realtime=True`, the default),
    sleeps in select() until 50 µs before the next packet is due and spins the rest, so the verdict is
    issued 10-40 µs late at p50 and 40-400 µs at p99 on this busy 2-core box (a verdict can deliver the
    packet through the stack within the call, delaying the next one; `netlab.py selftest` prints these
    figures as delayer_late_us). Not counted there, and so added to the configured delay:
    the delayer's wake-up when a packet is queued (~20-40 µs) and the kernel's own path (the veths, the
    bridge and the netlink round trip); together these put a root↔node round trip ~0.1-0.3 ms above
    2·delay + jitter at p50 (compare selftest's tcp_rtt_ms with expected_root_node_rtt_ms).
    It spins at most 50 µs per release, so its CPU use stays small at test packet rates.
  * the delayer exits when the lab process that started it is gone (a pidfd on the parent, with a 0.5 s
    poll as a fallback), so no delayer outlives its lab.

Throughput: every packet passes through a Python process, so bulk transfers through the lab top out
around 100 MB/s here and a saturated delayer adds queueing delay; the lab is for timing and protocol
behaviour, not for bulk-throughput benchmarks.

block(i, seconds): iptables DROP rules at the top of node i's INPUT and OUTPUT chains (ahead of the
delay). To the coordinator the node just goes silent; inside the node, a send that hits the OUTPUT DROP
fails with EPERM for ICMP/UDP, while TCP simply retransmits, so open connections recover after unblock
(after the next retransmission: TCP backs off from 200 ms, so allow a few seconds).

The NFQUEUE rules have no --queue-bypass: if a delayer dies, its node's traffic stops rather than passing
undelayed, so a broken lab fails loudly.

iptables: Debian 12's `iptables` is the nf_tables variant (iptables-nft 1.8.9), and that is what netlab uses
(it calls plain `iptables`/`iptables-restore`, whichever variant the alternatives point to; the tests ran on
iptables-nft; iptables-legacy accepts the same rules in a namespace here, but is not what was measured).
The rules live only inside the node namespaces and vanish with them; the root namespace's firewall is never
touched.

Usage as a module (as root):

    from netlab import Lab
    with Lab(nodes=3, delay_ms=0.2, jitter_ms=0.5) as lab:
        p = lab.start_node(1, ["coord-node", "--endpoint", f"tcp://{lab.node_address(1)}:5710",
                               "--parent-pid", str(os.getpid()), "--insecure", ...], stdout=subprocess.PIPE)
        lab.block(2, 1.0)         # node 2 unreachable for 1 s (all its packets dropped)
        ...

CLI (as root):
    netlab.py up --nodes N [--delay-ms D] [--jitter-ms J]   # prints addresses as JSON; Ctrl-C tears down
    netlab.py cleanup [--all]                              # removes labs whose owner process is gone
    netlab.py selftest                                     # 2-node lab: ping and TCP RTT figures as JSON
    netlab.py delayer --queue Q --delay-ms D --jitter-ms J --seed S [--parent-pid P]   (internal)
    netlab.py echo --port P                                # a TCP echo server (internal, for selftest)

Limits: at most 16 nodes per lab; every command has a timeout; `down()` runs at exit and on SIGTERM too.
The delayer needs the PyPI package NetfilterQueue (Tests/python/requirements.txt; Debian packages
libnetfilter-queue-dev and build-essential to compile it): netlab runs it with the current interpreter if
that has it, else with the repository's .venv/bin/python.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import ctypes
import errno
import fcntl
import heapq
import importlib.util
import ipaddress
import json
import os
import random
import re
import secrets
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_NODES = 16
CMD_TIMEOUT_S = 10.0          # every ip/iptables/sysctl call
READY_TIMEOUT_S = 15.0        # a delayer or echo server printing READY
KILL_GRACE_S = 2.0            # SIGTERM → SIGKILL in down()
STATE_DIR = Path("/run/netlab")
SUBNET_BASE = "10.213"        # labs use 10.213.K.0/24, K free on this host
PREFIX_RE = re.compile(r"^cl[0-9a-f]{4}$")
NETNS_RE = re.compile(r"^(cl[0-9a-f]{4})-(?:sw|n[0-9]{1,2})$")
LINK_RE = re.compile(r"^(cl[0-9a-f]{4})-[a-z][0-9]{0,2}$")
NODE_IF = "eth0"


class LabError(RuntimeError):
    pass


# ---------------------------------------------------------------- small helpers

def run(argv: list[str], *, timeout: float = CMD_TIMEOUT_S, check: bool = True, input: str | None = None
        ) -> subprocess.CompletedProcess:
    """Runs one command with a timeout; raises LabError naming the command if it fails (check=True)."""
    try:
        cp = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise LabError(f"`{' '.join(argv)}` did not finish within {timeout:.0f} s") from None
    except FileNotFoundError:
        raise LabError(f"`{argv[0]}` is not installed (Debian: iproute2, iptables)") from None
    if check and cp.returncode != 0:
        raise LabError(f"`{' '.join(argv)}` failed ({cp.returncode}): {cp.stderr.strip()}")
    return cp


def process_start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (to tell a pid from a reused one), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def process_alive(pid: int, start_time: int | None) -> bool:
    st = process_start_time(pid)
    return st is not None and (start_time is None or st == start_time)


def list_netns() -> list[str]:
    cp = run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in cp.stdout.splitlines() if line.strip()]


def root_links() -> list[str]:
    cp = run(["ip", "-o", "link", "show"], check=False)
    names = []
    for line in cp.stdout.splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.append(parts[1].strip().split("@", 1)[0])
    return names


def netns_pids(ns: str) -> list[int]:
    cp = run(["ip", "netns", "pids", ns], check=False)
    return [int(x) for x in cp.stdout.split() if x.isdigit()]


def kill_pids(pids: list[int], grace_s: float = KILL_GRACE_S):
    """SIGTERM, wait up to grace_s, then SIGKILL whatever is left (never our own pid)."""
    pids = [p for p in pids if p != os.getpid()]
    starts = {p: process_start_time(p) for p in pids}
    for p in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not any(process_alive(p, starts[p]) and not _is_zombie(p) for p in pids):
            return
        time.sleep(0.02)
    for p in pids:
        if process_alive(p, starts[p]):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p, signal.SIGKILL)


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def delayer_python() -> str:
    """An interpreter that can import netfilterqueue: this one, else the repository's .venv."""
    if importlib.util.find_spec("netfilterqueue") is not None:
        return sys.executable
    venv = ROOT / ".venv" / "bin" / "python"
    if venv.is_file():
        cp = run([str(venv), "-c", "import netfilterqueue"], check=False, timeout=30)
        if cp.returncode == 0:
            return str(venv)
    raise LabError("the delayer needs the Python package NetfilterQueue; run scripts/python-env.sh "
                   "(Debian: libnetfilter-queue-dev build-essential) and use .venv/bin/python")


def check_environment():
    """Raises LabError with a clear reason if this machine cannot run a lab."""
    if os.geteuid() != 0:
        raise LabError("netlab needs root (network namespaces, veth, iptables)")
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin", "/usr/bin", "/bin"])
    for tool in ("ip", "iptables", "iptables-restore", "ping"):
        if shutil.which(tool, path=path) is None:
            raise LabError(f"`{tool}` is not installed (Debian: scripts/setup.sh installs iproute2, iptables, "
                           f"iputils-ping)")


def percentiles(samples_ms: list[float]) -> dict:
    s = sorted(samples_ms)
    if not s:
        return {"n": 0}

    def q(p):
        return s[min(len(s) - 1, max(0, int(round(p * (len(s) - 1)))))]
    return {"n": len(s), "min": round(s[0], 3), "p50": round(q(0.5), 3), "p99": round(q(0.99), 3),
            "max": round(s[-1], 3), "mean": round(statistics.fmean(s), 3)}


# ---------------------------------------------------------------- lab registry, atexit and SIGTERM

_live_labs: "weakref.WeakSet[Lab]" = weakref.WeakSet()
_hooks_installed = False


def _down_all():
    for lab in list(_live_labs):
        with contextlib.suppress(Exception):
            lab.down()


def _on_sigterm(signum, frame):
    _down_all()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _install_hooks():
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    atexit.register(_down_all)
    # Only take SIGTERM if nobody else did, and only from the main thread (where signals are delivered).
    if threading.current_thread() is threading.main_thread() \
            and signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, _on_sigterm)


# ---------------------------------------------------------------- the lab

class Lab:
    """N node namespaces behind one bridge, reachable from the root namespace, with delay and jitter.

    Use as a context manager, or call up() and down() (down() is idempotent and also runs at exit and on
    SIGTERM). Nodes are numbered 1..N.
    """

    def __init__(self, nodes: int = 2, delay_ms: float = 0.2, jitter_ms: float = 0.5, tag: str | None = None,
                 *, seed: int | None = None, reorder: bool = False, realtime: bool = True):
        if not isinstance(nodes, int) or not 1 <= nodes <= MAX_NODES:
            raise ValueError(f"a lab has 1..{MAX_NODES} nodes, not {nodes!r}")
        if delay_ms < 0 or jitter_ms < 0 or delay_ms > 10_000 or jitter_ms > 10_000:
            raise ValueError(f"delay_ms and jitter_ms must be within 0..10000 ms, not {delay_ms}, {jitter_ms}")
        self.nodes = nodes
        self.delay_ms = float(delay_ms)
        self.jitter_ms = float(jitter_ms)
        self.tag = tag
        self.seed = seed if seed is not None else secrets.randbits(31)
        self.reorder = reorder
        self.realtime = realtime
        self.prefix = "cl" + secrets.token_hex(2)
        self.subnet: ipaddress.IPv4Network | None = None
        self._procs: list[subprocess.Popen] = []
        self._delayers: dict[int, subprocess.Popen] = {}
        self._block_timers: dict[int, threading.Timer] = {}
        self._blocked: set[int] = set()
        self.delayer_stats: dict[int, dict] = {}   # after down(): per node, packets released and lateness
        self._lock = threading.RLock()
        self._state = "new"      # new → up → down

    # -- names and addresses

    @property
    def switch_ns(self) -> str:
        return f"{self.prefix}-sw"

    def netns(self, i: int) -> str:
        self._check_index(i)
        return f"{self.prefix}-n{i}"

    @property
    def root_if(self) -> str:
        return f"{self.prefix}-r"

    @property
    def coordinator_address(self) -> str:
        self._require_subnet()
        return str(self.subnet.network_address + 1)

    def node_address(self, i: int) -> str:
        self._check_index(i)
        self._require_subnet()
        return str(self.subnet.network_address + 10 + i)

    @property
    def node_addresses(self) -> dict[int, str]:
        return {i: self.node_address(i) for i in range(1, self.nodes + 1)}

    @property
    def delayer_pids(self) -> list[int]:
        return [p.pid for p in self._delayers.values()]

    def describe(self) -> dict:
        return {"prefix": self.prefix, "tag": self.tag, "subnet": str(self.subnet),
                "coordinator_address": self.coordinator_address, "root_interface": self.root_if,
                "delay_ms": self.delay_ms, "jitter_ms": self.jitter_ms, "seed": self.seed,
                "reorder": self.reorder,
                "nodes": [{"index": i, "address": self.node_address(i), "netns": self.netns(i)}
                          for i in range(1, self.nodes + 1)]}

    def _check_index(self, i: int):
        if not isinstance(i, int) or not 1 <= i <= self.nodes:
            raise IndexError(f"node index {i!r} is not in 1..{self.nodes}")

    def _require_subnet(self):
        if self.subnet is None:
            raise LabError("the lab is not up")

    # -- context manager

    def __enter__(self) -> "Lab":
        self.up()
        return self

    def __exit__(self, *exc):
        self.down()
        return False

    # -- up

    def up(self) -> "Lab":
        with self._lock:
            if self._state != "new":
                raise LabError(f"lab {self.prefix} was already brought up")
            check_environment()
            python = delayer_python()
            _install_hooks()
            cleanup_stale()
            self._state = "up"
            _live_labs.add(self)
            try:
                self._create(python)
            except BaseException:
                self.down()
                raise
        return self

    def _create(self, python: str):
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        p = self.prefix
        with open(STATE_DIR / ".lock", "w") as lockf:
            fcntl.flock(lockf, fcntl.LOCK_EX)        # one lab at a time picks its subnet and claims it
            self.subnet = pick_subnet()
            self._write_state()
            run(["ip", "netns", "add", self.switch_ns])
            run(["ip", "link", "add", self.root_if, "type", "veth", "peer", "name", f"{p}-b0"])
            _disable_ipv6_root(self.root_if)
            run(["ip", "addr", "add", f"{self.coordinator_address}/{self.subnet.prefixlen}", "dev", self.root_if])
        cmds = [f"link set {p}-b0 netns {self.switch_ns}"]
        for i in range(1, self.nodes + 1):
            run(["ip", "netns", "add", self.netns(i)])
            cmds += [f"link add {p}-a{i} type veth peer name {p}-b{i}",
                     f"link set {p}-a{i} netns {self.netns(i)}",
                     f"link set {p}-b{i} netns {self.switch_ns}"]
        run(["ip", "-batch", "-"], input="\n".join(cmds) + "\n")
        sw = ["link set lo up", "link add br0 type bridge stp_state 0 forward_delay 0"]
        for i in range(0, self.nodes + 1):
            sw += [f"link set {p}-b{i} master br0", f"link set {p}-b{i} up"]
        sw += ["link set br0 up"]
        run(["ip", "netns", "exec", self.switch_ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
             "net.ipv6.conf.default.disable_ipv6=1"])
        run(["ip", "-n", self.switch_ns, "-batch", "-"], input="\n".join(sw) + "\n")
        run(["ip", "link", "set", self.root_if, "up"])
        for i in range(1, self.nodes + 1):
            ns = self.netns(i)
            run(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                 "net.ipv6.conf.default.disable_ipv6=1"])
            run(["ip", "-n", ns, "-batch", "-"], input="\n".join([
                "link set lo up",
                f"link set {p}-a{i} name {NODE_IF}",
                f"addr add {self.node_address(i)}/{self.subnet.prefixlen} dev {NODE_IF}",
                f"link set {NODE_IF} up"]) + "\n")
        # delayers first (they print READY once their queue is bound), then the rules that feed them
        for i in range(1, self.nodes + 1):
            argv = [python, str(Path(__file__).resolve()), "delayer", "--queue", str(i),
                    "--delay-ms", repr(self.delay_ms), "--jitter-ms", repr(self.jitter_ms),
                    "--seed", str(self.seed + i), "--parent-pid", str(os.getpid())]
            if self.reorder:
                argv.append("--reorder")
            if self.realtime:
                argv.append("--realtime")
            self._delayers[i] = subprocess.Popen(["ip", "netns", "exec", self.netns(i), *argv],
                                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                 stderr=subprocess.PIPE, text=True)
        for i, proc in self._delayers.items():
            line = _read_line(proc, READY_TIMEOUT_S)
            if line != "READY":
                err = ""
                if proc.poll() is not None:
                    err = proc.stderr.read()
                raise LabError(f"the delayer of node {i} did not start (first line {line!r}): {err.strip()}")
        for i in range(1, self.nodes + 1):
            rules = "\n".join([
                "*filter",
                f"-A INPUT -i {NODE_IF} -j NFQUEUE --queue-num {i}",
                f"-A OUTPUT -o {NODE_IF} -j NFQUEUE --queue-num {i}",
                "COMMIT"]) + "\n"
            run(["ip", "netns", "exec", self.netns(i), "iptables-restore", "-w", "5"], input=rules)
        # the root side answers ARP only once the bridge forwards; wait until every node is reachable
        deadline = time.monotonic() + 10
        for i in range(1, self.nodes + 1):
            while True:
                cp = run(["ping", "-n", "-q", "-c", "1", "-W", "1", self.node_address(i)], check=False, timeout=5)
                if cp.returncode == 0:
                    break
                if time.monotonic() > deadline:
                    raise LabError(f"node {i} ({self.node_address(i)}) does not answer ping from the root "
                                   f"namespace: {cp.stdout.strip()} {cp.stderr.strip()}")
                time.sleep(0.05)

    def _write_state(self):
        state = {"prefix": self.prefix, "pid": os.getpid(), "start_time": process_start_time(os.getpid()),
                 "subnet": str(self.subnet), "nodes": self.nodes, "tag": self.tag}
        (STATE_DIR / f"{self.prefix}.json").write_text(json.dumps(state) + "\n")

    # -- processes in the nodes

    def start_node(self, i: int, argv: list[str], **popen_kwargs) -> subprocess.Popen:
        """Starts argv inside node i's namespace (same filesystem and pids, own network); down() kills it."""
        self._require_up()
        popen_kwargs.setdefault("stdin", subprocess.DEVNULL)
        proc = subprocess.Popen(["ip", "netns", "exec", self.netns(i), *argv], **popen_kwargs)
        self._procs.append(proc)
        return proc

    def exec(self, i: int, argv: list[str], timeout: float = CMD_TIMEOUT_S, check: bool = False
             ) -> subprocess.CompletedProcess:
        """Runs argv inside node i's namespace to completion (text output captured), with a timeout."""
        self._require_up()
        return run(["ip", "netns", "exec", self.netns(i), *argv], timeout=timeout, check=check)

    def _require_up(self):
        if self._state != "up":
            raise LabError(f"lab {self.prefix} is not up")

    # -- making a node unreachable

    def block(self, i: int, seconds: float | None = None):
        """Drops every packet to and from node i (ahead of the delay), for `seconds` or until unblock(i)."""
        self._require_up()
        with self._lock:
            self._cancel_timer(i)
            if i not in self._blocked:
                ns = self.netns(i)
                run(["ip", "netns", "exec", ns, "iptables", "-w", "5", "-I", "INPUT", "1", "-i", NODE_IF, "-j", "DROP"])
                run(["ip", "netns", "exec", ns, "iptables", "-w", "5", "-I", "OUTPUT", "1", "-o", NODE_IF, "-j", "DROP"])
                self._blocked.add(i)
            if seconds is not None:
                t = threading.Timer(seconds, self._timed_unblock, args=(i,))
                t.daemon = True
                self._block_timers[i] = t
                t.start()

    def unblock(self, i: int):
        """Restores node i's traffic (no-op if it is not blocked)."""
        with self._lock:
            self._cancel_timer(i)
            self._unblock_rules(i)

    def _timed_unblock(self, i: int):
        with self._lock:
            self._block_timers.pop(i, None)
            if self._state == "up":
                with contextlib.suppress(LabError):
                    self._unblock_rules(i)

    def _unblock_rules(self, i: int):
        if i not in self._blocked:
            return
        ns = self.netns(i)
        run(["ip", "netns", "exec", ns, "iptables", "-w", "5", "-D", "INPUT", "-i", NODE_IF, "-j", "DROP"])
        run(["ip", "netns", "exec", ns, "iptables", "-w", "5", "-D", "OUTPUT", "-o", NODE_IF, "-j", "DROP"])
        self._blocked.discard(i)

    def _cancel_timer(self, i: int):
        t = self._block_timers.pop(i, None)
        if t is not None:
            t.cancel()

    def is_blocked(self, i: int) -> bool:
        return i in self._blocked

    # -- down

    def down(self):
        """Kills every process in the lab's namespaces, deletes them (and so their veths and rules) and the
        root-side veth. Safe to call twice; bounded in time (each command has a timeout)."""
        with self._lock:
            if self._state == "down":
                return
            was_new = self._state == "new"
            self._state = "down"
            _live_labs.discard(self)
            for i in list(self._block_timers):
                self._cancel_timer(i)
            if was_new:
                return
            namespaces = [ns for ns in list_netns() if NETNS_RE.match(ns) and ns.startswith(self.prefix + "-")]
            teardown(self.prefix, namespaces, extra_pids=[p.pid for p in self._procs + list(self._delayers.values())])
            for i, proc in self._delayers.items():
                with contextlib.suppress(Exception):
                    proc.wait(timeout=1)
                    last = [line for line in proc.stderr.read().splitlines() if line.startswith("{")]
                    if last:
                        self.delayer_stats[i] = json.loads(last[-1])
            for proc in self._procs + list(self._delayers.values()):
                with contextlib.suppress(Exception):
                    proc.wait(timeout=1)
                for stream in (proc.stdout, proc.stderr):
                    if stream is not None:
                        with contextlib.suppress(Exception):
                            stream.close()


def _read_line(proc: subprocess.Popen, timeout: float) -> str | None:
    """The first stdout line of proc, or None at EOF or timeout (the stream stays usable)."""
    fd = proc.stdout.fileno()
    buf = b""
    deadline = time.monotonic() + timeout
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            continue
        chunk = os.read(fd, 1)      # byte by byte: never read past the line into the buffered stream
        if not chunk:
            return buf.decode(errors="replace").strip() or None
        buf += chunk
    return buf.decode(errors="replace").strip()


def _disable_ipv6_root(ifname: str):
    with contextlib.suppress(OSError):
        Path(f"/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6").write_text("1\n")


def pick_subnet() -> ipaddress.IPv4Network:
    """A free 10.213.K.0/24: no address or route of this host's root namespace overlaps it."""
    used: list[ipaddress.IPv4Network] = []
    out = run(["ip", "-4", "-o", "addr", "show"], check=False).stdout
    for m in re.finditer(r"\binet (\d+\.\d+\.\d+\.\d+/\d+)", out):
        used.append(ipaddress.ip_interface(m.group(1)).network)
    out = run(["ip", "-4", "route", "show", "table", "all"], check=False).stdout
    for line in out.splitlines():
        words = line.split()
        for w in words[:3]:
            with contextlib.suppress(ValueError):
                net = ipaddress.ip_network(w, strict=False)
                if net.prefixlen > 0:        # the default route overlaps everything; it is not a claim
                    used.append(net)
                break
    candidates = list(range(1, 255))
    random.shuffle(candidates)
    for k in candidates:
        net = ipaddress.ip_network(f"{SUBNET_BASE}.{k}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise LabError(f"no free {SUBNET_BASE}.K.0/24 on this host")


def teardown(prefix: str, namespaces: list[str], extra_pids: list[int] = ()):
    """Kills the processes in these namespaces, deletes them and every root link of the prefix."""
    pids = set(extra_pids)
    for ns in namespaces:
        pids.update(netns_pids(ns))
    kill_pids(sorted(pids))
    for ns in namespaces:
        run(["ip", "netns", "del", ns], check=False)
    for link in root_links():
        m = LINK_RE.match(link)
        if m and m.group(1) == prefix:
            run(["ip", "link", "del", link], check=False)
    with contextlib.suppress(OSError):
        (STATE_DIR / f"{prefix}.json").unlink()


def lab_owner_alive(prefix: str) -> bool:
    try:
        state = json.loads((STATE_DIR / f"{prefix}.json").read_text())
    except (OSError, ValueError):
        return False
    return process_alive(int(state.get("pid", 0)), state.get("start_time"))


def cleanup_stale(all_labs: bool = False) -> list[str]:
    """Tears down every lab (by our naming) whose owner process is gone, or every lab with all_labs."""
    prefixes: dict[str, list[str]] = {}
    for ns in list_netns():
        m = NETNS_RE.match(ns)
        if m:
            prefixes.setdefault(m.group(1), []).append(ns)
    for link in root_links():
        m = LINK_RE.match(link)
        if m:
            prefixes.setdefault(m.group(1), [])
    with contextlib.suppress(OSError):
        for f in STATE_DIR.glob("cl*.json"):
            if PREFIX_RE.match(f.stem):
                prefixes.setdefault(f.stem, [])
    removed = []
    for prefix, namespaces in sorted(prefixes.items()):
        live = [lab for lab in _live_labs if lab.prefix == prefix]
        if live and not all_labs:
            continue
        if not all_labs and lab_owner_alive(prefix):
            continue
        for lab in live:
            lab.down()
        teardown(prefix, namespaces)
        removed.append(prefix)
    return removed


# ---------------------------------------------------------------- the delayer (runs inside a node namespace)

PR_SET_TIMERSLACK = 29
NF_INET_LOCAL_IN = 1


def _prctl_timerslack_ns(ns: int):
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(ns), 0, 0, 0)


def delayer_main(args) -> int:
    from netfilterqueue import NetfilterQueue, COPY_META   # only the delayer needs it

    _prctl_timerslack_ns(1)
    if args.realtime:
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    rng = random.Random(args.seed)
    spin_ns = int(args.spin_us * 1000)
    delay_ns = int(args.delay_ms * 1e6)
    jitter_ns = int(args.jitter_ms * 1e6)
    heap: list[tuple[int, int, object]] = []
    last_due = {}                 # hook → release time of the previous packet (FIFO per direction)
    seq = 0

    def on_packet(pkt):
        nonlocal seq
        now = time.monotonic_ns()
        due = now + delay_ns + (int(rng.random() * jitter_ns) if jitter_ns else 0)
        if not args.reorder:
            hook = pkt.hook
            due = max(due, last_due.get(hook, 0))
            last_due[hook] = due
        seq += 1
        heapq.heappush(heap, (due, seq, pkt))

    nfq = NetfilterQueue()
    nfq.bind(args.queue, on_packet, max_len=8192, mode=COPY_META)
    fd = nfq.get_fd()
    parent_fd = None
    if args.parent_pid:
        try:
            parent_fd = os.pidfd_open(args.parent_pid)
        except (OSError, AttributeError):
            parent_fd = None
        if not process_alive(args.parent_pid, None):
            return 0
    watch = [fd] + ([parent_fd] if parent_fd is not None else [])
    # lateness (release time minus due time) in 10 µs bins, reported as JSON on stderr at exit
    late_bins = [0] * 1001
    released = 0

    # SIGTERM/SIGINT: a flag, and a byte on a pipe that wakes select() (never an exception raised
    # inside NetfilterQueue's C callback)
    stopping = []
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.append(True))
    watch.append(wake_r)
    print("READY", flush=True)
    next_parent_poll = time.monotonic() + 0.5
    try:
        while not stopping:
            now = time.monotonic_ns()
            while heap and heap[0][0] <= now:
                due, _, pkt = heapq.heappop(heap)
                late_bins[min(1000, (time.monotonic_ns() - due) // 10_000)] += 1
                released += 1
                with contextlib.suppress(Exception):
                    pkt.accept()          # the kernel may deliver the packet within this call
                now = time.monotonic_ns()
            if heap and heap[0][0] - now <= spin_ns:
                while time.monotonic_ns() < heap[0][0]:     # the last few µs: spin, select() is too coarse
                    pass
                continue
            timeout = 0.5 if not heap else max(0.0, (heap[0][0] - now - spin_ns) / 1e9)
            r, _, _ = select.select(watch, [], [], timeout)
            if parent_fd is not None and parent_fd in r:
                return 0
            if wake_r in r:
                with contextlib.suppress(OSError):
                    os.read(wake_r, 512)
            if fd in r:
                try:
                    nfq.run(block=False)
                except OSError as e:
                    if e.errno not in (errno.EAGAIN, errno.ENOBUFS, errno.EINTR):
                        raise
            if args.parent_pid and time.monotonic() > next_parent_poll:
                next_parent_poll = time.monotonic() + 0.5
                if not process_alive(args.parent_pid, None):
                    return 0
        return 0
    finally:
        for _, _, pkt in heap:
            with contextlib.suppress(Exception):
                pkt.accept()
        with contextlib.suppress(Exception):
            nfq.unbind()
        with contextlib.suppress(Exception):
            print(json.dumps({"queue": args.queue, "released": released,
                              "late_us": _bin_percentiles(late_bins, released)}), file=sys.stderr, flush=True)


def _bin_percentiles(bins: list[int], total: int) -> dict:
    """p50/p99/max of a 10 µs histogram (upper bin edges, µs); the last bin means ≥ 10 ms."""
    out = {}
    if total == 0:
        return out
    for name, q in (("p50", 0.5), ("p99", 0.99), ("max", 1.0)):
        want, acc = max(1, int(q * total + 0.999999)), 0
        for k, n in enumerate(bins):
            acc += n
            if acc >= want:
                out[name] = (k + 1) * 10
                break
    return out


# ---------------------------------------------------------------- echo server and RTT measurement

def echo_main(args) -> int:
    """A TCP echo server on 0.0.0.0:port; one client at a time is plenty for RTT measurement."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", args.port))
    srv.listen(8)
    print("READY", flush=True)
    parent = args.parent_pid
    srv.settimeout(0.5)
    while True:
        if parent and not process_alive(parent, None):
            return 0
        try:
            conn, _ = srv.accept()
        except socket.timeout:
            continue
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.settimeout(30)
        with conn:
            try:
                while True:
                    data = conn.recv(65536)
                    if not data:
                        break
                    conn.sendall(data)
            except OSError:
                pass


def tcp_rtts_ms(address: str, port: int, count: int, size: int = 64, timeout: float = 5.0,
                warmup: int = 5) -> list[float]:
    """`count` request/reply round trips of `size` bytes over one TCP connection (TCP_NODELAY), in ms."""
    payload = b"x" * size
    samples = []
    with socket.create_connection((address, port), timeout=timeout) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for k in range(warmup + count):
            t0 = time.perf_counter_ns()
            s.sendall(payload)
            got = 0
            while got < size:
                chunk = s.recv(size - got)
                if not chunk:
                    raise LabError(f"the echo server at {address}:{port} closed the connection")
                got += len(chunk)
            if k >= warmup:
                samples.append((time.perf_counter_ns() - t0) / 1e6)
    return samples


def ping_rtts_ms(address: str, count: int, interval_s: float = 0.01) -> list[float]:
    cp = run(["ping", "-n", "-U", "-c", str(count), "-i", str(interval_s), "-W", "2", address],
             check=False, timeout=10 + count * (interval_s + 0.1))
    return [float(m.group(1)) for m in re.finditer(r"time=([0-9.]+) ms", cp.stdout)]


def start_echo(lab: Lab, i: int, port: int = 7007) -> subprocess.Popen:
    proc = lab.start_node(i, [sys.executable, str(Path(__file__).resolve()), "echo", "--port", str(port),
                              "--parent-pid", str(os.getpid())],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = _read_line(proc, READY_TIMEOUT_S)
    if line != "READY":
        raise LabError(f"the echo server in node {i} did not start (first line {line!r})")
    return proc


# ---------------------------------------------------------------- CLI

def cmd_up(args) -> int:
    lab = Lab(nodes=args.nodes, delay_ms=args.delay_ms, jitter_ms=args.jitter_ms, tag=args.tag,
              seed=args.seed, reorder=args.reorder)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        lab.up()
        print(json.dumps(lab.describe()), flush=True)      # one line: `netlab.py up … | head -1` works
        print("netlab: up; Ctrl-C or SIGTERM tears it down", file=sys.stderr, flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        lab.down()
        print("netlab: down", file=sys.stderr, flush=True)
    return 0


def cmd_cleanup(args) -> int:
    check_environment()
    removed = cleanup_stale(all_labs=args.all)
    print(json.dumps({"removed": removed}))
    return 0


def cmd_selftest(args) -> int:
    t_start = time.monotonic()
    with Lab(nodes=2, delay_ms=args.delay_ms, jitter_ms=args.jitter_ms, seed=args.seed) as lab:
        t_up = time.monotonic() - t_start
        start_echo(lab, 1)
        ping = ping_rtts_ms(lab.node_address(1), args.count)
        tcp = tcp_rtts_ms(lab.node_address(1), 7007, args.count)
        # node-to-node: two links each way
        n2n = lab.exec(2, ["ping", "-n", "-U", "-c", "50", "-i", "0.01", "-W", "2", lab.node_address(1)],
                       timeout=30).stdout
        n2n_ms = [float(m.group(1)) for m in re.finditer(r"time=([0-9.]+) ms", n2n)]
        t0 = time.monotonic()
    t_down = time.monotonic() - t0
    d, j = args.delay_ms, args.jitter_ms
    result = {
        "delay_ms": d, "jitter_ms": j,
        "expected_root_node_rtt_ms": {"min": round(2 * d, 3), "mean": round(2 * d + j, 3),
                                      "max": round(2 * (d + j), 3)},
        "ping_rtt_ms": percentiles(ping),
        "tcp_rtt_ms": percentiles(tcp),
        "node_to_node_ping_rtt_ms": percentiles(n2n_ms),
        "delayer_late_us": {str(i): st.get("late_us") for i, st in lab.delayer_stats.items()},
        "packets_delayed": sum(st.get("released", 0) for st in lab.delayer_stats.values()),
        "up_s": round(t_up, 2), "down_s": round(t_down, 2),
    }
    print(json.dumps(result, indent=2))
    ok = (ping and tcp and min(ping) >= 2 * d * 0.999 and min(tcp) >= 2 * d)
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="netlab.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)

    up = sub.add_parser("up", help="bring a lab up, print its addresses as JSON, tear down on Ctrl-C/SIGTERM")
    up.add_argument("--nodes", type=int, default=2)
    up.add_argument("--delay-ms", type=float, default=0.2)
    up.add_argument("--jitter-ms", type=float, default=0.5)
    up.add_argument("--seed", type=int)
    up.add_argument("--tag")
    up.add_argument("--reorder", action="store_true")
    up.set_defaults(fn=cmd_up)

    cl = sub.add_parser("cleanup", help="remove labs whose owner process is gone")
    cl.add_argument("--all", action="store_true", help="remove every lab, live ones too")
    cl.set_defaults(fn=cmd_cleanup)

    st = sub.add_parser("selftest", help="2-node lab: ping and TCP RTT distributions as JSON")
    st.add_argument("--delay-ms", type=float, default=0.2)
    st.add_argument("--jitter-ms", type=float, default=0.5)
    st.add_argument("--count", type=int, default=300)
    st.add_argument("--seed", type=int, default=1)
    st.set_defaults(fn=cmd_selftest)

    de = sub.add_parser("delayer", help="(internal) hold NFQUEUE packets for delay + U(0, jitter) ms")
    de.add_argument("--queue", type=int, required=True)
    de.add_argument("--delay-ms", type=float, required=True)
    de.add_argument("--jitter-ms", type=float, default=0.0)
    de.add_argument("--seed", type=int, default=1)
    de.add_argument("--parent-pid", type=int)
    de.add_argument("--reorder", action="store_true")
    de.add_argument("--realtime", action="store_true", help="SCHED_FIFO priority 10 if allowed")
    de.add_argument("--spin-us", type=float, default=50.0,
                    help="wake this long before a packet is due and spin until it is (default 50)")
    de.set_defaults(fn=delayer_main)

    ec = sub.add_parser("echo", help="(internal) TCP echo server")
    ec.add_argument("--port", type=int, default=7007)
    ec.add_argument("--parent-pid", type=int)
    ec.set_defaults(fn=echo_main)

    args = ap.parse_args(argv)
    if args.cmd in ("selftest",) and args.count > 100_000:
        ap.error("--count is at most 100000")
    try:
        return args.fn(args)
    except LabError as e:
        print(f"netlab: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
