#!/usr/bin/env python3
"""The live console's preview (issue 12): latency, node CPU and coordinator CPU, with their baselines.

  COORD=.build-release/release/coord COORD_NODE=.build-release/release/coord-node \\
      $(scripts/python-env.sh) bench/console_preview.py --out bench/results/console-preview.json

1. Latency, loopback: `coord demo --console` (3 nodes × 2 cameras, 640x480 at 30 fps, tiles 480 px at 5 fps).
   A WebSocket viewer stamps each complete `multiview` message on arrival (CLOCK_MONOTONIC, the stripe's
   clock), fetches the set's tiles and decodes their stripes: latency = arrival − the newest true exposure
   centre in the set (so it includes the exposure's second half, the capture, scale, JPEG, ZeroMQ, matching
   and the WebSocket). Same again with the nodes in the network lab (netlab, 0.2 ms ± 0.5 ms per link).
2. Node CPU while recording 1280x720 at 30 fps (1 node, 1 camera, mjpeg): a 10 s take from the console with
   preview tiles (480 px at 5 fps) and without (--preview-width 0); the node's CPU-seconds per second of
   recording, from /proc, 3 runs each.
3. Coordinator CPU with 16 cameras (8 nodes × 2, 320x240 at 30 fps) idle-previewing at 5 fps, over 10 s,
   preview on and off (off: the console still follows the nodes' status and clocks).
"""
from __future__ import annotations

import argparse
import importlib.util
import base64
import io
import json
import queue
import threading
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
COORD = os.environ.get("COORD", str(ROOT / ".build/debug/coord"))
NODE = os.environ.get("COORD_NODE", str(Path(COORD).parent / "coord-node"))
TICKS = os.sysconf("SC_CLK_TCK")


# The stripe's CRC as the independent checker computes it.
_spec = importlib.util.spec_from_file_location("check_take", ROOT / "scripts/check-take.py")
_check_take = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_check_take)
crc8 = _check_take.crc8


def stripe_truth(jpeg: bytes, camera_width: int) -> int | None:
    image = np.asarray(Image.open(io.BytesIO(jpeg)).convert("L"))
    w = image.shape[1]
    scale = w / camera_width
    bits = [1 if image[int((r * 8 + 4) * scale), int((c * 8 + 4) * scale)] > 125 else 0
            for r, c in (divmod(b, 13) for b in range(104))]
    data = np.packbits(np.array(bits, np.uint8)).tobytes()
    if data[0] != 0xA5 or crc8(data[:12]) != data[12]:
        return None
    return int.from_bytes(data[6:12], "big")


class Viewer:
    """A minimal WebSocket client (RFC 6455, server frames are unmasked): reads text messages."""

    def __init__(self, base: str):
        host, port = base.removeprefix("http://").split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /ws HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self.sock.recv(4096)
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head

    def _need(self, n: int):
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError
            self.buffer += chunk

    def message(self) -> tuple[int, dict]:
        """(arrival µs on CLOCK_MONOTONIC, the JSON message)."""
        while True:
            self._need(2)
            b0, b1 = self.buffer[0], self.buffer[1]
            length, offset = b1 & 0x7F, 2
            if length == 126:
                self._need(4); length = int.from_bytes(self.buffer[2:4], "big"); offset = 4
            elif length == 127:
                self._need(10); length = int.from_bytes(self.buffer[2:10], "big"); offset = 10
            self._need(offset + length)
            arrived = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
            payload, self.buffer = self.buffer[offset:offset + length], self.buffer[offset + length:]
            if b0 & 0x0F == 1:
                return arrived, json.loads(payload)


# Each console's token (CONTRACT §6b), by its base URL.
TOKENS: dict[str, str] = {}


def auth(base: str) -> dict:
    return {"Authorization": f"Bearer {TOKENS[base]}"} if base in TOKENS else {}


def get(base: str, path: str):
    with urllib.request.urlopen(urllib.request.Request(base + path, headers=auth(base)), timeout=10) as r:
        body = r.read()
        return json.loads(body) if r.headers.get("Content-Type", "").startswith("application/json") else body


def post(base: str, path: str, body: dict):
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **auth(base)})
    with urllib.request.urlopen(request, timeout=10) as r:
        return json.loads(r.read())


def start_console(argv: list[str]) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    match = re.search(r"^CONSOLE (http://[\d.]+:\d+)/\?token=(\S+)$", line.strip())
    if not match:
        proc.kill()
        raise RuntimeError(f"the console printed {line!r}")
    TOKENS[match.group(1)] = match.group(2)
    return proc, match.group(1)


def stop(proc: subprocess.Popen):
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def percentiles(values: list[float]) -> dict:
    v = sorted(values)
    q = lambda p: v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]
    return {"count": len(v), "p50": round(q(50), 1), "p95": round(q(95), 1), "max": round(v[-1], 1)}


def latency(base: str, sets: int) -> dict:
    viewer = Viewer(base)
    # Arrivals are stamped by a thread that only reads, so decoding never delays a stamp.
    arrivals: queue.Queue = queue.Queue()

    def read():
        try:
            while True:
                arrivals.put(viewer.message())
        except (EOFError, OSError):
            arrivals.put(None)
    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            get(base, "/api/multiview")
            break
        except Exception:
            time.sleep(0.1)
    widths = {(c["node"], c["camera"]): c["width"] for c in get(base, "/api/rig")["cameras"]}
    samples, undecoded = [], 0
    while len(samples) < sets:
        item = arrivals.get(timeout=60)
        if item is None:
            break
        arrived, message = item
        if message.get("type") != "multiview" or not message.get("complete"):
            continue
        truths = []
        for t in message["tiles"]:
            try:
                truth = stripe_truth(get(base, "/" + t["image"]), widths[(t["node"], t["camera"])])
            except Exception:
                truth = None
            if truth is None:
                undecoded += 1
            else:
                truths.append(truth)
        if truths:
            samples.append((arrived - max(truths)) / 1000)
    viewer.sock.close()
    return {"latency_ms": percentiles(samples), "tiles_not_decoded": undecoded}


