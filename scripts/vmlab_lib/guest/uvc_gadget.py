#!/usr/bin/env python3
"""A USB webcam whose frames carry the truth, in a lab VM (issue 36, CONTRACT §16): a configfs usb_f_uvc gadget on
the lab's dummy_hcd (UDC --udc), seen by this same kernel through Debian's own uvcvideo, and the gadget-side
program behind it — it answers the host's UVC probe/commit and control requests (UVC_EVENT_SETUP/DATA,
UVCIOC_SEND_RESPONSE) and, once the host streams, runs a free-running sensor: its own rate error (--ppm) and a
random start phase on this guest's CLOCK_MONOTONIC, each frame painted with SYNCSTRIPE v1 (CONTRACT §5) holding its
true exposure centre in µs of that clock, and queued when its exposure ends with the exposure's start as the
buffer's timestamp (usb_f_uvc sends it as the payload header's PTS beside an SCR of the same clock: what uvcvideo's
hwtimestamps=1 recovers).

    python3 uvc_gadget.py [--udc dummy_udc.0] [--ppm 25] [--report /run/vmlab-uvc.json]

Offers YUYV at 320x180 and 640x360, 30 and 15 fps. Exposure is half a frame period; the sensor's counter starts at
0 at each STREAMON. Python and ioctl only: nothing to install in the image. Runs until killed (then unbinds).
"""
import argparse
import fcntl
import json
import mmap
import os
import random
import select
import signal
import struct
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import configfs_gadget  # noqa: E402  (beside this file in the lab's share)

GADGET = "vmlab_uvc"
SIZES = [(320, 180), (640, 360)]
INTERVALS = [333333, 666666]  # 100 ns units: 30 and 15 fps
MAXPACKET = 3072  # 1024 × 3 per microframe: 640x360 YUYV at 30 fps needs 13.8 MB/s, this gives 24.6

# ioctls (x86-64 sizes): linux/videodev2.h and linux/usb/g_uvc.h
VIDIOC_S_FMT, VIDIOC_REQBUFS, VIDIOC_QUERYBUF = 0xC0D05605, 0xC0145608, 0xC0585609
VIDIOC_QBUF, VIDIOC_DQBUF, VIDIOC_STREAMON, VIDIOC_STREAMOFF = 0xC058560F, 0xC0585611, 0x40045612, 0x40045613
VIDIOC_DQEVENT, VIDIOC_SUBSCRIBE_EVENT, UVCIOC_SEND_RESPONSE = 0x80885659, 0x4020565A, 0x40405501
BUF_TYPE_OUTPUT, MEMORY_MMAP, YUYV = 2, 1, 0x56595559
EVENT = 0x08000000  # V4L2_EVENT_PRIVATE_START
CONNECT, DISCONNECT, STREAMON, STREAMOFF, SETUP, DATA = (EVENT + i for i in range(6))
SET_CUR, GET_CUR, GET_MIN, GET_MAX, GET_RES, GET_LEN, GET_INFO, GET_DEF = 0x01, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87
STALL = -51  # a negative length: the gadget stalls ep0 (an unsupported request)
NBUFS = 4


def make_gadget(udc: str, functions: int = 1) -> None:
    """The configfs gadget: `functions` UVC functions (webcams on one USB device, so on one bus), YUYV frames,
    bound to `udc`."""
    g = configfs_gadget.gadget(GADGET, "0x0102", "SYNCSTRIPE webcam", udc.replace("dummy_udc.", "000"), "uvc")
    for k in range(functions):
        if not configfs_gadget.configured(g, f"uvc.{k}"):  # its attributes are fixed once linked (an earlier run's)
            uvc_function(configfs_gadget.function(g, f"uvc.{k}"))
        if k:
            configfs_gadget.link(g / "configs/c.1" / f"uvc.{k}", g / "functions" / f"uvc.{k}")
    if (g / "UDC").read_text().strip():
        configfs_gadget.unbind(g)
    for k in range(functions, 3):  # an earlier run's further webcams leave the configuration
        if configfs_gadget.configured(g, f"uvc.{k}"):
            (g / "configs/c.1" / f"uvc.{k}").unlink()
    configfs_gadget.bind(g, udc, "uvc.0")


