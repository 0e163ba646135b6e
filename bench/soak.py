#!/usr/bin/env python3
"""Soak (issue 14 item 5): a long take and a stream of hostile input against a recording node, with the memory of
every process sampled.

    .venv/bin/python bench/soak.py [--take-minutes 30] [--stream-minutes 10] [--size 320x240] [--fps 30]
                                   [--build-dir .build-release/release] [--out bench/results/soak.json]

What it does, on loopback with the release build:
  1. starts two coord-node processes with two synthetic cameras each (sensor-like grain, so the files are as
     large as footage), with CURVE keys (pyzmq's zmq.auth), and a rig file pinning them;
  2. `coord start-take --seconds TAKE` over them (2 nodes × 2 cameras);
  3. once recording, streams random input at node-1 for --stream-minutes from a peer WITHOUT the coordinator's key
     (so nothing reaches the node: that is the point of CURVE) and, at the same time, from an authorized peer
     (the coordinator's own key, which a stranger cannot have: this is the harder case, every message reaches
     the node's request handling): random bytes, truncated and oversized messages, and valid envelopes of every
     message type whose fields are random (extreme integers, NaN/inf, long strings, random take ids);
  4. samples VmRSS and CPU time of coord, node-1 (attacked) and node-2 (the control) every 5 s;
  5. when the take ends, checks the take with scripts/check-take.py (complete, every group from every camera).

Prints one JSON document and writes it to --out. Acceptance (issue 14): node-1's RSS at the end of the stream
within 20 % of its RSS when the stream began; the take complete.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import zmq
import zmq.auth

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("check_take", ROOT / "scripts" / "check-take.py")
check_take = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_take)


def log(msg: str):
    print(f"soak: {msg}", file=sys.stderr, flush=True)


def protobuf_module(work: Path):
    out = work / "pb"
    out.mkdir()
    subprocess.run(["protoc", f"-I{ROOT / 'proto'}", f"--python_out={out}", "coord/v1/coord.proto"], check=True)
    sys.path.insert(0, str(out))
    return importlib.import_module("coord.v1.coord_pb2")


def status(pid: int) -> dict:
    """VmRSS (kB) and CPU seconds of a process."""
    try:
        rss = next(int(l.split()[1]) for l in Path(f"/proc/{pid}/status").read_text().splitlines() if l.startswith("VmRSS:"))
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return {"rss_kb": rss, "cpu_s": round(cpu, 2)}
    except (FileNotFoundError, ProcessLookupError, StopIteration):
        return {}


class RandomEnvelopes:
    """Envelopes of every body type with random fields, plus raw garbage."""

    def __init__(self, pb, rng: random.Random):
        self.pb, self.rng = pb, rng
        self.bodies = [f for f in pb.Envelope.DESCRIPTOR.oneofs_by_name["body"].fields]

    def scalar(self, field):
        r, t = self.rng, field.type
        FD = field
        if t in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
            return r.choice([float("nan"), float("inf"), -float("inf"), 1e308, -1e308, 0.0, r.uniform(-1e6, 1e6)])
        if t in (FD.TYPE_INT64, FD.TYPE_SINT64, FD.TYPE_SFIXED64):
            return r.choice([2**63 - 1, -2**63, 0, -1, r.randint(-2**40, 2**40)])
        if t in (FD.TYPE_UINT64, FD.TYPE_FIXED64):
            return r.choice([2**64 - 1, 2**62, 0, r.randint(0, 2**40)])
        if t in (FD.TYPE_INT32, FD.TYPE_SINT32, FD.TYPE_SFIXED32):
            return r.choice([2**31 - 1, -2**31, 0, r.randint(-1000, 1000)])
        if t in (FD.TYPE_UINT32, FD.TYPE_FIXED32):
            return r.choice([2**32 - 1, 0, r.randint(0, 5000)])
        if t == FD.TYPE_BOOL:
            return r.random() < 0.5
        if t == FD.TYPE_ENUM:
            return r.choice([v.number for v in field.enum_type.values])
        if t == FD.TYPE_STRING:
            n = r.choice([0, 5, 64, 65, 2000])
            return "".join(r.choice("abc-_./\u00e9\u0000x") for _ in range(n))
        if t == FD.TYPE_BYTES:
            return os.urandom(r.choice([0, 16, 4096]))
        return None

    def fill(self, msg, depth=0):
        for field in msg.DESCRIPTOR.fields:
            if self.rng.random() < 0.3:
                continue
            repeated = field.label == field.LABEL_REPEATED
            count = self.rng.choice([1, 2, 8]) if repeated else 1
            for _ in range(count):
                if field.type == field.TYPE_MESSAGE:
                    if depth > 3:
                        break
                    sub = getattr(msg, field.name).add() if repeated else getattr(msg, field.name)
                    self.fill(sub, depth + 1)
                    if not repeated:
                        msg.SetInParent()
                else:
                    value = self.scalar(field)
                    if repeated:
                        getattr(msg, field.name).append(value)
                    else:
                        setattr(msg, field.name, value)

    def next(self) -> bytes:
        r = self.rng.random()
        if r < 0.15:
            return os.urandom(self.rng.choice([0, 1, 7, 100, 5000]))
        env = self.pb.Envelope(protocol_version=self.rng.choice([1, 1, 1, 0, 2, 2**32 - 1]),
                               request_id=self.rng.randint(0, 2**64 - 1))
        body = self.rng.choice(self.bodies)
        self.fill(getattr(env, body.name))
        env.SetInParent()
        getattr(env, body.name).SetInParent()
        data = env.SerializeToString()
        if r < 0.25:
            return data[: self.rng.randint(0, len(data))]  # truncated
        if r < 0.27:
            return data + os.urandom(2 << 20)  # over the node's 1 MiB request limit
        return data


def stream(endpoint: str, curve, pb, seconds: float, seed: int, counts: dict, stop: threading.Event):
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDTIMEO, 200)
    sock.setsockopt(zmq.RCVHWM, 1000)
    if curve:
        sock.curve_serverkey, sock.curve_publickey, sock.curve_secretkey = curve
    sock.connect(endpoint)
    gen = RandomEnvelopes(pb, random.Random(seed))
    end = time.monotonic() + seconds
    while time.monotonic() < end and not stop.is_set():
        try:
            sock.send(gen.next())
            counts["sent"] += 1
        except zmq.Again:
            counts["send_timeouts"] += 1
        while True:
            try:
                reply = sock.recv(zmq.NOBLOCK)
                counts["replies"] += 1
                counts["longest_reply"] = max(counts["longest_reply"], len(reply))
            except zmq.Again:
                break
        # Not a flood of the kernel's buffers: the point is variety at a high steady rate.
        if counts["sent"] % 50 == 0:
            time.sleep(0.001)
    sock.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--take-minutes", type=float, default=30)
    ap.add_argument("--stream-minutes", type=float, default=10)
    ap.add_argument("--size", default="320x240")
    ap.add_argument("--fps", type=int, default=30)
    ap.add_argument("--build-dir", default=str(ROOT / ".build-release/release"))
    ap.add_argument("--out", default=str(ROOT / "bench/results/soak.json"))
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    coord, node_bin = str(Path(args.build_dir) / "coord"), str(Path(args.build_dir) / "coord-node")
    work = Path(args.work or tempfile.mkdtemp(prefix="coord-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    pb = protobuf_module(work)
    keys, authorized = work / "keys", work / "keys" / "authorized"
    authorized.mkdir(parents=True)
    zmq.auth.create_certificates(str(keys), "coordinator")
    zmq.auth.create_certificates(str(keys), "stranger")
    (authorized / "coordinator.key").write_bytes((keys / "coordinator.key").read_bytes())
    calibration = os.environ.get("COORD_CALIBRATION", str(ROOT / ".build/test-calibration.json"))
    nodes, endpoints = [], {}
    for name in ("node-1", "node-2"):
        zmq.auth.create_certificates(str(keys), name)
        argv = [node_bin, "--name", name, "--endpoint", "tcp://127.0.0.1:*", "--staging", str(work / name),
                "--synthetic", "cam0,cam1", "--synthetic-grain", "32", "--calibration", calibration,
                "--cert", str(keys / f"{name}.key_secret"), "--authorized", str(authorized),
                "--parent-pid", str(os.getpid()), "--log-level", "warning"]
        err = open(work / f"{name}.stderr", "w")
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True)
        line = p.stdout.readline().strip()
        assert line.startswith("READY "), f"{name}: {line!r}"
        endpoints[name] = line.split()[1]
        nodes.append((name, p))
    rig = work / "rig.yaml"
    rig.write_text("version: 1\nsecurity:\n  cert: keys/coordinator.key_secret\nnodes:\n" + "".join(
        f"  - name: {n}\n    endpoint: {endpoints[n]}\n    cert: keys/{n}.key\n" for n, _ in nodes))
    take_s = args.take_minutes * 60
    argv = [coord, "start-take", "--rig", str(rig), "--seconds", f"{take_s:g}", "--size", args.size,
            "--fps", str(args.fps), "--takes-dir", str(work / "takes"), "--name", "soak"]
    log(shlex.join(argv))
    coord_err = open(work / "coord.stderr", "w")
    cp = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=coord_err, text=True)
    pids = {"coord": cp.pid, "node-1": nodes[0][1].pid, "node-2": nodes[1][1].pid}
    samples = []
    t0 = time.monotonic()

    def sample(phase):
        s = {"t_s": round(time.monotonic() - t0, 1), "phase": phase}
        for k, pid in pids.items():
            s[k] = status(pid)
        samples.append(s)

    # Wait until recording (the coordinator prints "recording" progress on stderr).
    while "recording" not in (work / "coord.stderr").read_text() and cp.poll() is None:
        time.sleep(0.5)
    time.sleep(5)
    sample("recording, before the stream")
    pub, sec = zmq.auth.load_certificate(str(keys / "coordinator.key_secret"))
    spub, ssec = zmq.auth.load_certificate(str(keys / "stranger.key_secret"))
    npub, _ = zmq.auth.load_certificate(str(keys / "node-1.key"))
    counts = {k: {"sent": 0, "replies": 0, "send_timeouts": 0, "longest_reply": 0} for k in ("authorized", "stranger")}
    stop = threading.Event()
    stream_s = args.stream_minutes * 60
    threads = [threading.Thread(target=stream, args=(endpoints["node-1"], (npub, pub, sec), pb, stream_s, 1, counts["authorized"], stop)),
               threading.Thread(target=stream, args=(endpoints["node-1"], (npub, spub, ssec), pb, stream_s, 2, counts["stranger"], stop))]
    for t in threads:
        t.start()
    log(f"streaming random input at node-1 for {stream_s:.0f} s")
    stream_start = len(samples) - 1
    while any(t.is_alive() for t in threads):
        time.sleep(5)
        sample("stream")
    stream_end = len(samples) - 1
    log(f"stream done: {counts}")
    while cp.poll() is None:
        time.sleep(5)
        sample("recording, after the stream" if cp.poll() is None else "collecting")
    coord_err.close()
    take_dirs = [d for d in (work / "takes").iterdir() if d.is_dir()] if (work / "takes").exists() else []
    failures, figures = check_take.check(take_dirs[0]) if take_dirs else (["no take directory"], {})
    manifest = json.loads((take_dirs[0] / "manifest.json").read_text()) if take_dirs else {}
    for _, p in nodes:
        p.terminate()
    for _, p in nodes:
        p.wait(timeout=15)

    def rss(i, k):
        return samples[i].get(k, {}).get("rss_kb")

    def series(k):
        values = [s[k]["rss_kb"] for s in samples if s.get(k)]
        return {"min_kb": min(values), "max_kb": max(values), "first_kb": values[0], "last_kb": values[-1]} if values else {}

    node1_start, node1_end = rss(stream_start, "node-1"), rss(stream_end, "node-1")
    doc = {
        "benchmark": "soak", "command": shlex.join([".venv/bin/python", "bench/soak.py", *sys.argv[1:]]),
        "git_tree_at_run": subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip(),
        "take": {"minutes": args.take_minutes, "nodes": 2, "cameras_per_node": 2, "size": args.size, "fps": args.fps,
                 "exit": cp.returncode, "status": manifest.get("status"), "groups": manifest.get("groups"),
                 "frames": {f"{c['node']}/{c['camera']}": c["frames"] for c in manifest.get("cameras", [])},
                 "check_take_failures": failures, "true_spread_us": figures.get("true_spread_us")},
        "stream": {"minutes": args.stream_minutes, "target": "node-1 while it records", "counts": counts},
        "rss": {"node-1 (attacked)": series("node-1"), "node-2 (control)": series("node-2"), "coord": series("coord"),
                "node-1 at stream start kb": node1_start, "node-1 at stream end kb": node1_end,
                "node-1 end/start": round(node1_end / node1_start, 3) if node1_start and node1_end else None,
                "node-2 over the same interval": round(rss(stream_end, "node-2") / rss(stream_start, "node-2"), 3)
                if rss(stream_start, "node-2") and rss(stream_end, "node-2") else None},
        "node_1_log_lines": len((work / "node-1.stderr").read_text().splitlines()),
        "node_1_log_bytes": (work / "node-1.stderr").stat().st_size,
        "samples": samples,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps({k: v for k, v in doc.items() if k != "samples"}, indent=1))
    ok = (cp.returncode == 0 and not failures and doc["rss"]["node-1 end/start"] is not None
          and doc["rss"]["node-1 end/start"] <= 1.2)
    shutil.rmtree(work / "takes", ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
