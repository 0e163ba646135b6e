"""`coord deliver --to multiview` (CONTRACT §15) on a 6-camera `coord demo` take, judged by ffprobe and by decoding
the movie with ffmpeg: every tile's SYNCSTRIPE (the synthetic cameras' ground truth) must name the group of the output
frame it is in, a frame flagged `dup` must carry the FILLED mark, and bad requests are one sentence."""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
COORD = os.environ.get("COORD", str(ROOT / ".build/debug/coord"))


def crc8(data: bytes) -> int:
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


def stripe_truth(luma: np.ndarray, x0: int, y0: int, scale: float) -> int | None:
    """The true exposure centre (µs) of the SYNCSTRIPE whose top-left is at (x0, y0), painted at `scale`: each 8×8
    block's centre sampled where the scaling put it (as test_console.tile_stripe reads preview tiles)."""
    bits = []
    for b in range(104):
        row, col = divmod(b, 13)
        y, x = y0 + int((row * 8 + 4) * scale), x0 + int((col * 8 + 4) * scale)
        bits.append(1 if luma[y, x] > 125 else 0)
    data = np.packbits(np.array(bits, np.uint8)).tobytes()
    if data[0] != 0xA5 or crc8(data[:12]) != data[12]:
        return None
    return int.from_bytes(data[6:12], "big")