def uvc_function(f: Path) -> None:
    """The UVC function's control and streaming descriptors: the sizes and intervals offered."""
    write, link = configfs_gadget.write, configfs_gadget.link
    (f / "control/header/h").mkdir(exist_ok=True)
    for cls in ("fs", "ss"):
        link(f / "control/class" / cls / "h", f / "control/header/h")
    u = f / "streaming/uncompressed/u"
    u.mkdir(exist_ok=True)
    for w, h in SIZES:  # frame indices follow creation order: 1, 2, ...
        fr = u / f"{h}p"
        fr.mkdir(exist_ok=True)
        write(fr / "wWidth", w)
        write(fr / "wHeight", h)
        write(fr / "dwMaxVideoFrameBufferSize", w * h * 2)
        write(fr / "dwMinBitRate", w * h * 16 * 15)
        write(fr / "dwMaxBitRate", w * h * 16 * 30)
        write(fr / "dwDefaultFrameInterval", INTERVALS[0])
        (fr / "dwFrameInterval").write_text("\n".join(str(i) for i in INTERVALS) + "\n")
    (f / "streaming/header/h").mkdir(exist_ok=True)
    link(f / "streaming/header/h/u", u)
    for cls in ("fs", "hs", "ss"):
        link(f / "streaming/class" / cls / "h", f / "streaming/header/h")
    write(f / "streaming_maxpacket", MAXPACKET)


def gadget_video_nodes(udc: str, functions: int = 1) -> list[str]:
    """The gadget side's V4L2 output devices: the video4linux nodes under the UDC's gadget, one per function."""
    for _ in range(100):
        nodes = [f"/dev/{node.name}" for node in sorted(Path("/sys/class/video4linux").glob("video*"),
                                                        key=lambda n: int(n.name[5:]))
                 if f"/{udc}/" in os.path.realpath(node)]
        if len(nodes) >= functions:
            return nodes[:functions]
        time.sleep(0.05)  # udev/driver core making the node after the bind; nothing to wait on
    raise SystemExit(f"uvc_gadget: {functions} video node(s) did not appear under {udc} after binding the gadget.")


class Sensor:
    """A free-running sensor: frame k's exposure starts at start + k × period, lasts half a period; its centre in
    µs of CLOCK_MONOTONIC goes into the frame's stripe."""

    def __init__(self, interval_100ns: int, ppm: float):
        self.period = interval_100ns * 1e-7 * (1 + ppm * 1e-6)
        self.exposure = self.period / 2
        self.start = time.clock_gettime(time.CLOCK_MONOTONIC) + random.uniform(0, self.period)
        self.count = 0

    def next_ready(self) -> float:
        return self.start + self.count * self.period + self.exposure

    def centre_us(self) -> int:
        return round((self.start + self.count * self.period + self.exposure / 2) * 1e6)


