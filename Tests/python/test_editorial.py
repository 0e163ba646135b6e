"""The editorial handoff of a `coord demo` take: group 0's timecode in every .mkv (as ffprobe and ffmpeg read it)
and `<take-id>.otio`, read back with the opentimelineio package (not coord's own code)."""
from __future__ import annotations

import json
import math
import os
import subprocess
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path

import opentimelineio as otio
import pytest

from conftest import FRAME_PERIOD_US, at_once, error_name, new_take_id, now_us

ROOT = Path(__file__).resolve().parents[2]
COORD = os.environ.get("COORD", str(ROOT / ".build/debug/coord"))
DAY_S = 86_400


TAKES = {
    "take": ("--nodes", "2", "--cameras-per-node", "2", "--seconds", "2"),  # one short take: 2 nodes × 2 cameras, 2 s
    15: ("--nodes", "1", "--seconds", "1", "--fps", "15", "--size", "320x240"),
    25: ("--nodes", "1", "--seconds", "1", "--fps", "25", "--size", "320x240"),
}


def record(takes: Path, *args: str) -> Path:
    proc = subprocess.run([COORD, "demo", "--takes-dir", str(takes), *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    dirs = [d for d in takes.iterdir() if d.is_dir()]
    assert len(dirs) == 1, f"expected exactly one take directory, found {dirs}"
    return dirs[0]


@pytest.fixture(scope="module")
def takes(tmp_path_factory) -> dict:
    """The module's demo takes, recorded at once: a demo mostly waits for its clocks and its group 0, and nothing
    here measures timing (the timecode is arithmetic on the start's wall clock)."""
    folders = {key: tmp_path_factory.mktemp(f"editorial-{key}") / "takes" for key in TAKES}
    return at_once({key: (record, folders[key], *args) for key, args in TAKES.items()})


@pytest.fixture(scope="module")
def take(takes) -> Path:
    return takes["take"]


@pytest.fixture(scope="module")
def manifest(take) -> dict:
    return json.loads((take / "manifest.json").read_text())


def take_fps(manifest: dict) -> int:
    return round(1_000_000 / manifest["frame_period_us"])


def frame_of_day(timecode: str, fps: int) -> int:
    """Frames since midnight of a non-drop `HH:MM:SS:FF`."""
    parts = timecode.split(":")
    assert len(parts) == 4 and all(p.isdigit() for p in parts), f"{timecode!r} is not HH:MM:SS:FF"
    h, m, s, f = map(int, parts)
    assert h < 24 and m < 60 and s < 60 and f < fps, f"{timecode!r} is out of range at {fps} fps"
    return ((h * 60 + m) * 60 + s) * fps + f


def ffprobe_tags(path: Path) -> tuple[dict, dict]:
    """The file's global tags and its video stream's tags, keys upper-cased (Matroska stores them so)."""
    out = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format_tags:stream_tags", "-of", "json", str(path)],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    j = json.loads(out)
    upper = lambda tags: {k.upper(): v for k, v in (tags or {}).items()}
    return upper(j.get("format", {}).get("tags")), upper(j["streams"][0].get("tags"))


def test_every_file_carries_the_manifests_timecode(take, manifest):
    timecode = manifest.get("timecode")
    assert timecode, "the manifest has no timecode"
    frame_of_day(timecode, take_fps(manifest))
    mkvs = [take / c["node"] / f"{c['camera']}.mkv" for c in manifest["cameras"]]
    assert len(mkvs) == 4 and all(p.is_file() for p in mkvs)
    for mkv in mkvs:
        global_tags, stream_tags = ffprobe_tags(mkv)
        assert global_tags.get("TIMECODE") == timecode, f"{mkv}: global tags {global_tags}"
        assert stream_tags.get("TIMECODE") == timecode, f"{mkv}: video stream tags {stream_tags}"
        # `ffmpeg -i` prints it with the file's metadata, as for a file made with `ffmpeg -timecode`.
        banner = subprocess.run(["ffmpeg", "-hide_banner", "-i", str(mkv)], capture_output=True, text=True, timeout=60).stderr
        assert any(line.split(":", 1)[0].strip().upper() == "TIMECODE" and line.split(":", 1)[1].strip() == timecode
                   for line in banner.splitlines() if ":" in line), banner


def test_the_timecode_is_the_local_time_of_group_zero(manifest):
    fps = take_fps(manifest)
    start = datetime.strptime(manifest["start_wallclock"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    local = start.astimezone()  # this machine's zone, as the coordinator's
    expected = ((local.hour * 60 + local.minute) * 60 + local.second) * fps + math.floor(local.microsecond * fps / 1e6)
    got = frame_of_day(manifest["timecode"], fps)
    day = DAY_S * fps
    difference = min((got - expected) % day, (expected - got) % day)
    assert difference <= 1, f"timecode {manifest['timecode']} is {difference} frames from {local.isoformat()} at {fps} fps"


def test_the_otio_timeline_lines_every_camera_up_by_group(take, manifest):
    fps = take_fps(manifest)
    path = take / f"{manifest['take_id']}.otio"
    assert path.is_file()
    timeline = otio.adapters.read_from_file(str(path))
    start = frame_of_day(manifest["timecode"], fps)
    assert timeline.global_start_time == otio.opentime.RationalTime(start, fps)
    assert timeline.metadata["coord"]["take_id"] == manifest["take_id"]
    assert timeline.metadata["coord"]["t0_us"] == manifest["t0_us"]

    tracks = timeline.video_tracks()
    assert [t.name for t in tracks] == [f"{c['node']}/{c['camera']}" for c in manifest["cameras"]]
    # One audio track per microphone (CONTRACT §9), named like it.
    assert [t.name for t in timeline.audio_tracks()] == [f"{a['node']}/{a['mic']}" for a in manifest.get("audio", [])]
    starts = set()
    for track, camera in zip(tracks, manifest["cameras"]):
        clips = list(track.find_clips())
        assert len(clips) == 1, f"track {track.name} holds {len(clips)} clips"
        clip = clips[0]
        assert clip.duration() == otio.opentime.RationalTime(manifest["groups"], fps)
        assert clip.source_range.start_time == otio.opentime.RationalTime(start, fps)
        # Where the clip lands in the stack, and which source frame it starts on.
        in_stack = track.range_in_parent().start_time + clip.range_in_parent().start_time
        starts.add((in_stack.value, in_stack.rate, clip.source_range.start_time.value))
        ref = clip.media_reference
        assert isinstance(ref, otio.schema.ExternalReference), f"{track.name}: {ref}"
        assert (take / ref.target_url).is_file(), f"{track.name}: {ref.target_url} does not exist in {take}"
        assert ref.target_url == f"{camera['node']}/{camera['camera']}.mkv"
        assert ref.available_range == otio.opentime.TimeRange(otio.opentime.RationalTime(start, fps),
                                                              otio.opentime.RationalTime(camera["frames"], fps))
    assert len(starts) == 1, f"the tracks start at different times: {starts}"


@pytest.mark.parametrize("fps", [15, 25])
def test_the_otio_of_a_take_at_15_and_25_fps_goes_through_the_official_adapters(takes, tmp_path, fps):
    """The timeline runs at the take's own rate, as its XMLs do (issue 40: a 15 fps take's said 30). OTIO's FCP 7 and
    FCPXML adapters write only SMPTE timecode rates, which have no 15 fps: at 15 the take's own `<take-id>.xml` and
    `.fcpxml` (coord deliver) are the hand-off to those editors, and the timeline is checked by OpenTimelineIO alone."""
    take = takes[fps]
    manifest = json.loads((take / "manifest.json").read_text())
    assert take_fps(manifest) == fps
    start_s = frame_of_day(manifest["timecode"], fps) / fps
    timeline = otio.adapters.read_from_file(str(take / f"{manifest['take_id']}.otio"))
    assert timeline.global_start_time.to_seconds() == pytest.approx(start_s)
    assert {c.source_range.start_time.rate for c in timeline.find_clips()} == {timeline.global_start_time.rate} == {fps}
    for adapter, ext in [("fcp_xml", "xml"), ("fcpx_xml", "fcpxml")] if fps != 15 else []:
        out = tmp_path / f"take-{fps}.{ext}"
        otio.adapters.write_to_file(timeline, str(out), adapter_name=adapter)
        if adapter == "fcpx_xml":
            # What the adapter wrote is exact: every asset and clip starts at group 0's timecode, as a rational.
            starts = {Fraction(e.get("start").rstrip("s")) for e in ET.parse(out).iter() if e.tag in ("asset", "clip")}
            assert starts == {Fraction(frame_of_day(manifest["timecode"], fps), fps)}, starts
        back = otio.adapters.read_from_file(str(out), adapter_name=adapter)
        clips = [c for t in back.tracks for c in t.find_clips()]
        assert len(clips) == len(manifest["cameras"]) + len(manifest.get("audio", [])), adapter
        # The FCPXML adapter reads "N/Ds" back as int(N / D * fps) (otio_fcpx_xml_adapter 1.0.0, fcpx_xml.py), which
        # truncates 906996/25 s to frame 906995: a frame early for some times of day, in its reader, not in the file.
        slack = 1 if adapter == "fcpx_xml" else 0
        for c in clips:
            # Every track from the sequence's start, at group 0's timecode, over the take's groups, frame-exact.
            assert c.range_in_parent().start_time.to_seconds() == 0, (adapter, c.name)
            assert 0 <= frame_of_day(manifest["timecode"], fps) - c.source_range.start_time.to_frames(fps) <= slack, (adapter, c.name)
            assert c.source_range.duration.to_frames(fps) == manifest["groups"], (adapter, c.name)


# ---- the node alone: Arm's timecode, valid and not ----


def arm_message(pb, take_id: str, timecode: str):
    return pb.Arm(take_id=take_id, clock=pb.ClockMapping(offset_us=0, rate_ppm=0, ref_local_us=0),
                  t0_us=now_us() + 700_000, frame_period_us=FRAME_PERIOD_US, timecode=timecode)


@pytest.mark.parametrize("bad", ["25:00:00:00", "10:00:00:30", "10:00:00;05", "10:00:00", "ten o'clock"])
def test_the_node_refuses_a_malformed_timecode_naming_take_and_value(client, pb, bad):
    take_id = new_take_id("tc")
    client.call("configure", pb.Configure(take_id=take_id, cameras=[pb.CameraConfig(
        camera="cam0", ordinal=0, width=320, height=240, fps=30, codec="mjpeg")]), "ack")
    reply = client.request("arm", arm_message(pb, take_id, bad), timeout_ms=10_000)
    assert error_name(pb, reply) == "BAD_CONFIG", reply
    assert take_id in reply.error.message and bad in reply.error.message, reply.error.message
    assert reply.error.message.count(". ") == 0 and reply.error.message.endswith("."), reply.error.message
    # Nothing was armed: the same take arms with a good timecode.
    client.call("arm", arm_message(pb, take_id, "10:00:00:29"), "armed", timeout_ms=10_000)
    client.call("abort", pb.Abort(take_id=take_id, reason="test over"), "ack")