def grid_cells(manifest: dict, width: int) -> list[tuple[int, int, int, int]]:
    """The documented grid (docs/take-format.md): ⌈√n⌉ columns of width/columns (even), cells as tall as the tallest
    camera's aspect; each camera's picture fitted and centred in its cell. (x, y, picture width, camera width)."""
    cams = manifest["cameras"]
    columns = math.ceil(math.sqrt(len(cams)))
    cell_w = (width // columns) & ~1
    tallest = max(cams, key=lambda c: c["height"] / c["width"])
    cell_h = (cell_w * tallest["height"] // tallest["width"]) & ~1
    out = []
    for k, c in enumerate(cams):
        wide = c["width"] * cell_h >= cell_w * c["height"]
        w = cell_w if wide else max(2, (cell_h * c["width"] // c["height"]) & ~1)
        h = max(2, (cell_w * c["height"] // c["width"]) & ~1) if wide else cell_h
        x = (k % columns) * cell_w + (((cell_w - w) // 2) & ~1)
        y = (k // columns) * cell_h + (((cell_h - h) // 2) & ~1)
        out.append((x, y, w, c["width"]))
    return out


def frames(movie: Path, indices: list[int], pix_fmt: str = "gray") -> dict[int, np.ndarray]:
    """Output frames `indices` of `movie`, decoded to raw pictures."""
    info = probe(movie)
    video = next(s for s in info["streams"] if s["codec_type"] == "video")
    w, h = video["width"], video["height"]
    select = "+".join(f"eq(n\\,{i})" for i in indices)
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", str(movie), "-vf", f"select={select}", "-vsync", "0",
                          "-f", "rawvideo", "-pix_fmt", pix_fmt, "-"], capture_output=True, timeout=120, check=True).stdout
    planes = 3 if pix_fmt == "rgb24" else 1
    pictures = np.frombuffer(raw, np.uint8).reshape(len(indices), h, w, planes) if planes == 3 else \
        np.frombuffer(raw, np.uint8).reshape(len(indices), h, w)
    return dict(zip(sorted(indices), pictures))


def probe(path: Path) -> dict:
    out = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-show_streams", "-of", "json", str(path)],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return json.loads(out)


def deliver(take: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([COORD, "deliver", str(take), "--to", "multiview", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def take(tmp_path_factory) -> Path:
    """A 6-camera 3-second demo take (a microphone per node) and its grid multiview at the default 1920 wide."""
    takes = tmp_path_factory.mktemp("multiview") / "takes"
    proc = subprocess.run([COORD, "demo", "--takes-dir", str(takes), "--nodes", "3", "--cameras-per-node", "2",
                           "--seconds", "3"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (take,) = [d for d in takes.iterdir() if d.is_dir()]
    made = deliver(take)
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == f"made deliver/{take.name}_multiview.mov", made.stdout
    # Progress on stderr as the pass goes, ending at the last frame.
    assert "multiview: frame" in made.stderr and "fps, ETA" in made.stderr, made.stderr
    return take


@pytest.fixture(scope="module")
def manifest(take) -> dict:
    return json.loads((take / "manifest.json").read_text())


def movie_of(take: Path) -> Path:
    return take / "deliver" / f"{take.name}_multiview.mov"


def group_of(truth: int, manifest: dict) -> int:
    return round((truth - manifest["t0_us"]) / manifest["frame_period_us"])


def test_the_multiview_is_h264_of_one_frame_per_group_with_timecode_and_sound(take, manifest):
    info = probe(movie_of(take))
    video = [s for s in info["streams"] if s["codec_type"] == "video"]
    audio = [s for s in info["streams"] if s["codec_type"] == "audio"]
    tmcd = [s for s in info["streams"] if s.get("codec_tag_string") == "tmcd"]
    assert len(video) == 1 and video[0]["codec_name"] == "h264", video
    assert video[0]["width"] == 1920, video[0]
    assert int(video[0]["nb_read_frames"]) == manifest["groups"], video[0]
    assert len(tmcd) == 1 and tmcd[0]["tags"]["timecode"] == manifest["timecode"], tmcd
    assert len(audio) == 1 and audio[0]["codec_name"] == "aac" and audio[0]["channels"] == 2, audio
    # The mix lasts as long as the pictures (to within one AAC frame).
    seconds = manifest["groups"] * manifest["frame_period_us"] / 1e6
    assert abs(float(audio[0]["duration"]) - seconds) < 2048 / 48000, (audio[0]["duration"], seconds)
    # A second run finds it up to date.
    again = deliver(take)
    assert again.returncode == 0 and again.stdout.strip() == f"up to date deliver/{take.name}_multiview.mov", again


def test_the_mix_is_aligned_to_the_pictures(take, manifest):
    """The synthetic microphones click at every whole second of true time (SYNCCLICK, CONTRACT §9): in the mix, sample
    s is the rig's instant t0 + s / 48 kHz, so each click starts within a millisecond of a whole second."""
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", str(movie_of(take)), "-map", "0:a", "-ac", "1", "-f", "f32le", "-"],
                         capture_output=True, timeout=60, check=True).stdout
    sound = np.frombuffer(raw, np.float32)
    loud = np.flatnonzero(np.abs(sound) > 0.05)
    assert len(loud) > 0, "the mix is silent"
    starts = [loud[0]] + [x for p, x in zip(loud, loud[1:]) if x - p > 4800]
    # A click's onset is where it first reaches 30% of its peak: AAC smears a transient backwards (pre-echo), and
    # near the stream's start that ringing crossed 0.05 about 50 samples (1.07 ms) before the click itself.
    onsets = []
    for start in starts:
        burst = np.abs(sound[start:start + 480])
        onsets.append(start + int(np.argmax(burst >= 0.3 * burst.max())))
    assert len(onsets) >= 2, onsets
    for onset in onsets:
        instant = manifest["t0_us"] + onset * 1_000_000 / 48_000
        assert abs((instant + 500_000) % 1_000_000 - 500_000) < 1000, f"a click at sample {onset} is {instant} µs"


def test_every_tile_of_output_frame_i_shows_group_i(take, manifest):
    groups = manifest["groups"]
    sample = [0, groups // 2, groups - 1]
    cells = grid_cells(manifest, 1920)
    dups = {(c["node"], c["camera"]): {int(r.split(",")[1]) for r in
                                        (take / c["node"] / f"{c['camera']}.frames.csv").read_text().splitlines()[1:]
                                        if r.endswith(",dup")} for c in manifest["cameras"]}
    for i, luma in frames(movie_of(take), sample).items():
        for (x, y, w, camera_width), cam in zip(cells, manifest["cameras"]):
            truth = stripe_truth(luma, x, y, w / camera_width)
            who = f"{cam['node']}/{cam['camera']} in output frame {i}"
            assert truth is not None, f"the stripe of {who} does not decode"
            if i not in dups[(cam["node"], cam["camera"])]:
                assert group_of(truth, manifest) == i, f"{who} shows group {group_of(truth, manifest)}"


def test_a_filled_frame_carries_the_mark_and_only_it(take, manifest, tmp_path):
    # The same recording with one frame of the fourth camera flagged `dup` in its frames table.
    copy = tmp_path / take.name
    shutil.copytree(take, copy, ignore=shutil.ignore_patterns("deliver", "ascmhl"))
    cam = manifest["cameras"][3]
    table = copy / cam["node"] / f"{cam['camera']}.frames.csv"
    lines = table.read_text().splitlines()
    filled = manifest["groups"] // 3
    lines[1 + filled] = ",".join(lines[1 + filled].split(",")[:3] + ["dup"])
    table.write_text("\n".join(lines) + "\n")
    made = deliver(copy)
    assert made.returncode == 0, made.stderr
    columns = math.ceil(math.sqrt(len(manifest["cameras"])))
    cell_w = (1920 // columns) & ~1
    cell_h = (cell_w * 3 // 4) & ~1

    def red(picture: np.ndarray, k: int) -> int:
        # The mark's corner of cell k: its top-right quarter width, top sixth height.
        x, y = (k % columns) * cell_w, (k // columns) * cell_h
        region = picture[y:y + cell_h // 6, x + cell_w * 3 // 4:x + cell_w].astype(int)
        return int(((region[..., 0] > 180) & (region[..., 1] < 80) & (region[..., 2] < 80)).sum())

    shots = frames(movie_of(copy), [filled - 1, filled], "rgb24")
    assert red(shots[filled], 3) > 200, "the filled frame has no mark"
    assert red(shots[filled - 1], 3) == 0, "the frame before it is marked"
    assert all(red(shots[filled], k) == 0 for k in range(len(manifest["cameras"])) if k != 3), "another tile is marked"


def test_pip_puts_the_first_camera_full_frame(take, manifest):
    made = deliver(take, "--layout", "pip", "--width", "1280")
    assert made.returncode == 0, made.stderr
    info = probe(movie_of(take))
    video = next(s for s in info["streams"] if s["codec_type"] == "video")
    assert (video["width"], int(video["nb_read_frames"])) == (1280, manifest["groups"]), video
    main = manifest["cameras"][0]
    last = manifest["groups"] - 1
    for i, luma in frames(movie_of(take), [0, last]).items():
        truth = stripe_truth(luma, 0, 0, 1280 / main["width"])
        assert truth is not None and group_of(truth, manifest) == i


@pytest.mark.parametrize("args, words", [
    (["--width", "0"], "--width must be an even number of pixels from 160 to 7680 (got 0)."),
    (["--width", "1001"], "--width must be an even number of pixels"),
    (["--layout", "diagonal"], "--layout must be grid or pip (got diagonal)."),
])
def test_a_bad_request_is_one_sentence(take, args, words):
    proc = deliver(take, *args)
    assert proc.returncode == 2 and words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_take_without_cameras_or_a_layout_without_multiview_is_one_sentence(take, tmp_path):
    bare = tmp_path / take.name
    bare.mkdir()
    manifest = json.loads((take / "manifest.json").read_text())
    manifest["cameras"] = []
    (bare / "manifest.json").write_text(json.dumps(manifest))
    proc = deliver(bare)
    assert proc.returncode == 2 and "has no cameras to put in a multiview" in proc.stderr, proc.stderr
    proc = subprocess.run([COORD, "deliver", str(take), "--to", "fcpxml", "--layout", "pip"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--layout applies only to --to multiview" in proc.stderr, proc.stderr
