#!/usr/bin/python3
"""vmlab's guest agent. Reads one JSON request a line from the virtio-serial port vmlab.agent:
{"id": N, "cmd": "shell text", "timeout": S} and answers {"id": N, "rc": R, "out": "...", "err": "..."}.
rc is -9 when the command ran out of time. Each request runs in its own thread, so a slow one blocks nothing."""
import json
import os
import subprocess
import threading
import time

PORT = "/dev/virtio-ports/vmlab.agent"
lock = threading.Lock()


def answer(fd, reply):
    data = (json.dumps(reply) + "\n").encode()
    with lock:
        while data:
            try:
                n = os.write(fd, data)
            except BlockingIOError:
                time.sleep(0.01)
                continue
            data = data[n:]


def handle(fd, request):
    try:
        r = subprocess.run(["/bin/bash", "-c", request["cmd"]], capture_output=True,
                           timeout=request.get("timeout", 120))
        reply = {"rc": r.returncode, "out": r.stdout.decode(errors="replace"), "err": r.stderr.decode(errors="replace")}
    except subprocess.TimeoutExpired as e:
        reply = {"rc": -9, "out": (e.stdout or b"").decode(errors="replace"), "err": "timed out"}
    except Exception as e:  # a bad request gets an answer, never a dead agent
        reply = {"rc": -1, "out": "", "err": f"{type(e).__name__}: {e}"}
    reply["id"] = request.get("id")
    answer(fd, reply)


def main():
    while not os.path.exists(PORT):
        time.sleep(0.1)
    fd = os.open(PORT, os.O_RDWR)
    buf = b""
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            time.sleep(0.05)  # no host connected
            continue
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            try:
                request = json.loads(line)
            except ValueError:
                continue
            threading.Thread(target=handle, args=(fd, request), daemon=True).start()


main()
