#!/usr/bin/env python3
"""SYNCCLICK v1 into a real ALSA playback device, in a lab VM (issue 26 item 3): a 1 ms 4 kHz burst at −6 dBFS
beginning at every whole second of this kernel's CLOCK_MONOTONIC (plus --offset-us), the node's own clock.

    python3 clicks.py [--device hw:Loopback,0,0] [--report /run/clicks.json]

Played into snd-aloop's Loopback,0 it comes back on Loopback,1, which the node records through ALSA. Plays until
killed. The player streams without a gap (silence between bursts, 16-bit mono 48 kHz, 10 ms periods as the node
reads them, written 40 ms at a time into a 200 ms buffer) and places each burst by where the card's play position is
on CLOCK_MONOTONIC: after every blocking write (it returns right after the card's timer freed a period, as the
node's read does) it reads the frames still queued (snd_pcm_delay) and the clock, so frame 0 played at now −
(written − queued)/rate. Each reading is late by the wake-up; the 4th percentile of the last 2 s of readings is the
estimate (a few early outliers are ignored; when three readings in a row are 50 ms off it, the card's position moved
and the estimate starts again from them, in silence until 12 readings agree), and the readings' scatter above it is
the player's own timing error, written with the xrun and shift counts to --report every second. Only libasound
(ctypes): nothing to install.
"""
import argparse
import ctypes
import json
import math
import os
import time

