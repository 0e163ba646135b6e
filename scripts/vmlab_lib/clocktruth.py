"""The lab's clock truth: each guest's CLOCK_MONOTONIC against the host's, measured over a channel coord takes no
part in (the virtio-serial port vmlab.clock and guest/clock_responder.py), NTP-style. The host stamps t1 (its
CLOCK_MONOTONIC), the guest stamps t2 the moment the request arrives, the host stamps t4 when the answer is back;
of a burst of exchanges the one with the shortest round trip gives offset = t2 − (t1 + t4)/2, certain to within
±(t4 − t1)/2 (the guest's stamp lies somewhere inside the round trip). A burst shortly before and one shortly
after a take give the guest clock's rate against the host's as well, and between them a guest instant maps to
the host's clock.

The coordinator runs on the host in the lab and its rig timebase is the host's CLOCK_MONOTONIC (Sources/Platform
Clocks.swift, MonotonicClock; CoordCore's ClockAlignment), so a guest instant mapped through this truth is held
against the take's grid instants directly, with no mapping of coord's in between."""
from __future__ import annotations

import random
import socket
import struct
import time
from dataclasses import dataclass

from .image import LabError

BURST = 300          # exchanges per burst: ~0.3-1 s under TCG
KEEP = 0.1           # the quickest tenth of a burst gives its scatter (the truth's own error, beside min_rtt)
READY_S = 20.0       # how long the first answer may take (the responder starting, the port opening)


@dataclass
class Burst:
    at_us: float           # the host's CLOCK_MONOTONIC at the chosen exchange's midpoint
    offset_us: float       # guest − host
    uncertainty_us: float  # half the chosen exchange's round trip
    exchanges: int
    min_rtt_us: float
    rtt_p50_us: float
    scatter_us: float      # the spread (max − min) of the offsets of the quickest tenth of the exchanges

    def as_dict(self) -> dict:
        return {k: round(v, 1) if isinstance(v, float) else v for k, v in self.__dict__.items()}


def burst(vm, count: int = BURST, ready_s: float = READY_S) -> Burst:
    """`count` exchanges with vm's clock responder through QEMU's socket for vmlab.clock (vm.dir/clock.sock)."""
    path = vm.dir / "clock.sock"
    rows: list[tuple[int, int, int]] = []
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(str(path))
            buf = b""
            base = random.randrange(1 << 31)  # an answer left over from an earlier burst never matches
            for seq in range(base + 1, base + count + 1):
                deadline = time.monotonic() + (2.0 if rows else ready_s)
                t1 = time.monotonic_ns()
                t2, buf = _exchange(s, seq, deadline, buf)
                rows.append((t1, t2, time.monotonic_ns()))
    except (TimeoutError, socket.timeout):
        if not rows:
            raise LabError(f"{vm.name}'s clock responder did not answer on its vmlab.clock port within "
                           f"{ready_s:.0f} s: the lab has no clock truth for it.") from None
        raise LabError(f"{vm.name}'s clock responder stopped answering after {len(rows)} exchanges: "
                       "the lab has no clock truth for it.") from None
    except OSError as e:
        raise LabError(f"{vm.name}'s clock port {path} cannot be reached ({e.strerror or e}): "
                       "the lab has no clock truth for it.") from None
    return choose(rows)


def _exchange(s: socket.socket, seq: int, deadline: float, buf: bytes) -> tuple[int, bytes]:
    """Sends request `seq`; returns the guest's stamp for it (answers to earlier requests skipped) and what of the
    socket's bytes is left over."""
    s.sendall(struct.pack("<I", seq))
    while True:
        while len(buf) >= 12:
            got, t2 = struct.unpack("<Iq", buf[:12])
            buf = buf[12:]
            if got == seq:
                return t2, buf
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        s.settimeout(left)
        chunk = s.recv(4096)
        if not chunk:
            raise ConnectionError("QEMU closed the clock port's socket")
        buf += chunk


