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


# --- through the lab's clock truth (clocktruth.py): guest instants on the host's clock, which is the rig's ---------

def percentiles(values: list[float]) -> dict:
    """p50, p99 and max of the magnitudes (µs), as the sync report states them."""
    s = sorted(abs(v) for v in values)
    if not s:
        return {"p50": 0, "p99": 0, "max": 0}
    at = lambda p: round(s[min(len(s) - 1, int(round(p * (len(s) - 1))))], 1)  # noqa: E731
    return {"p50": at(0.5), "p99": at(0.99), "max": round(s[-1], 1)}


def trigger_truth(entries: list[dict], edges: dict[str, list[int]], manifest: dict, truths: dict) -> dict:
    """Adds to each output's entry its kernel edges held against the grid instants on the host's clock through the
    truth (`truth_error_us`, `truth_signed_us`, `truth_uncertainty_us`); returns the skew between VMs' edges of the
    same group (latest − earliest, on the host's clock) over the groups every output pulsed."""
    from .gpiosim import CAMERA_BINDING
    t0, period, groups = manifest["t0_us"], manifest["frame_period_us"], manifest["groups"]
    by_group: dict[int, dict[str, float]] = {}
    for e in entries:
        t = truths[e["vm"]]
        cam = next((c for c in manifest["cameras"] if c["node"] == e["vm"]), {})
        lead = CAMERA_BINDING["trigger"]["delay_us"] + ((cam.get("controls") or {}).get("exposure_us") or 0) // 2
        errors = []
        for edge in edges[e["vm"]]:
            host = t.to_host(edge)
            group = round((host + lead - t0) / period)
            if 0 <= group < groups:
                errors.append(host - (t0 + group * period - lead))
                by_group.setdefault(group, {})[e["vm"]] = host
        e["truth_error_us"] = percentiles(errors)
        e["truth_signed_us"] = {"min": round(min(errors, default=0), 1), "max": round(max(errors, default=0), 1)}
        e["truth_uncertainty_us"] = round(t.uncertainty_us, 1)
    skews = [max(h.values()) - min(h.values()) for h in by_group.values() if len(h) == len(entries)]
    u = sum(sorted((truths[e["vm"]].uncertainty_us for e in entries), reverse=True)[:2])
    return percentiles(skews) | {"groups": len(skews), "uncertainty_us": round(u, 1)}


def uvc_truth(manifest: dict, take_dir: Path, truths: dict) -> dict:
    """Each gadget camera's true phase from its stripes (each new frame's true centre on the host's clock through
    the truth, against the instant of the group the node gave it, as the report's phase is; and to the nearest) beside the sync report's phase and its stated bound (±2σ of the clock
    and centre uncertainties), and the true spread per group across the VMs beside the report's spread and bound.
    Rows as the report counts them: dup (filled or held) and recovered rows left out. A figure holds when
    |report − truth| ≤ the report's bound + the truth's uncertainty."""
    import json
    stated = {(c["node"], c["camera"]): c for c in json.loads((take_dir / "sync-report.json").read_text())["cameras"]}
    t0, period = manifest["t0_us"], manifest["frame_period_us"]
    cameras, by_group = [], {}
    for cam in manifest["cameras"]:
        node, name = cam["node"], cam["camera"]
        t, s = truths[node], stated.get((node, name), {})
        sigma = ((s.get("clock_uncertainty_us") or 0) ** 2 + (s.get("center_uncertainty_us") or 0) ** 2) ** 0.5
        found = stripes(take_dir / node / f"{name}.mkv")
        rows = (take_dir / node / f"{name}.frames.csv").read_text().splitlines()[1:]
        phase, nearest, errors, unread = [], [], [], 0
        for row, stripe in zip(rows, found):
            _, group, centre, flags = (row.split(",") + [""])[:4]
            if "dup" in flags or "recovered" in flags:
                continue
            if stripe is None:
                unread += 1
                continue
            true = t.to_host(stripe[1])
            grid = t0 + int(group) * period
            phase.append(true - grid)
            nearest.append((true - t0 + period / 2) % period - period / 2)
            errors.append(float(centre) - true)
            by_group.setdefault(int(group), []).append((float(centre), true, 2 * sigma, t.uncertainty_us))
        truth_phase, report_phase = percentiles(phase), s.get("phase_error_us") or {}
        allowed = 2 * sigma + t.uncertainty_us
        cameras.append({"vm": node, "camera": name, "frames": len(phase), "unreadable": unread,
                        "phase_error_us": truth_phase, "report_phase_error_us": report_phase,
                        # the sensor's phase to the nearest grid instant, whichever group the node gave the frame
                        "phase_to_nearest_us": percentiles(nearest),
                        "bound_us": round(2 * sigma, 1), "truth_uncertainty_us": round(t.uncertainty_us, 1),
                        "centre_error_us": percentiles(errors) | {"min": round(min(errors, default=0), 1),
                                                                  "max_signed": round(max(errors, default=0), 1)},
                        "holds": all(abs(report_phase.get(k, 0) - truth_phase[k]) <= allowed
                                     for k in ("p50", "p99", "max")) if phase else None})  # None: no new frame
    true_spreads, report_spreads, excess = [], [], []
    for group, frames in by_group.items():
        if len(frames) < 2:
            continue
        centres, trues = [f[0] for f in frames], [f[1] for f in frames]
        true_spreads.append(max(trues) - min(trues))
        report_spreads.append(max(centres) - min(centres))
        # the report's spread bound for this group: the centres' span widened by each one's 2σ; the truth's own
        # error adds the two VMs' uncertainties
        low = min(f[0] - f[2] for f in frames)
        high = max(f[0] + f[2] for f in frames)
        u = sum(sorted((f[3] for f in frames), reverse=True)[:2])
        excess.append(true_spreads[-1] - (high - low) - u)
    report = json.loads((take_dir / "sync-report.json").read_text())
    return {"cameras": cameras,
            "spread": {"groups": len(true_spreads), "spread_us": percentiles(true_spreads),
                       "report_spread_us": report.get("spread_us"),
                       "report_spread_bound_us": report.get("spread_bound_us"),
                       "worst_excess_us": round(max(excess), 1) if excess else None,
                       "holds": max(excess) <= 0 if excess else None}}  # None: no group with two new frames
