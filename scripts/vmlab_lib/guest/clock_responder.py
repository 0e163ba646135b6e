#!/usr/bin/python3
"""vmlab's clock responder: the guest's end of the lab's clock truth (scripts/vmlab_lib/clocktruth.py), on the
virtio-serial port vmlab.clock, which nothing of coord's uses. Each request is 4 bytes (the host's sequence
number); the answer, written at once, is those 4 bytes and the guest's CLOCK_MONOTONIC in ns (8 bytes, little
endian) read the moment the request was read. No JSON and no shell between the read and the stamp: the round trip
is the virtio port's and one Python wake-up, which the host measures and keeps only the shortest of."""
import os
import struct
import sys
import time

PORT = sys.argv[1] if len(sys.argv) > 1 else "/dev/virtio-ports/vmlab.clock"  # another path: the host's own test


def main():
    while not os.path.exists(PORT):
        time.sleep(0.1)
    fd = os.open(PORT, os.O_RDWR)
    pending = b""
    while True:
        chunk = os.read(fd, 4096)
        now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        if not chunk:
            pending = b""
            time.sleep(0.05)  # no host connected
            continue
        pending += chunk
        whole = len(pending) - len(pending) % 4
        if whole:
            # requests that queued up together all get the one stamp: the host keeps only quick exchanges anyway
            os.write(fd, b"".join(pending[i:i + 4] + struct.pack("<q", now) for i in range(0, whole, 4)))
            pending = pending[whole:]


main()
