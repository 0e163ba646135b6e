"""Rational frame rates end to end and group 0 on a timecode frame (CONTRACT §13, issue 40 items 2 and 7): a
`coord demo --fps 30000/1001` take judged by ffprobe, xml.etree, OpenTimelineIO's FCP 7 XML adapter and the frames
tables; and a sweep of short takes at several rates whose group 0 lands on a frame of the time of day."""
from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from fractions import Fraction
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COORD = os.environ.get("COORD", str(ROOT / ".build/debug/coord"))
NTSC = Fraction(30000, 1001)


def demo(takes: Path, *args: str) -> Path:
    proc = subprocess.run([COORD, "demo", "--takes-dir", str(takes), "--no-audio", *args],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    dirs = [d for d in takes.iterdir() if d.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def seconds_of_day(start_wallclock: str) -> Fraction:
    """The local time of day of `start_wallclock` (RFC 3339, µs), exactly, as the coordinator's timecode reads it."""
    utc = datetime.fromisoformat(start_wallclock.replace("Z", "+00:00"))
    local = utc.astimezone()
    return Fraction(((local.hour * 60 + local.minute) * 60 + local.second) * 1_000_000 + local.microsecond, 1_000_000)


def drop_frame_label(frame: int) -> str:
    """SMPTE 12M drop-frame label of frame `frame` since midnight at 29.97 (written independently of coord)."""
    tens, rest = divmod(frame, 17_982)
    frame += 18 * tens + (2 * ((rest - 2) // 1798) if rest >= 2 else 0)
    seconds, ff = divmod(frame, 30)
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d};{ff:02d}"


@pytest.fixture(scope="module")
def take(tmp_path_factory) -> Path:
    """A 2-node 3-second take at 29.97, delivered as .mov, FCPXML and FCP 7 XML."""
    return demo(tmp_path_factory.mktemp("ntsc") / "takes", "--nodes", "2", "--fps", "30000/1001", "--seconds", "3",
                "--size", "320x240", "--deliver", "mov,fcpxml,fcp7xml")


@pytest.fixture(scope="module")
def manifest(take) -> dict:
    return json.loads((take / "manifest.json").read_text())


def test_the_manifest_says_the_rational_and_the_grid_is_exact(take, manifest):
    assert manifest["status"] == "complete"
    assert manifest["frame_period_us"] == 33_367
    assert manifest["groups"] == 90  # 3 s at 29.97: 89.91 groups, rounded
    for cam in manifest["cameras"]:
        assert cam["fps"] == "30000/1001" and cam["frames"] == manifest["groups"], cam
        rows = (take / cam["node"] / f"{cam['camera']}.frames.csv").read_text().splitlines()[1:]
        # Each frame's centre is near its group's exact instant, t0 + round(g × 1001000 / 30), never a rounded
        # 33 367 µs step (which would be 30 µs late by group 90).
        for row in rows:
            _, group, center, _ = row.split(",")
            exact = manifest["t0_us"] + round(int(group) * Fraction(1_001_000, 30))
            assert abs(int(center) - exact) < 200, (cam["node"], row, exact)
    # The coordinator says how far its wall clock is from its time service, or that it cannot.
    service = manifest["wallclock_service"]
    assert service["source"] in ("chrony", "unknown"), service
    assert ("offset_us" in service) == (service["source"] == "chrony"), service


def test_group_zero_is_its_drop_frame_label(manifest):
    of_day = seconds_of_day(manifest["start_wallclock"])
    frames = of_day * NTSC
    # On a frame of the time of day (the wall clock printed to the µs), and labelled with that frame.
    assert abs(frames - round(frames)) / NTSC < Fraction(1, 1000), float(frames)
    assert manifest["timecode"] == drop_frame_label(round(frames) % 2_589_408), (manifest["timecode"], float(frames))


def test_every_mov_has_drop_frame_timecode_at_the_rational(take, manifest):
    for cam in manifest["cameras"]:
        mov = take / "deliver" / f"{manifest['take_id']}_{cam['node']}_{cam['camera']}.mov"
        out = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-show_streams", "-of", "json", str(mov)],
                             capture_output=True, text=True, timeout=60, check=True).stdout
        streams = json.loads(out)["streams"]
        video = [s for s in streams if s["codec_type"] == "video"]
        tmcd = [s for s in streams if s.get("codec_tag_string") == "tmcd"]
        assert len(video) == 1 and len(tmcd) == 1, streams
        assert video[0]["r_frame_rate"] == "30000/1001" and video[0]["time_base"] == "1/30000", video[0]
        assert int(video[0]["nb_read_frames"]) == manifest["groups"]
        # ffprobe reads the tmcd track's drop-frame flag back as the ';'.
        assert tmcd[0]["tags"]["timecode"] == manifest["timecode"] and ";" in manifest["timecode"], tmcd[0]


def test_fcpxml_frame_duration_and_drop_frame(take, manifest):
    root = ET.parse(take / f"{manifest['take_id']}.fcpxml").getroot()
    assert [f.get("frameDuration") for f in root.iter("format")] == ["1001/30000s"]
    formats = [e.get("tcFormat") for e in root.iter() if e.get("tcFormat") is not None]
    # Apple's DTD allows tcFormat (DF | NDF): every one is DF here.
    assert formats and set(formats) == {"DF"}, formats
    of_day = seconds_of_day(manifest["start_wallclock"])
    start = Fraction(root.find(".//multicam").get("tcStart").rstrip("s"))
    assert start == round(of_day * NTSC) / NTSC
    duration = Fraction(root.find(".//spine/mc-clip").get("duration").rstrip("s"))
    assert duration == manifest["groups"] / NTSC
    # Every time is a whole number of 1001/30000 s frames.
    for e in root.iter():
        for key in ("start", "offset", "duration", "tcStart"):
            if e.get(key) and e.get(key) != "0s":
                assert (Fraction(e.get(key).rstrip("s")) * NTSC).denominator == 1, (e.tag, key, e.get(key))


def test_fcp7_xml_is_ntsc_and_reads_aligned_in_opentimelineio(take, manifest):
    path = take / f"{manifest['take_id']}.xml"
    root = ET.parse(path).getroot()
    rates = root.findall(".//rate")
    assert rates and {(r.findtext("timebase"), r.findtext("ntsc")) for r in rates} == {("30", "TRUE")}
    assert {d.text for d in root.iter("displayformat")} == {"DF"}
    import opentimelineio as otio
    timeline = otio.adapters.read_from_file(str(path), adapter_name="fcp_xml")
    clips = list(timeline.find_clips())
    assert len(clips) == len(manifest["cameras"])
    for clip in clips:
        assert clip.source_range.duration.rate == pytest.approx(float(NTSC))
        assert clip.range_in_parent().start_time.to_frames() == 0
        assert clip.source_range.duration.to_frames() == manifest["groups"]


SWEEP = ["24", "25", "30000/1001", "50", "60000/1001", "24000/1001"]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> dict[str, dict]:
    """One short single-node take at each rate of SWEEP, three at a time: a demo spends most of its seconds waiting
    for its clocks and its group 0, and where group 0 lands is arithmetic on the clock mapping, not a timing."""
    def one(rate_and_dir: tuple[str, Path]) -> dict:
        rate, folder = rate_and_dir
        take = demo(folder / "takes", "--nodes", "1", "--fps", rate, "--seconds", "0.5", "--size", "320x240")
        return json.loads((take / "manifest.json").read_text())
    folders = [tmp_path_factory.mktemp("sweep") for _ in SWEEP]
    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(zip(SWEEP, pool.map(one, zip(SWEEP, folders))))


@pytest.mark.parametrize("rate", SWEEP)
def test_group_zero_is_within_a_millisecond_of_a_frame_of_the_time_of_day(sweep, rate):
    manifest = sweep[rate]
    fps = Fraction(rate)
    assert manifest["cameras"][0]["fps"] == (int(rate) if fps.denominator == 1 else rate)
    frames = seconds_of_day(manifest["start_wallclock"]) * fps
    off = abs(frames - round(frames)) / fps
    assert off < Fraction(1, 1000), f"{rate}: group 0 is {float(off) * 1000:.3f} ms from a frame of the time of day"
    separator = ";" if rate in ("30000/1001", "60000/1001") else ":"
    assert manifest["timecode"][8] == separator, manifest["timecode"]