def crc8(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


def paint(buf, width: int, ordinal: int, counter: int, centre_us: int, base: bytes) -> None:
    """SYNCSTRIPE v1 into a YUYV frame: 13×8 blocks of 8×8 pixels, luma 235 for a 1 bit and 16 for a 0, MSB first;
    the rest of the frame is `base` (mid grey with a bar that moves one block a frame)."""
    payload = bytes([0xA5, ordinal]) + counter.to_bytes(4, "big") + centre_us.to_bytes(6, "big")
    payload += bytes([crc8(payload)])
    bits = "".join(f"{b:08b}" for b in payload)
    buf[:len(base)] = base
    stride = width * 2
    bar = (counter * 16) % stride
    for y in range(64, len(base) // stride):
        buf[y * stride + bar:y * stride + bar + 16] = b"\xeb\x80\xeb\x80" * 4
    for row in range(8):
        line = b"".join((b"\xeb\x80\xeb\x80" if bits[row * 13 + col] == "1" else b"\x10\x80\x10\x80") * 4
                        for col in range(13))
        for y in range(row * 8, row * 8 + 8):
            buf[y * stride:y * stride + len(line)] = line


class Camera:
    def __init__(self, device: str, ppm: float, ordinal: int, report: str | None):
        self.fd = os.open(device, os.O_RDWR | os.O_NONBLOCK)
        for ev in (CONNECT, DISCONNECT, STREAMON, STREAMOFF, SETUP, DATA):
            fcntl.ioctl(self.fd, VIDIOC_SUBSCRIBE_EVENT, struct.pack("8I", ev, 0, 0, 0, 0, 0, 0, 0))
        self.ppm, self.ordinal, self.report = ppm, ordinal, report
        self.probe = self.control(1, 1, INTERVALS[0])
        self.commit = self.probe
        self.pending = None  # (selector, entity, interface) of a SET_CUR whose data is due
        self.controls = {(2, 2): [0, -64, 64, 1, 0],  # processing unit: brightness (cur, min, max, res, def)
                         (1, 2): [2, 0, 0, 3, 2]}  # camera terminal: auto-exposure mode (RES: modes offered)
        self.sensor: Sensor | None = None
        self.maps: list[mmap.mmap] = []
        self.free: list[int] = []
        self.stats = {"ppm": ppm, "streams": 0, "frames": 0, "dropped": 0, "start_s": None, "period_s": None}
        self.width, self.height = SIZES[0]

    # --- UVC requests ------------------------------------------------------------------------------------------
    @staticmethod
    def control(fmt: int, frame: int, interval: int) -> bytes:
        """uvc_streaming_control (UVC 1.1, 34 bytes) for format 1, frame `frame`, `interval` (100 ns)."""
        frame = min(max(frame, 1), len(SIZES))
        if interval not in INTERVALS:
            interval = min(INTERVALS, key=lambda i: abs(i - interval))
        w, h = SIZES[frame - 1]
        return struct.pack("<HBBIHHHHHIIIBBBB", 1, 1, frame, interval, 0, 0, 0, 0, 0, w * h * 2, MAXPACKET,
                           48_000_000, 3, 1, 1, 1)

    def respond(self, data: bytes | None) -> None:
        length = STALL if data is None else len(data)
        fcntl.ioctl(self.fd, UVCIOC_SEND_RESPONSE, struct.pack("<i60s", length, (data or b"")[:60]))

    def setup(self, req: bytes) -> None:
        rtype, request, value, index, length = struct.unpack_from("<BBHHH", req)
        selector, entity, interface = value >> 8, index >> 8, index & 0xFF
        if request == SET_CUR:
            self.pending = (selector, entity, interface)
            self.respond(bytes(length))  # accept the data stage; its bytes come as UVC_EVENT_DATA
            return
        if entity == 0 and interface != 0 and selector in (1, 2):  # VS probe (1) / commit (2)
            answer = {GET_CUR: self.probe if selector == 1 else self.commit, GET_MIN: self.control(1, 1, INTERVALS[0]),
                      GET_MAX: self.control(1, len(SIZES), INTERVALS[-1]), GET_DEF: self.control(1, 1, INTERVALS[0]),
                      GET_RES: self.control(1, 1, INTERVALS[0]), GET_INFO: b"\x03",
                      GET_LEN: struct.pack("<H", 34)}.get(request)
            self.respond(None if answer is None else answer[:length])
            return
        ctl = self.controls.get((entity, selector))
        if ctl is None:
            self.respond(None)
            return
        size = 2 if entity == 2 else 1
        pack = (lambda v: struct.pack("<h", v)) if size == 2 else (lambda v: struct.pack("<B", v))
        answer = {GET_INFO: b"\x03", GET_LEN: struct.pack("<H", size), GET_CUR: pack(ctl[0]), GET_MIN: pack(ctl[1]),
                  GET_MAX: pack(ctl[2]), GET_RES: pack(ctl[3]), GET_DEF: pack(ctl[4])}.get(request)
        self.respond(answer)

    def data(self, payload: bytes) -> None:
        if self.pending is None:
            return
        selector, entity, interface = self.pending
        self.pending = None
        if entity == 0 and interface != 0 and selector in (1, 2):
            _, fmt, frame, interval = struct.unpack_from("<HBBI", payload.ljust(8, b"\0"))
            chosen = self.control(fmt, frame, interval)
            if selector == 1:
                self.probe = chosen
            else:
                self.commit = chosen
        elif (entity, selector) in self.controls:
            ctl = self.controls[(entity, selector)]
            ctl[0] = struct.unpack_from("<h" if entity == 2 else "<B", payload.ljust(2, b"\0"))[0]

    # --- streaming ---------------------------------------------------------------------------------------------
    def stream_on(self) -> None:
        _, _, frame, interval = struct.unpack_from("<HBBI", self.commit)
        self.width, self.height = SIZES[frame - 1]
        w, h = self.width, self.height
        fmt = struct.pack("<II12I", BUF_TYPE_OUTPUT, 0, w, h, YUYV, 1, w * 2, w * h * 2, 0, 0, 0, 0, 0, 0)
        fcntl.ioctl(self.fd, VIDIOC_S_FMT, fmt.ljust(208, b"\0"))
        req = bytearray(struct.pack("<5I", NBUFS, BUF_TYPE_OUTPUT, MEMORY_MMAP, 0, 0))
        fcntl.ioctl(self.fd, VIDIOC_REQBUFS, req)
        count = struct.unpack_from("<I", req)[0]
        self.maps = []
        for i in range(count):
            b = bytearray(struct.pack("<II", i, BUF_TYPE_OUTPUT).ljust(88, b"\0"))
            struct.pack_into("<I", b, 60, MEMORY_MMAP)
            fcntl.ioctl(self.fd, VIDIOC_QUERYBUF, b)
            offset, length = struct.unpack_from("<I", b, 64)[0], struct.unpack_from("<I", b, 72)[0]
            self.maps.append(mmap.mmap(self.fd, length, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE,
                                       offset=offset))
        self.free = list(range(count))
        self.base = (b"\x80\x80" * w) * h  # mid grey
        fcntl.ioctl(self.fd, VIDIOC_STREAMON, struct.pack("<i", BUF_TYPE_OUTPUT))
        self.sensor = Sensor(interval, self.ppm)
        self.stats.update(streams=self.stats["streams"] + 1, start_s=self.sensor.start, period_s=self.sensor.period,
                          size=f"{w}x{h}", interval_100ns=interval)

    def stream_off(self) -> None:
        self.sensor = None
        try:
            fcntl.ioctl(self.fd, VIDIOC_STREAMOFF, struct.pack("<i", BUF_TYPE_OUTPUT))
        except OSError:
            pass
        for m in self.maps:
            m.close()
        self.maps, self.free = [], []
        try:
            fcntl.ioctl(self.fd, VIDIOC_REQBUFS, struct.pack("<5I", 0, BUF_TYPE_OUTPUT, MEMORY_MMAP, 0, 0))
        except OSError:
            pass

    def reclaim(self) -> None:
        while True:
            b = bytearray(struct.pack("<II", 0, BUF_TYPE_OUTPUT).ljust(88, b"\0"))
            struct.pack_into("<I", b, 60, MEMORY_MMAP)
            try:
                fcntl.ioctl(self.fd, VIDIOC_DQBUF, b)
            except BlockingIOError:
                return
            except OSError:
                return
            self.free.append(struct.unpack_from("<I", b)[0])

    def deliver(self) -> None:
        """The sensor's frame whose exposure just ended: painted and queued, or dropped when no buffer is free."""
        s = self.sensor
        self.reclaim()
        if self.free:
            i = self.free.pop(0)
            paint(self.maps[i], self.width, self.ordinal, s.count, s.centre_us(), self.base)
            b = bytearray(struct.pack("<IIII", i, BUF_TYPE_OUTPUT, self.width * self.height * 2, 0).ljust(88, b"\0"))
            struct.pack_into("<I", b, 60, MEMORY_MMAP)
            # The buffer's timestamp is the exposure's start on CLOCK_MONOTONIC: usb_f_uvc sends it as the payload
            # header's PTS (beside an SCR of the same clock and the bus frame number), which uvcvideo maps to its
            # own clock with hwtimestamps=1. Without it uvcvideo's recovery reads a PTS of 0 and its stamps go wild.
            start_us = round((s.start + s.count * s.period) * 1e6)
            struct.pack_into("<qq", b, 24, start_us // 1_000_000, start_us % 1_000_000)
            try:
                fcntl.ioctl(self.fd, VIDIOC_QBUF, b)
                self.stats["frames"] += 1
            except OSError:
                self.free.append(i)
                self.stats["dropped"] += 1
        else:
            self.stats["dropped"] += 1
        s.count += 1

    def run(self) -> None:
        poller = select.poll()
        poller.register(self.fd, select.POLLPRI)
        reported = 0.0
        while True:
            now = time.clock_gettime(time.CLOCK_MONOTONIC)
            timeout = 1000 if self.sensor is None else max(0, (self.sensor.next_ready() - now) * 1000)
            events = poller.poll(timeout)
            if any(mask & (select.POLLHUP | select.POLLERR) for _, mask in events):
                # The gadget's video node is gone: its UDC was unbound (the lab's --unplug). Closing lets the
                # unbind finish (usb_f_uvc waits for its user), and the report says so.
                self.close()
                self.stats["unplugged_s"] = time.clock_gettime(time.CLOCK_MONOTONIC)
                self.write_report(self.stats["unplugged_s"])
                return
            if events:
                self.event()
            if self.sensor is not None and time.clock_gettime(time.CLOCK_MONOTONIC) >= self.sensor.next_ready():
                self.deliver()
            if self.report and now - reported >= 1:
                reported = now
                self.write_report(now)

    def close(self) -> None:
        """Unmaps and closes the gadget's video node. Before any unbind: 6.1's usb_f_uvc unbind waits, in an
        uninterruptible sleep, until the node's last user has let go, so a program unbinding its own gadget with the
        node still open hangs for good (seen: `systemctl stop` of this unit left it in D state at
        uvc_function_unbind, and every later read of the gadget's UDC hung behind it)."""
        if self.fd >= 0:
            self.stream_off()
            os.close(self.fd)
            self.fd = -1

    def write_report(self, now: float) -> None:
        if self.report:
            tmp = self.report + ".tmp"
            with open(tmp, "w") as f:
                json.dump(self.stats | {"now_s": now}, f)
            os.replace(tmp, self.report)

    def event(self) -> None:
        ev = bytearray(136)
        try:
            fcntl.ioctl(self.fd, VIDIOC_DQEVENT, ev)
        except OSError:
            return
        kind = struct.unpack_from("<I", ev)[0]
        body = bytes(ev[8:72])
        if kind == SETUP:
            self.setup(body[:8])
        elif kind == DATA:
            length = struct.unpack_from("<i", body)[0]
            self.data(body[4:4 + max(0, length)])
        elif kind == STREAMON:
            self.stream_on()
        elif kind in (STREAMOFF, DISCONNECT):
            if self.sensor is not None or self.maps:
                self.stream_off()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--udc", default="dummy_udc.0")
    ap.add_argument("--ppm", type=float, default=None, help="the sensor's rate error (default: random ±50)")
    ap.add_argument("--ordinal", type=int, default=0)
    ap.add_argument("--report")
    ap.add_argument("--functions", type=int, default=1, choices=(1, 2, 3),
                    help="webcams in the one gadget, so on one bus (bench/vmlab_usb_bandwidth.py); each its own sensor")
    a = ap.parse_args()
    ppm = a.ppm if a.ppm is not None else random.uniform(-50, 50)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # systemctl stop: unbind on the way out
    configfs_gadget.load("usb_f_uvc")
    make_gadget(a.udc, a.functions)
    nodes = gadget_video_nodes(a.udc, a.functions)
    # The first webcam keeps --ppm and --report; each further one its own random ppm and report.k.
    cameras = [Camera(node, ppm if k == 0 else random.uniform(-50, 50), a.ordinal + k,
                      a.report if k == 0 or not a.report else f"{a.report}.{k}") for k, node in enumerate(nodes)]
    try:
        if len(cameras) == 1:
            cameras[0].run()
        else:
            threads = [threading.Thread(target=c.run, daemon=True) for c in cameras]
            for t in threads:
                t.start()
            while any(t.is_alive() for t in threads):
                threads[0].join(1)
    finally:
        for camera in cameras:
            camera.close()
        configfs_gadget.unbind(configfs_gadget.ROOT / GADGET)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
