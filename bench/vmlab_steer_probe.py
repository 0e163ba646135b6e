#!/usr/bin/env python3
"""Runs in a vmlab guest (bench/vmlab_steer.py copies it into the share): what vivid does with VIDIOC_S_PARM while
streaming. Streams /dev/video0 (320x180 YUYV, 30 fps) with v4l2-ctl, calls S_PARM from a second file handle after
chosen frames, and prints every buffer (sequence, timestamp µs) and each call with what the driver answered, as JSON."""
import fcntl, json, os, re, struct, subprocess, sys, time
VIDIOC_S_PARM = 0xC0CC5616
VIDIOC_G_PARM = 0xC0CC5615
def parm(fd, num, den):
    buf = bytearray(struct.pack("=I I I I I I I 4I", 1, 0x1000, 0, num, den, 0, 0, 0, 0, 0, 0).ljust(204, b"\0"))
    fcntl.ioctl(fd, VIDIOC_S_PARM, buf)
    f = struct.unpack_from("=I I I I I", buf)
    return [f[3], f[4]]
plan = json.loads(sys.argv[1])   # {"frames": N, "calls": {"60": [1,25], ...}}
subprocess.run(["v4l2-ctl", "-d0", "--set-fmt-video=width=320,height=180,pixelformat=YUYV", "--set-parm=30"], check=True,
               stdout=subprocess.DEVNULL)
fd = os.open("/dev/video0", os.O_RDWR)
p = subprocess.Popen(["stdbuf", "-oL", "v4l2-ctl", "-d0", "--stream-mmap", "--stream-count=%d" % plan["frames"], "--verbose"],
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
frames, calls = [], []
for line in p.stdout:
    m = re.search(r"seq:\s*(\d+).*ts:\s*([\d.]+)", line)
    if not m: continue
    seq, ts = int(m.group(1)), float(m.group(2))
    frames.append([seq, round(ts * 1e6)])
    k = str(len(frames) - 1)
    if k in plan["calls"]:
        before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        try:
            got = parm(fd, *plan["calls"][k])
            err = None
        except OSError as e:
            got, err = None, e.strerror
        calls.append({"after_frame": int(k), "asked": plan["calls"][k], "got": got, "error": err, "at_us": before})
p.wait()
print(json.dumps({"frames": frames, "calls": calls}))
