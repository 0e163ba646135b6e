"""The lab's ground truth read back from a take (issue 36): the SYNCSTRIPE v1 a gadget webcam painted into each
frame (its sensor counter and true exposure centre on the guest's CLOCK_MONOTONIC), and the node's clock at a rig
instant by the manifest's clock_track, to hold the node's centres against that truth on the node's own clock."""
from __future__ import annotations

import subprocess
from pathlib import Path


def crc8(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


def stripes(mkv: Path) -> list[tuple[int, int] | None]:
    """Each frame's stripe as (sensor counter, true centre µs), None where it does not read (CONTRACT §5)."""
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", str(mkv), "-map", "0:v:0", "-vf", "crop=104:64:0:0",
                          "-f", "rawvideo", "-pix_fmt", "gray", "-"], capture_output=True, timeout=300)
    if raw.returncode != 0:
        raise ValueError(f"ffmpeg cannot decode {mkv}: {raw.stderr.decode().strip()[-300:]}")
    out: list[tuple[int, int] | None] = []
    size = 104 * 64
    for k in range(len(raw.stdout) // size):
        frame = raw.stdout[k * size:(k + 1) * size]
        # each block's centre pixel: 8×8 blocks, 13 a row
        bits = "".join("1" if frame[(b // 13 * 8 + 4) * 104 + b % 13 * 8 + 4] > 125 else "0" for b in range(104))
        data = int(bits, 2).to_bytes(13, "big")
        ok = data[0] == 0xA5 and crc8(data[:12]) == data[12]
        out.append((int.from_bytes(data[2:6], "big"), int.from_bytes(data[6:12], "big")) if ok else None)
    return out


def node_clock(track: list[dict], rig_us: float) -> float:
    """The node's clock at rig instant `rig_us` by the clock_track point in force then (as scripts/check-audio.py)."""
    point = track[0]
    for p in track:
        if p["t_us"] <= rig_us:
            point = p
    return rig_us + point["offset_us"] + point["drift_ppm"] * 1e-6 * (rig_us - point["t_us"])


def centre_errors(manifest: dict, take_dir: Path, node: str, camera: str) -> tuple[list[float], list]:
    """For each frame of node/camera that shows a new sensor frame: the node's centre (frames.csv, mapped to the
    node's clock) − the stripe's true centre, in µs; and the stripes."""
    found = stripes(take_dir / node / f"{camera}.mkv")
    track = sorted((p for p in manifest["clock_track"] if p["node"] == node), key=lambda p: p["t_us"])
    rows = (take_dir / node / f"{camera}.frames.csv").read_text().splitlines()[1:]
    errors, last = [], None
    for row, s in zip(rows, found):
        if s is None or s[0] == last:  # a repeat (filled or held) shows an earlier frame again
            continue
        last = s[0]
        errors.append(node_clock(track, float(row.split(",")[2])) - s[1])
    return errors, found
