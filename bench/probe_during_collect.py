#!/usr/bin/env python3
"""Clock-probe round trip on a node while it serves a collection (issue 18, item 4).

One real coord-node records a take (two synthetic cameras with grain, so the files are as large as camera
footage's); then a collector fetches every file with several 4 MiB chunks in flight, as `coord collect`
does, while a second client sends a ClockProbe every 10 ms and times each round trip. The same is measured
with the node idle, as the baseline. Prints and writes p50/p95/p99/max of the round trip, in µs.

    swift build -c release --scratch-path .build-release --product coord-node
    PY=$(scripts/python-env.sh)
    COORD_NODE=.build-release/release/coord-node $PY bench/probe_during_collect.py --out bench/results/probe-during-collect.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "python"))

import zmq  # noqa: E402

import conftest  # noqa: E402
from conftest import Client, Node, new_take_id, now_us  # noqa: E402


def load_pb():
    import importlib
    import subprocess
    out = Path(tempfile.mkdtemp())
    subprocess.run(["protoc", f"-I{ROOT / 'proto'}", f"--python_out={out}", str(ROOT / "proto/coord/v1/coord.proto")],
                   check=True)
    sys.path.insert(0, str(out))
    return importlib.import_module("coord.v1.coord_pb2")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def probe_loop(ctx, endpoint: str, pb, stop: threading.Event, out: list[float]):
    client = Client(ctx, endpoint, pb)
    try:
        while not stop.is_set():
            began = time.perf_counter_ns()
            client.call("clock_probe", pb.ClockProbe(t1_us=now_us()), "clock_probe_reply", timeout_ms=10_000)
            out.append((time.perf_counter_ns() - began) / 1000)
            time.sleep(0.01)
    finally:
        client.close()


def collect(ctx, endpoint: str, pb, take_id: str, window: int, chunk: int) -> tuple[int, float]:
    """Fetches every file with `window` chunks in flight on one DEALER; returns (bytes, seconds)."""
    lister = Client(ctx, endpoint, pb)
    listing = lister.call("list_files", pb.ListFiles(take_id=take_id), "file_list", timeout_ms=60_000)
    lister.close()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 30_000)
    sock.connect(endpoint)
    work = [(f.path, off) for f in listing.files for off in range(0, max(f.bytes, 1), chunk)]
    total = 0
    began = time.perf_counter()
    pending = 0
    request_id = 1
    while work or pending:
        while work and pending < window:
            path, off = work.pop(0)
            env = pb.Envelope(protocol_version=1, request_id=request_id)
            env.fetch_chunk.CopyFrom(pb.FetchChunk(take_id=take_id, path=path, offset=off, length=chunk))
            request_id += 1
            sock.send(env.SerializeToString())
            pending += 1
        reply = pb.Envelope()
        reply.ParseFromString(sock.recv())
        pending -= 1
        assert reply.WhichOneof("body") == "chunk", reply
        total += len(reply.chunk.data)
    sock.close()
    return total, time.perf_counter() - began


def figures(values: list[float]) -> dict:
    return {"probes": len(values), "p50_us": round(percentile(values, 50)), "p95_us": round(percentile(values, 95)),
            "p99_us": round(percentile(values, 99)), "max_us": round(max(values)),
            "mean_us": round(statistics.fmean(values))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10, help="length of the recorded take")
    ap.add_argument("--passes", type=int, default=3, help="collections of the take, back to back")
    ap.add_argument("--window", type=int, default=8)
    ap.add_argument("--chunk", type=int, default=4 << 20)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    pb = load_pb()
    conftest.READY_TIMEOUT_S = 60
    ctx = zmq.Context()
    tmp = Path(tempfile.mkdtemp(prefix="probe-bench-"))
    node = Node(tmp, extra_args=["--synthetic", "cam0,cam1", "--synthetic-grain", "24"])
    try:
        client = Client(ctx, node.endpoint, pb)
        take_id = new_take_id("probe")
        groups = int(args.seconds * 30)
        client.call("configure", pb.Configure(take_id=take_id, cameras=[
            pb.CameraConfig(camera=c, ordinal=k, width=1280, height=720, fps=30, codec="mjpeg")
            for k, c in enumerate(["cam0", "cam1"])]), "ack")
        client.call("arm", pb.Arm(take_id=take_id, clock=pb.ClockMapping(), t0_us=now_us() + 1_500_000,
                                  frame_period_us=33333), "armed", timeout_ms=15_000)
        client.call("start_at", pb.StartAt(take_id=take_id, start_group=0, stop_group=groups), "ack")
        deadline = time.monotonic() + args.seconds + 60
        while client.call("status_request", pb.StatusRequest(), "status").state != pb.Status.FINISHED:
            assert time.monotonic() < deadline, "the take did not finish"
            time.sleep(0.2)

        idle: list[float] = []
        stop = threading.Event()
        t = threading.Thread(target=probe_loop, args=(ctx, node.endpoint, pb, stop, idle))
        t.start()
        time.sleep(5)
        stop.set()
        t.join()

        busy: list[float] = []
        stop = threading.Event()
        t = threading.Thread(target=probe_loop, args=(ctx, node.endpoint, pb, stop, busy))
        t.start()
        moved, spent = 0, 0.0
        for _ in range(args.passes):
            b, s = collect(ctx, node.endpoint, pb, take_id, args.window, args.chunk)
            moved += b
            spent += s
        stop.set()
        t.join()
        client.close()
        result = {
            "command": "COORD_NODE=" + os.environ.get("COORD_NODE", ".build/debug/coord-node") + " "
                       + " ".join([Path(sys.argv[0]).as_posix()] + sys.argv[1:]),
            "take": {"cameras": 2, "size": "1280x720", "fps": 30, "seconds": args.seconds, "grain": 24},
            "collection": {"passes": args.passes, "bytes": moved, "seconds": round(spent, 3),
                           "mib_per_s": round(moved / spent / (1 << 20), 1), "window": args.window,
                           "chunk_bytes": args.chunk},
            "idle": figures(idle),
            "while_collecting": figures(busy),
        }
        print(json.dumps(result, indent=2))
        if args.out:
            args.out.write_text(json.dumps(result, indent=2) + "\n")
    finally:
        node.cleanup()


if __name__ == "__main__":
    main()