# The node's period (10 ms); a 200 ms buffer and 40 ms writes, so a starved emulated CPU does not underrun it.
RATE, PERIOD, BUFFER, WRITE = 48_000, 480, 9600, 1920
AMPLITUDE = 0.501 * 32767
WINDOW = 50  # readings kept: 2 s of writes


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="hw:Loopback,0,0")
    ap.add_argument("--offset-us", type=float, default=0.0)
    ap.add_argument("--report")
    a = ap.parse_args()
    lib = ctypes.CDLL("libasound.so.2")
    lib.snd_strerror.restype = ctypes.c_char_p
    lib.snd_pcm_writei.restype = ctypes.c_long
    pcm = ctypes.c_void_p()

    def check(r: int, what: str) -> int:
        if r < 0:
            raise SystemExit(f"clicks: {a.device}: {what} failed: {lib.snd_strerror(r).decode()}")
        return r

    check(lib.snd_pcm_open(ctypes.byref(pcm), a.device.encode(), 0, 0), "open")  # 0: playback, blocking
    hw = ctypes.c_void_p()
    check(lib.snd_pcm_hw_params_malloc(ctypes.byref(hw)), "hw_params_malloc")
    check(lib.snd_pcm_hw_params_any(pcm, hw), "hw_params_any")
    check(lib.snd_pcm_hw_params_set_access(pcm, hw, 3), "set_access")  # RW_INTERLEAVED
    check(lib.snd_pcm_hw_params_set_format(pcm, hw, 2), "set_format")  # S16_LE
    check(lib.snd_pcm_hw_params_set_channels(pcm, hw, 1), "set_channels")
    lib.snd_pcm_hw_params_set_rate_resample(pcm, hw, 0)
    check(lib.snd_pcm_hw_params_set_rate(pcm, hw, RATE, 0), "set_rate")
    period, buffer, direction = ctypes.c_ulong(PERIOD), ctypes.c_ulong(BUFFER), ctypes.c_int(0)
    check(lib.snd_pcm_hw_params_set_period_size_near(pcm, hw, ctypes.byref(period), ctypes.byref(direction)), "period")
    check(lib.snd_pcm_hw_params_set_buffer_size_near(pcm, hw, ctypes.byref(buffer)), "buffer")
    check(lib.snd_pcm_hw_params(pcm, hw), "hw_params")
    check(lib.snd_pcm_prepare(pcm), "prepare")
    frames = WRITE
    silence = bytes(2 * frames)
    offset = a.offset_us * 1e-6
    written = 0
    readings: list[float] = []  # frame 0's play instant as each reading puts it (s, CLOCK_MONOTONIC)
    xruns = clicks = moves = 0
    reported = time.monotonic()
    delay = ctypes.c_long()

    def chunk(first: int, start: float | None) -> bytes:
        """Frames first..first+frames: silence, and the burst wherever a whole second (+offset) falls in them."""
        nonlocal clicks
        if start is None:
            return silence
        t0 = start + first / RATE + offset
        t1 = t0 + frames / RATE
        starts_inside = math.floor(t1) > math.floor(t0)  # a whole second falls in these frames
        if not starts_inside and t0 - math.floor(t0) >= 0.001:
            return silence
        clicks += starts_inside
        samples = (ctypes.c_int16 * frames)()
        for i in range(frames):
            t = t0 + i / RATE
            since = t - math.floor(t)
            if since < 0.001:
                samples[i] = int(round(AMPLITUDE * math.sin(2 * math.pi * 4000 * since)))
        return bytes(samples)

    cached: list = [None, 0, 0]  # the estimate, readings taken when it was made, readings taken

    def estimate() -> float | None:
        """Made again every 6 readings (a quarter second): sorting at each write costs the emulated CPU."""
        if len(readings) < 12:
            return None
        if cached[0] is None or cached[2] - cached[1] >= 6:
            recent = sorted(readings[-WINDOW:])
            cached[:2] = [recent[len(recent) // 25], cached[2]]
        return cached[0]

    shifts, last, steps = 0, None, []  # steps: [CLOCK_MONOTONIC s, ms] of the last shifts
    while True:
        start = estimate()
        if start is not None and last is not None and abs(start - last) > 0.001:
            shifts += 1
            steps.append([round(time.clock_gettime(time.CLOCK_MONOTONIC), 3), round((start - last) * 1e3, 2)])
            del steps[:-10]
        last = start
        data = chunk(written, start)
        r = lib.snd_pcm_writei(pcm, data, frames)
        if r < 0:
            xruns += 1
            check(lib.snd_pcm_recover(pcm, r, 1), "recover")
            readings = []  # the play position restarted: the estimate starts over
            cached[:] = [None, 0, 0]
            written = 0
            continue
        written += r
        if lib.snd_pcm_delay(pcm, ctypes.byref(delay)) == 0:
            now = time.clock_gettime(time.CLOCK_MONOTONIC)
            played = written - delay.value
            if played > 0:
                readings.append(now - played / RATE)
                cached[2] += 1
                del readings[:-2 * WINDOW]
                # The card's position moved (snd-aloop does when its other side opens or closes): three readings
                # in a row 50 ms off the estimate. Start again from them; silence until 12 readings agree.
                if start is not None and len(readings) >= 3 and (all(x - start > 0.05 for x in readings[-3:])
                                                                 or all(start - x > 0.05 for x in readings[-3:])):
                    readings[:] = readings[-3:]
                    cached[:] = [None, 0, cached[2]]
                    moves += 1
        if a.report and time.monotonic() - reported >= 1 and len(readings) >= 12:
            reported = time.monotonic()
            best = estimate()
            late = sorted((x - best) * 1e6 for x in readings[-WINDOW:])
            report = {"start_s": best, "device": a.device, "period": period.value, "write": frames,
                      "buffer": buffer.value, "xruns": xruns, "moves": moves, "shifts": shifts, "steps": steps,
                      "clicks": clicks,
                      "readings": len(late), "late_us": {"p50": round(late[len(late) // 2], 1),
                                                         "p99": round(late[int(0.99 * (len(late) - 1))], 1),
                                                         "max": round(late[-1], 1)}}
            tmp = a.report + ".tmp"
            with open(tmp, "w") as f:
                json.dump(report, f)
            os.replace(tmp, a.report)


if __name__ == "__main__":
    raise SystemExit(main())
