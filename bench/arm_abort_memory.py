#!/usr/bin/env python3
"""RSS of one coord-node over repeated arm-and-abort of a take of two 1920x1080 synthetic cameras (issue 17,
item 5): prints the node's VmRSS (KiB) every 10 takes and once more 2 s after the last.

    PY=$(scripts/python-env.sh)
    $PY bench/arm_abort_memory.py 101            # COORD_NODE=... for another binary
"""
import sys, time
sys.path.insert(0, "Tests/python")
import zmq
from pathlib import Path
import tempfile
from conftest import Client, Node, new_take_id
import conftest, importlib, subprocess, shutil
out = Path(tempfile.mkdtemp())
subprocess.run(["protoc", "-Iproto", f"--python_out={out}", "proto/coord/v1/coord.proto"], check=True)
sys.path.insert(0, str(out))
pb = importlib.import_module("coord.v1.coord_pb2")
tmp = Path(tempfile.mkdtemp())
n = Node(tmp, extra_args=["--synthetic", "cam0,cam1"] + sys.argv[2:])
ctx = zmq.Context()
c = Client(ctx, n.endpoint, pb)
def rss():
    for l in open(f"/proc/{n.proc.pid}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1])
for i in range(int(sys.argv[1])):
    tid = new_take_id(f"m{i}")
    c.call("configure", pb.Configure(take_id=tid, cameras=[pb.CameraConfig(camera=x, ordinal=k, width=1920, height=1080, fps=30, codec="mjpeg") for k, x in enumerate(["cam0","cam1"])]), "ack")
    t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)//1000 + 2_000_000
    c.call("arm", pb.Arm(take_id=tid, clock=pb.ClockMapping(), t0_us=t0, frame_period_us=33333), "armed", timeout_ms=15000)
    c.call("abort", pb.Abort(take_id=tid, reason="x"), "ack")
    if i % 10 == 0: print(i, rss(), flush=True)
time.sleep(2); print("end", rss())
c.close(); n.cleanup()
