"""Rolling from the console (issue 27 item 2): a take started from a console that follows the rig's clocks takes
the followed estimates instead of aligning every clock again, and the take is as well synchronized: the demo's
simulated node clocks (offsets of up to ±250 ms, drifts of up to ±50 ppm) are what the followed estimates must
carry, and scripts/check-take.py decodes every frame's true centre from its stripe. How much faster Start → group 0
gets is measured by bench/roll.py, not here."""
from __future__ import annotations

import base64
import json
import os
import socket
import threading
import time

from test_console import ConsoleDemo, check_take


def take_lines(base: str, token: str) -> list[str]:
    """The console's take events as they arrive over its WebSocket, read by a thread that keeps up (a viewer that
    does not is dropped by the console)."""
    host, port = base.removeprefix("http://").split(":")
    s = socket.create_connection((host, int(port)), timeout=120)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET /ws HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Origin: {base}\r\nAuthorization: Bearer {token}\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        buffer += s.recv(4096)
    head, buffer = buffer.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 101"), head
    lines: list[str] = []

    def read():
        nonlocal buffer
        def need(n):
            nonlocal buffer
            while len(buffer) < n:
                chunk = s.recv(65536)
                if not chunk:
                    raise EOFError
                buffer += chunk
        try:
            while True:
                need(2)
                length, offset = buffer[1] & 0x7F, 2
                if length == 126:
                    need(4); length, offset = int.from_bytes(buffer[2:4], "big"), 4
                elif length == 127:
                    need(10); length, offset = int.from_bytes(buffer[2:10], "big"), 10
                need(offset + length)
                opcode, payload, buffer = buffer[0] & 0x0F, buffer[offset:offset + length], buffer[offset + length:]
                if opcode == 1:
                    m = json.loads(payload)
                    if m.get("type") == "event" and m.get("kind") == "take":
                        lines.append(m["text"])
        except (EOFError, OSError):
            pass
    threading.Thread(target=read, daemon=True).start()
    return lines


def test_a_take_from_a_console_that_follows_the_clocks_uses_them_and_stays_in_sync(tmp_path):
    demo = ConsoleDemo(tmp_path)
    try:
        # Every node reached and its clock known: the console follows it.
        deadline = time.monotonic() + 60
        while True:
            nodes = demo.get("/api/rig")["nodes"]
            if nodes and all(n["reachable"] and n["clock_uncertainty_us"] is not None and n["clock_uncertainty_us"] <= 10
                             for n in nodes):
                break
            assert time.monotonic() < deadline, f"clocks not followed: {nodes}"
            time.sleep(0.1)
        # The scenario itself, not a wait for something: a console that has followed the rig for a while (a clock
        # followed for only a second is still too uncertain at group 0 and is aligned afresh, named as such).
        time.sleep(6)
        lines = take_lines(demo.base, demo.token)
        status, take = demo.send("POST", "/api/takes", {"name": "followed", "seconds": 2})
        assert status == 202, take
        done = demo.wait_take({"done", "partial", "failed"})
        assert done["state"] == "done", done
        aligned = [line for line in lines if line.startswith("clocks aligned in")]
        assert len(aligned) == 1 and aligned[0].endswith("(3 of 3 already followed)"), lines
        take_dir = demo.takes / done["take_id"]
        failures, _ = check_take.check(take_dir)
        assert not failures, failures
        assert json.loads((take_dir / "manifest.json").read_text())["status"] == "complete"
    finally:
        demo.close()