def choose(rows: list[tuple[int, int, int]]) -> Burst:
    """The exchange with the shortest round trip, and the burst's own figures; rows are (t1, t2, t4) in ns."""
    by_rtt = sorted(rows, key=lambda r: r[2] - r[0])
    t1, t2, t4 = by_rtt[0]
    quick = by_rtt[:max(1, int(len(by_rtt) * KEEP))]
    offsets = [b - (a + c) / 2 for a, b, c in quick]
    return Burst(at_us=(t1 + t4) / 2000, offset_us=(t2 - (t1 + t4) / 2) / 1000, uncertainty_us=(t4 - t1) / 2000,
                 exchanges=len(rows), min_rtt_us=(t4 - t1) / 1000,
                 rtt_p50_us=(by_rtt[len(by_rtt) // 2][2] - by_rtt[len(by_rtt) // 2][0]) / 1000,
                 scatter_us=(max(offsets) - min(offsets)) / 1000)


@dataclass
class Truth:
    """One guest's clock between two bursts: guest = host + offset_us + rate_ppm·1e-6·(host − at_us)."""
    vm: str
    before: Burst
    after: Burst

    @property
    def rate_ppm(self) -> float:
        span = self.after.at_us - self.before.at_us
        return (self.after.offset_us - self.before.offset_us) / span * 1e6 if span > 0 else 0.0

    @property
    def uncertainty_us(self) -> float:
        """Between the bursts a straight line between two offsets each certain to ±u is certain to ±max(u)."""
        return max(self.before.uncertainty_us, self.after.uncertainty_us)

    def offset(self, host_us: float) -> float:
        return self.before.offset_us + self.rate_ppm * 1e-6 * (host_us - self.before.at_us)

    def to_host(self, guest_us: float) -> float:
        """The host's CLOCK_MONOTONIC (= the rig's) at the guest's CLOCK_MONOTONIC instant `guest_us`."""
        r = self.rate_ppm * 1e-6
        return (guest_us - self.before.offset_us + r * self.before.at_us) / (1 + r)

    def entry(self) -> dict:
        """vmlab.json's clock_truth entry."""
        return {"vm": self.vm, "offset_us": round(self.before.offset_us, 1), "rate_ppm": round(self.rate_ppm, 3),
                "uncertainty_us": round(self.uncertainty_us, 1),
                "exchanges": self.before.exchanges + self.after.exchanges,
                "min_rtt_us": round(min(self.before.min_rtt_us, self.after.min_rtt_us), 1),
                "at_us": round(self.before.at_us), "span_s": round((self.after.at_us - self.before.at_us) / 1e6, 2),
                "bursts": [self.before.as_dict(), self.after.as_dict()]}


def bursts(vms) -> dict[str, Burst]:
    """One burst per VM, one VM after another (side by side they would share the host's two CPUs)."""
    return {vm.name: burst(vm) for vm in vms}


def truths(before: dict[str, Burst], after: dict[str, Burst]) -> dict[str, Truth]:
    return {name: Truth(name, before[name], after[name]) for name in before}


def against_track(t: Truth, manifest: dict) -> dict:
    """coord's own mapping of this VM's clock (the manifest's clock_track: node = rig + offset_us + drift) held
    against the truth at each of its points: the largest |coord − truth|, and whether each point's error lies
    within coord's stated bound_us plus the truth's uncertainty."""
    worst, holds, points = 0.0, True, 0
    for p in manifest.get("clock_track", []):
        if p["node"] != t.vm:
            continue
        error = p["offset_us"] - t.offset(p["t_us"])
        points += 1
        worst = max(worst, abs(error))
        holds = holds and abs(error) <= p.get("bound_us", 0) + t.uncertainty_us
    return {"points": points, "max_error_us": round(worst, 1), "within_bound": holds and points > 0}


def report(truth_by_vm: dict[str, Truth], manifest: dict | None) -> list[dict]:
    out = []
    for t in truth_by_vm.values():
        entry = t.entry()
        if manifest is not None:
            entry["clock_track"] = against_track(t, manifest)
        out.append(entry)
    return out
