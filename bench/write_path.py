#!/usr/bin/env python3
"""Benchmark: the node agent's write path beside ffmpeg, in the same run.

    PY=$(scripts/python-env.sh); swift build -c release --scratch-path .build-release
    $PY bench/write_path.py [--seconds 20] [--runs 3] [--size 1280x720] [--fps 30] [--codec mjpeg]

A real coord-node process (release build, 2 synthetic cameras) records a take driven over the real
protocol (protobuf over ZeroMQ). Its whole-process CPU time (user+sys, from wait4) divided by the frames
it wrote is the node's CPU per frame: sensor simulation, timestamp mapping, group assignment, encoding,
Matroska muxing, frames.csv and hashing all included. Its peak RSS comes from the same wait4.
The baseline: the recorded frames are decoded to raw yuvj420p (not timed) and encoded by
`ffmpeg -threads 1 ... -c:v mjpeg -q:v 3 -f matroska`, the same codec settings the node uses, with
ffmpeg's CPU also from wait4. Prints JSON; --out writes it too.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import zmq

ROOT = Path(__file__).resolve().parents[1]


def load_pb(tmp: Path):
    subprocess.run(["protoc", f"-I{ROOT / 'proto'}", f"--python_out={tmp}", str(ROOT / "proto/coord/v1/coord.proto")], check=True)
    sys.path.insert(0, str(tmp))
    return importlib.import_module("coord.v1.coord_pb2")


class Client:
    def __init__(self, ctx, endpoint, pb):
        self.pb, self.id = pb, 0
        self.sock = ctx.socket(zmq.DEALER)
        for opt, v in ((zmq.LINGER, 0), (zmq.RCVTIMEO, 10000), (zmq.SNDTIMEO, 10000)):
            self.sock.setsockopt(opt, v)
        self.sock.connect(endpoint)

    def call(self, **body):
        self.id += 1
        env = self.pb.Envelope(protocol_version=1, request_id=self.id, **body)
        self.sock.send(env.SerializeToString())
        reply = self.pb.Envelope()
        reply.ParseFromString(self.sock.recv())
        if reply.WhichOneof("body") == "error":
            raise RuntimeError(f"node refused: {reply.error.message}")
        return reply


def run_node(binary: str, pb, seconds: float, width: int, height: int, fps: int, codec: str, work: Path):
    staging = work / "staging"
    proc = subprocess.Popen([binary, "--name", "bench", "--endpoint", "tcp://127.0.0.1:*", "--staging", str(staging),
                             "--synthetic", "cam0,cam1", "--log-level", "warning"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline().strip()
    m = re.match(r"READY (\S+)", line)
    if not m:
        proc.kill()
        raise RuntimeError(f"coord-node did not start: {line!r}")
    ctx = zmq.Context()
    c = Client(ctx, m.group(1), pb)
    take = "bench-take"
    cams = [pb.CameraConfig(camera=f"cam{i}", ordinal=i, width=width, height=height, fps=fps, codec=codec) for i in range(2)]
    c.call(configure=pb.Configure(take_id=take, cameras=cams))
    period = round(1_000_000 / fps)
    now = time.monotonic_ns() // 1000
    groups = int(seconds * fps)
    c.call(arm=pb.Arm(take_id=take, clock=pb.ClockMapping(), t0_us=now + 1_000_000, frame_period_us=period))
    c.call(start_at=pb.StartAt(take_id=take, start_group=0, stop_group=groups))
    deadline = time.monotonic() + seconds + 60
    while True:
        s = c.call(status_request=pb.StatusRequest()).status
        if s.state == pb.Status.FINISHED:
            break
        if time.monotonic() > deadline:
            raise RuntimeError("the node did not finish in time")
        time.sleep(0.25)  # polling the node's status, not synchronizing
    frames = sum(cam.frames for cam in s.cameras)
    dups = sum(cam.dropped for cam in s.cameras)
    c.sock.close()
    ctx.term()
    proc.send_signal(signal.SIGTERM)
    _, status, usage = os.wait4(proc.pid, 0)
    files = sorted((staging / take / "bench").glob("*.mkv"))
    return {"frames": frames, "dup": dups, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss_mib": usage.ru_maxrss / 1024, "files": [str(f) for f in files]}


def run_ffmpeg(files, width, height, fps, work: Path):
    cpu, frames, rss = 0.0, 0, 0
    for f in files:
        raw = work / (Path(f).stem + ".yuv")
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", f, "-f", "rawvideo", "-pix_fmt", "yuvj420p", str(raw)], check=True)
        n = raw.stat().st_size // (width * height * 3 // 2)
        out = work / (Path(f).stem + ".ffmpeg.mkv")
        proc = subprocess.Popen(["ffmpeg", "-v", "error", "-y", "-threads", "1", "-f", "rawvideo", "-pix_fmt", "yuvj420p",
                                 "-s", f"{width}x{height}", "-r", str(fps), "-i", str(raw), "-threads", "1",
                                 "-c:v", "mjpeg", "-q:v", "3", "-flush_packets", "1", "-f", "matroska", str(out)])
        _, status, usage = os.wait4(proc.pid, 0)
        if status != 0:
            raise RuntimeError("ffmpeg failed")
        cpu += usage.ru_utime + usage.ru_stime
        rss = max(rss, usage.ru_maxrss / 1024)
        frames += n
        raw.unlink()
    return {"frames": frames, "cpu_s": cpu, "peak_rss_mib": rss}


def main():
    ap = argparse.ArgumentParser(description="node write path vs ffmpeg")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--size", default="1280x720")
    ap.add_argument("--fps", type=int, default=30)
    ap.add_argument("--codec", default="mjpeg", choices=["mjpeg"])
    ap.add_argument("--node", default=os.environ.get("COORD_NODE", str(ROOT / ".build-release/release/coord-node")))
    ap.add_argument("--out")
    args = ap.parse_args()
    width, height = map(int, args.size.split("x"))
    work_root = Path(tempfile.mkdtemp(prefix="coord-bench-"))
    try:
        pb = load_pb(work_root)
        runs = []
        for i in range(args.runs):
            work = work_root / f"run{i}"
            work.mkdir()
            node = run_node(args.node, pb, args.seconds, width, height, args.fps, args.codec, work)
            ff = run_ffmpeg(node.pop("files"), width, height, args.fps, work)
            node_ms = node["cpu_s"] / node["frames"] * 1000
            ff_ms = ff["cpu_s"] / ff["frames"] * 1000
            runs.append({"node": node, "ffmpeg": ff, "node_cpu_ms_per_frame": round(node_ms, 3),
                         "ffmpeg_cpu_ms_per_frame": round(ff_ms, 3), "ratio": round(node_ms / ff_ms, 3)})
            print(f"run {i + 1}: node {node_ms:.3f} ms/frame ({node['frames']} frames, {node['dup']} dup, "
                  f"peak RSS {node['peak_rss_mib']:.1f} MiB), ffmpeg {ff_ms:.3f} ms/frame, ratio {node_ms / ff_ms:.3f}",
                  file=sys.stderr)
            shutil.rmtree(work)
        result = {
            "benchmark": "write-path", "cameras": 2, "size": args.size, "fps": args.fps, "codec": args.codec,
            "seconds": args.seconds, "runs": runs,
            "median_ratio": statistics.median(r["ratio"] for r in runs),
            "median_node_cpu_ms_per_frame": statistics.median(r["node_cpu_ms_per_frame"] for r in runs),
            "median_ffmpeg_cpu_ms_per_frame": statistics.median(r["ffmpeg_cpu_ms_per_frame"] for r in runs),
            "max_node_peak_rss_mib": max(r["node"]["peak_rss_mib"] for r in runs),
            "machine": {"cores": os.cpu_count(), "uname": " ".join(os.uname())},
            "command": "bench/write_path.py " + " ".join(sys.argv[1:]),
        }
        text = json.dumps(result, indent=1)
        print(text)
        if args.out:
            Path(args.out).write_text(text + "\n")
    finally:
        shutil.rmtree(work_root, ignore_errors=True)


if __name__ == "__main__":
    main()
