#!/usr/bin/env python3
"""Runs in a vmlab guest: vivid steered onto a grid by the node's rule (PhaseSteering: the median phase of 15
frames past a tenth of a frame → one frame at the offered interval whose step brings it nearest zero, then 3
frames to settle), straight on the driver, against the same stream left alone. The grid is CLOCK_MONOTONIC's
multiples of 1/30 s; a frame's phase is its end-of-frame timestamp minus the nearest grid instant (vivid's
timestamps are the capture thread's wake-up: their scatter under TCG is part of every figure).
Prints JSON: per run {steered, frames, phase_us: {p50, p99, max} of |phase| after the first 2 s, steps}."""
import fcntl, json, math, os, re, statistics, struct, subprocess, sys
VIDIOC_S_PARM = 0xC0CC5616
P = 1e6 / 30
OFFERED = [1e6 / f for f in (60, 50, 40, 25)]      # vivid at 320x180, within [P/2, 3P/2]
TOL, WINDOW, SETTLE = P / 10, 15, 3


def s_parm(fd, num, den):
    buf = bytearray(struct.pack("=I I I I I I I 4I", 1, 0x1000, 0, num, den, 0, 0, 0, 0, 0, 0).ljust(204, b"\0"))
    fcntl.ioctl(fd, VIDIOC_S_PARM, buf)


def wrap(x):
    r = x % P
    return r - P if r > P / 2 else r


def run(steered, frames):
    subprocess.run(["v4l2-ctl", "-d0", "--set-fmt-video=width=320,height=180,pixelformat=YUYV", "--set-parm=30"],
                   check=True, stdout=subprocess.DEVNULL)
    fd = os.open("/dev/video0", os.O_RDWR)
    p = subprocess.Popen(["stdbuf", "-oL", "v4l2-ctl", "-d0", "--stream-mmap", f"--stream-count={frames}", "--verbose"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    phases, window, settling, steps, restore = [], [], SETTLE, 0, False
    for line in p.stdout:
        m = re.search(r"seq:\s*(\d+).*ts:\s*([\d.]+)", line)
        if not m:
            continue
        e = wrap(float(m.group(2)) * 1e6)
        phases.append(e)
        if restore:
            s_parm(fd, 1, 30)
            restore = False
            continue
        if not steered:
            continue
        if settling > 0:
            settling -= 1
            continue
        window.append(e)
        if len(window) < WINDOW:
            continue
        ang = [2 * math.pi * x / P for x in window]   # around the circular mean: a phase near P/2 wraps
        centre = math.atan2(sum(map(math.sin, ang)), sum(map(math.cos, ang))) * P / (2 * math.pi)
        med = wrap(centre + statistics.median(wrap(x - centre) for x in window))
        window = []
        if abs(med) <= TOL:
            continue
        best = min(OFFERED, key=lambda a: abs(med + a - P))
        if abs(wrap(med + best - P)) < abs(med) - TOL / 2:
            fps = round(1e6 / best)
            s_parm(fd, 1, fps)
            restore, settling, steps = True, SETTLE, steps + 1
    p.wait()
    os.close(fd)
    tail = sorted(abs(x) for x in phases[60:])
    q = lambda f: round(tail[min(len(tail) - 1, int(f * len(tail)))])
    return {"steered": steered, "frames": len(phases), "steps": steps,
            "phase_us": {"p50": q(0.5), "p99": q(0.99), "max": round(tail[-1])}}


if __name__ == "__main__":
    runs, frames = int(sys.argv[1]) if len(sys.argv) > 1 else 3, int(sys.argv[2]) if len(sys.argv) > 2 else 300
    print(json.dumps([run(steered, frames) for _ in range(runs) for steered in (False, True)]))