def process_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def node_pids(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                args = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if args and args[0].endswith(b"coord-node") and f"--parent-pid\0{parent}".encode() in b"\0".join(args):
                found.append(int(entry.name))
    return found


def node_cpu_while_recording(preview_width: int, takes: Path) -> float:
    proc, base = start_console([COORD, "demo", "--console", "--listen", "127.0.0.1:0", "--nodes", "1", "--size", "1280x720",
                                "--fps", "30", "--takes-dir", str(takes), "--preview-width", str(preview_width), "--seed", "3"])
    try:
        time.sleep(3)
        pids = node_pids(proc.pid)
        post(base, "/api/takes", {"name": "cpu", "seconds": 10})
        while (get(base, "/api/takes")["current"] or {}).get("state") != "recording":
            time.sleep(0.05)
        time.sleep(1)
        t0, c0 = time.monotonic(), sum(process_cpu_seconds(p) for p in pids)
        time.sleep(7)
        t1, c1 = time.monotonic(), sum(process_cpu_seconds(p) for p in pids)
        while (get(base, "/api/takes")["current"] or {}).get("state") not in ("done", "partial", "failed"):
            time.sleep(0.2)
        return (c1 - c0) / (t1 - t0)
    finally:
        stop(proc)


def coordinator_cpu(preview_width: int, takes: Path) -> float:
    proc, base = start_console([COORD, "demo", "--console", "--listen", "127.0.0.1:0", "--nodes", "8", "--cameras-per-node", "2",
                                "--size", "320x240", "--takes-dir", str(takes), "--preview-width", str(preview_width), "--seed", "5"])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            rig = get(base, "/api/rig")
            if len(rig["cameras"]) == 16 and all(n["reachable"] for n in rig["nodes"]):
                break
            time.sleep(0.2)
        time.sleep(4)
        t0, c0 = time.monotonic(), process_cpu_seconds(proc.pid)
        time.sleep(10)
        t1, c1 = time.monotonic(), process_cpu_seconds(proc.pid)
        return (c1 - c0) / (t1 - t0)
    finally:
        stop(proc)


def lab_latency(sets: int, work: Path) -> dict:
    from netlab import Lab
    nodes, port = 3, 5710
    with Lab(nodes=nodes, delay_ms=0.2, jitter_ms=0.5, seed=11, tag="bench-console") as lab:
        procs = []
        try:
            reference = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
            for i in range(1, nodes + 1):
                argv = [NODE, "--name", f"node-{i}", "--endpoint", f"tcp://{lab.node_address(i)}:{port}",
                        "--staging", str(work / f"staging-{i}"), "--synthetic", "cam0,cam1",
                        f"--clock-offset-us={(-1) ** i * 150_000 * i}", f"--clock-drift-ppm={(-1) ** i * 30.0 * i}",
                        f"--clock-reference-us={reference}", "--seed", str(i), "--log-level", "warning", "--insecure"]
                if os.environ.get("COORD_CALIBRATION"):
                    argv += ["--calibration", os.environ["COORD_CALIBRATION"]]
                procs.append(lab.start_node(i, argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
            for p in procs:
                assert p.stdout.readline().startswith("READY ")
            rig = work / "rig.yaml"
            rig.write_text("version: 1\nnodes:\n" + "".join(
                f"  - name: node-{i}\n    endpoint: tcp://{lab.node_address(i)}:{port}\n" for i in range(1, nodes + 1)))
            console, base = start_console([COORD, "console", "--rig", str(rig), "--listen", "127.0.0.1:0",
                                           "--takes-dir", str(work / "takes")])
            try:
                return latency(base, sets)
            finally:
                stop(console)
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--skip-lab", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-console-"))
    result: dict = {"command": " ".join(sys.argv), "coord": COORD}

    proc, base = start_console([COORD, "demo", "--console", "--listen", "127.0.0.1:0", "--nodes", "3", "--cameras-per-node", "2",
                                "--takes-dir", str(work / "takes"), "--seed", "1"])
    try:
        result["loopback"] = latency(base, args.sets)
    finally:
        stop(proc)
    print("loopback", result["loopback"], flush=True)
    if not args.skip_lab:
        result["lab"] = lab_latency(args.sets, work / "lab")
        print("lab", result["lab"], flush=True)

    with_preview = [node_cpu_while_recording(480, work / "takes-cpu") for _ in range(args.runs)]
    without = [node_cpu_while_recording(0, work / "takes-cpu") for _ in range(args.runs)]
    result["node_cpu_recording_1280x720_30"] = {
        "with_preview_cores": [round(x, 3) for x in with_preview], "without_preview_cores": [round(x, 3) for x in without],
        "extra_percent_of_median": round((statistics.median(with_preview) / statistics.median(without) - 1) * 100, 1)}
    print("node cpu", result["node_cpu_recording_1280x720_30"], flush=True)

    on = [coordinator_cpu(480, work / "takes-coord") for _ in range(args.runs)]
    off = [coordinator_cpu(0, work / "takes-coord") for _ in range(args.runs)]
    result["coordinator_cpu_16_cameras_idle"] = {"preview_on_cores": [round(x, 3) for x in on],
                                                 "preview_off_cores": [round(x, 3) for x in off]}
    print("coordinator cpu", result["coordinator_cpu_16_cameras_idle"], flush=True)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
