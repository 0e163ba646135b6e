"""`coord deliver` (CONTRACT §10, §15) on a short `coord demo` take, judged by tools that are not coord's: ffprobe for the
QuickTime files, the Broadcast WAV chunks read by hand, xml.etree for FCPXML and FCP 7 XML, the ASC's own `ascmhl verify`,
and the official OpenTimelineIO FCP 7 XML and FCPXML adapters for the `.otio`."""
from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path
from urllib.parse import unquote

import pytest

from conftest import at_once

ROOT = Path(__file__).resolve().parents[2]
COORD = os.environ.get("COORD", str(ROOT / ".build/debug/coord"))
# ascmhl 1.2 moved `ascmhl verify` to its debug tool; `ascmhl diff` (new or missing files) stayed in the main one.
ASCMHL_VERIFY = [str(Path(sys.executable).parent / "ascmhl-debug"), "verify"]
ASCMHL_DIFF = [str(Path(sys.executable).parent / "ascmhl"), "diff"]


def demo(takes: Path, *args: str) -> tuple[Path, subprocess.CompletedProcess]:
    proc = subprocess.run([COORD, "demo", "--takes-dir", str(takes), "--seconds", "2", *args],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    dirs = [d for d in takes.iterdir() if d.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0], proc


def deliver(take: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([COORD, "deliver", str(take), *args], capture_output=True, text=True, timeout=timeout)


TAKES = {
    # A 2-camera 2-second demo take (one microphone per node), delivered with everything by `coord demo --deliver`.
    "take": ("--nodes", "2", "--deliver", "mov,fcpxml,fcp7xml,mhl"),
    "h264": ("--nodes", "1", "--codec", "h264", "--no-audio", "--seconds", "1"),
    "ffv1": ("--nodes", "1", "--codec", "ffv1", "--no-audio", "--seconds", "1", "--size", "320x240"),
}


@pytest.fixture(scope="module")
def takes(tmp_path_factory) -> dict[str, tuple[Path, subprocess.CompletedProcess]]:
    """The module's demo takes, recorded at once (a demo mostly waits for its clocks and its group 0; nothing here
    measures timing); each test that writes into one of them is the only one that uses it."""
    folders = {name: tmp_path_factory.mktemp(f"deliver-{name}") / "takes" for name in TAKES}
    return at_once({name: (demo, folders[name], *args) for name, args in TAKES.items()})


@pytest.fixture(scope="module")
def take(takes) -> Path:
    """TAKES["take"]."""
    take, proc = takes["take"]
    # Progress on stderr: a rate and an ETA.
    assert "MB/s" in proc.stderr and "ETA" in proc.stderr, proc.stderr
    return take


@pytest.fixture(scope="module")
def manifest(take) -> dict:
    return json.loads((take / "manifest.json").read_text())


def fps_of(manifest: dict) -> int:
    return round(1_000_000 / manifest["frame_period_us"])


def frame_of_day(timecode: str, fps: int) -> int:
    h, m, s, f = map(int, timecode.split(":"))
    return ((h * 60 + m) * 60 + s) * fps + f


def probe(path: Path) -> dict:
    out = subprocess.run(["ffprobe", "-v", "error", "-count_packets", "-show_streams", "-show_format", "-of", "json", str(path)],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return json.loads(out)


def copy_take(take: Path, dest: Path) -> Path:
    """The recorded take without what deliver made."""
    shutil.copytree(take, dest, ignore=shutil.ignore_patterns("deliver", "ascmhl", "*.fcpxml", "*.xml"))
    return dest


def mov(take: Path, manifest: dict, cam: dict) -> Path:
    """A camera's deliverable: it carries the take (CONTRACT §15)."""
    return take / "deliver" / f"{manifest['take_id']}_{cam['node']}_{cam['camera']}.mov"


def wav(take: Path, manifest: dict, a: dict) -> Path:
    return take / "deliver" / f"{manifest['take_id']}_{a['node']}_{a['mic']}.wav"


def check_movs(take: Path, manifest: dict, codec: str) -> None:
    for cam in manifest["cameras"]:
        info = probe(mov(take, manifest, cam))
        assert "mov" in info["format"]["format_name"], info["format"]
        video = [s for s in info["streams"] if s["codec_type"] == "video"]
        tmcd = [s for s in info["streams"] if s.get("codec_tag_string") == "tmcd"]
        assert len(video) == 1 and video[0]["codec_name"] == codec, video
        assert int(video[0]["nb_read_packets"]) == manifest["groups"], video[0]
        assert int(video[0]["nb_frames"]) == manifest["groups"], video[0]
        assert video[0]["r_frame_rate"] == f"{fps_of(manifest)}/1"
        assert len(tmcd) == 1, info["streams"]
        assert tmcd[0].get("tags", {}).get("timecode") == manifest["timecode"], tmcd[0]
        # The reel name, unique per take and camera, in the timecode track.
        assert tmcd[0]["tags"].get("reel_name") == f"{manifest['take_id']}_{cam['node']}_{cam['camera']}", tmcd[0]


def test_every_camera_gets_a_quicktime_with_timecode_and_one_frame_per_group(take, manifest):
    check_movs(take, manifest, "prores")
    for cam in manifest["cameras"]:
        info = probe(mov(take, manifest, cam))
        video = next(s for s in info["streams"] if s["codec_type"] == "video")
        assert video["profile"] == "Proxy" and video["codec_tag_string"] == "apco", video
        assert (video["width"], video["height"]) == (cam["width"], cam["height"])


def wav_chunks(path: Path) -> dict[str, bytes]:
    data = path.read_bytes()
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE", data[:12]
    chunks, i = {}, 12
    while i + 8 <= len(data):
        tag, size = data[i:i + 4].decode("latin-1"), struct.unpack("<I", data[i + 4:i + 8])[0]
        chunks[tag] = data[i + 8:i + 8 + size]
        i += 8 + size + (size & 1)
    return chunks


def test_every_microphone_gets_a_broadcast_wav_sample_exact_against_the_pictures(take, manifest):
    fps = fps_of(manifest)
    assert manifest["audio"], "the demo take has no sound"
    for a in manifest["audio"]:
        chunks = wav_chunks(wav(take, manifest, a))
        assert "bext" in chunks and "fmt " in chunks and "data" in chunks, list(chunks)
        channels, rate, bits = struct.unpack("<H", chunks["fmt "][2:4])[0], struct.unpack("<I", chunks["fmt "][4:8])[0], \
            struct.unpack("<H", chunks["fmt "][14:16])[0]
        assert (channels, rate, bits) == (a["channels"], a["sample_rate"], 16)
        # bext: Description 256, Originator 32, OriginatorReference 32, date 10, time 8, then TimeReference (64 bits).
        low, high = struct.unpack("<II", chunks["bext"][338:346])
        assert (high << 32 | low) == frame_of_day(manifest["timecode"], fps) * rate // fps
        # Origination date and time: group 0 in the local time the timecode counts (CONTRACT §15).
        date, clock = chunks["bext"][320:330].decode(), chunks["bext"][330:338].decode()
        local = datetime.strptime(manifest["start_wallclock"][:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).astimezone()
        assert (date, clock) == (local.strftime("%Y-%m-%d"), local.strftime("%H:%M:%S")), (date, clock, manifest["start_wallclock"])
        # iXML: project, scene (the take's name), take, tape (the take id), the timecode rate.
        ixml = ET.fromstring(chunks["iXML"].rstrip(b"\0"))
        assert ixml.tag == "BWFXML"
        assert ixml.findtext("SCENE") == manifest["name"] and ixml.findtext("TAPE") == manifest["take_id"], chunks["iXML"]
        assert ixml.findtext("PROJECT") and ixml.findtext("TAKE") == manifest["take_id"].rsplit("-", 1)[1]
        assert Fraction(ixml.findtext("SPEED/TIMECODE_RATE")) == fps and ixml.findtext("SPEED/TIMECODE_FLAG") == "NDF"
        samples = len(chunks["data"]) // (2 * channels)
        assert samples * fps == manifest["groups"] * rate, (samples, manifest["groups"])
        # ffprobe agrees on the duration of pictures and sound.
        assert abs(float(probe(wav(take, manifest, a))["format"]["duration"])
                   - manifest["groups"] / fps) < 1 / rate


def rational_seconds(text: str) -> float:
    assert text.endswith("s"), text
    num, _, den = text[:-1].partition("/")
    return int(num) / int(den or 1)


def test_fcpxml_holds_one_multicam_angle_per_camera_and_an_mc_clip(take, manifest):
    root = ET.parse(take / f"{manifest['take_id']}.fcpxml").getroot()
    assert root.tag == "fcpxml" and tuple(map(int, root.get("version").split("."))) >= (1, 9)
    multicams = root.findall(".//media/multicam")
    assert len(multicams) == 1
    media_id = root.find(".//media").get("id")
    angles = multicams[0].findall("mc-angle")
    # An angle per camera, then the sync sound: every microphone (CONTRACT §15).
    assert len(angles) == len(manifest["cameras"]) + 1 and angles[-1].get("angleID") == "sync-sound"
    tc = frame_of_day(manifest["timecode"], fps_of(manifest)) / fps_of(manifest)
    assert rational_seconds(multicams[0].get("tcStart")) == pytest.approx(tc)
    assets = {a.get("id"): a for a in root.findall(".//resources/asset")}
    for angle, cam in zip(angles, manifest["cameras"]):
        clip = angle.find("asset-clip")
        assert rational_seconds(clip.get("start")) == pytest.approx(tc)
        assert rational_seconds(clip.get("offset")) == pytest.approx(tc)
        asset = assets[clip.get("ref")]
        src = asset.find("media-rep").get("src")
        # Relative to the take directory, where the .fcpxml lies (CONTRACT §15).
        assert src == f"deliver/{manifest['take_id']}_{cam['node']}_{cam['camera']}.mov", src
        reel = asset.find("metadata/md[@key='com.apple.proapps.studio.reel']").get("value")
        assert reel == f"{manifest['take_id']}_{cam['node']}_{cam['camera']}"
        # Each angle carries its own node's microphone as connected clips.
        sound = [assets[c.get("ref")] for c in clip.findall("asset-clip")]
        own = [a for a in manifest["audio"] if a["node"] == cam["node"]]
        assert [a.find("media-rep").get("src") for a in sound] == [f"deliver/{wav(take, manifest, a).name}" for a in own], cam
        assert all(c.get("lane", "0").startswith("-") for c in clip.findall("asset-clip"))
    # The sync-sound angle holds every microphone.
    synced = [assets[c.get("ref")] for c in angles[-1].iter("asset-clip")]
    assert sorted(a.find("media-rep").get("src") for a in synced) == sorted(f"deliver/{wav(take, manifest, a).name}" for a in manifest["audio"])
    clips = root.findall(".//project/sequence/spine/mc-clip")
    assert len(clips) == 1 and clips[0].get("ref") == media_id
    assert rational_seconds(clips[0].get("duration")) == pytest.approx(manifest["groups"] / fps_of(manifest))


# Apple publishes the FCPXML DTD with Final Cut Pro and on its developer site; it is not ours to commit. Point
# COORD_FCPXML_DTD at a copy (FCPXMLv1_10.dtd) and the take's document is judged by it. Checked by hand on
# 2026-11-27 against the 1.10 DTD: the 30 fps and 29.97 (DF) takes' documents valid.
@pytest.mark.skipif(not os.environ.get("COORD_FCPXML_DTD"),
                    reason="COORD_FCPXML_DTD is not set (Apple's FCPXML DTD ships with Final Cut Pro)")
def test_fcpxml_is_valid_against_apples_dtd(take, manifest):
    from lxml import etree
    dtd = etree.DTD(open(os.environ["COORD_FCPXML_DTD"], "rb"))
    doc = etree.parse(str(take / f"{manifest['take_id']}.fcpxml"))
    fixed = dtd.elements()  # the DTD fixes its own version number; coord writes 1.9, judged by the newer one
    root = doc.getroot()
    for element in fixed:
        if element.name == "fcpxml":
            for attribute in element.attributes():
                if attribute.name == "version" and attribute.default_value:
                    root.set("version", attribute.default_value)
    assert dtd.validate(doc), [str(e) for e in dtd.error_log.filter_from_errors()][:10]


def test_fcp7_xml_has_a_track_per_camera_and_mic_every_clip_at_zero(take, manifest):
    root = ET.parse(take / f"{manifest['take_id']}.xml").getroot()
    assert root.tag == "xmeml"
    sequences = root.findall("sequence")
    assert len(sequences) == 1
    video = sequences[0].findall("media/video/track")
    audio = sequences[0].findall("media/audio/track")
    assert len(video) == len(manifest["cameras"]) and len(audio) == len(manifest["audio"])
    for track in video + audio:
        clip = track.find("clipitem")
        assert clip.findtext("start") == "0" and clip.findtext("in") == "0"
        assert int(clip.findtext("end")) == manifest["groups"]
        assert clip.findtext("file/timecode/string") == manifest["timecode"]
        assert Path(clip.findtext("file/pathurl")).parent == Path("deliver"), clip.findtext("file/pathurl")
    # Each camera's reel; its picture linked to its own node's microphone (its angle's sound).
    for track, cam in zip(video, manifest["cameras"]):
        clip = track.find("clipitem")
        assert clip.findtext("file/timecode/reel/name") == f"{manifest['take_id']}_{cam['node']}_{cam['camera']}"
        linked = {clip.findtext("name") for clip in root.iter("clipitem")
                  if clip.get("id") in {l.findtext("linkclipref") for l in track.find("clipitem").findall("link")}}
        assert linked >= {wav(take, manifest, a).stem for a in manifest["audio"] if a["node"] == cam["node"]}, linked


def media_references(document: Path) -> list[str]:
    """Every media reference of an FCPXML (`src`) or FCP 7 XML (`pathurl`) document."""
    root = ET.parse(document).getroot()
    return [e.get("src") for e in root.iter("media-rep")] + [e.text for e in root.iter("pathurl")]


def test_a_copied_take_relinks_verifies_and_delivering_it_again_changes_nothing(take, manifest, tmp_path):
    """A DIT copies the take to another disk (CONTRACT §15): every reference resolves inside the copy, a second
    deliver there adds nothing, and the ASC's tool verifies the copy."""
    copy = tmp_path / "shuttle" / take.name
    copy.parent.mkdir()
    subprocess.run(["cp", "-a", str(take), str(copy)], check=True, timeout=120)
    before = {p.relative_to(copy): p.read_bytes() for p in copy.rglob("*") if p.is_file() and p.suffix in (".fcpxml", ".xml", ".otio")}
    proc = deliver(copy)
    assert proc.returncode == 0, proc.stderr
    assert "made" not in proc.stdout and "up to date" in proc.stdout, proc.stdout
    assert {p.relative_to(copy): p.read_bytes() for p in copy.rglob("*") if p.is_file() and p.suffix in (".fcpxml", ".xml", ".otio")} == before
    for document in (copy / f"{manifest['take_id']}.fcpxml", copy / f"{manifest['take_id']}.xml"):
        refs = media_references(document)
        assert len(refs) == len(manifest["cameras"]) + len(manifest["audio"]), refs
        for ref in refs:
            assert "://" not in ref and not ref.startswith("/"), ref
            target = (document.parent / unquote(ref)).resolve()
            assert target.is_file() and copy.resolve() in target.parents, (document.name, ref)
    import opentimelineio as otio
    timeline = otio.adapters.read_from_file(str(copy / f"{manifest['take_id']}.otio"))
    for clip in timeline.find_clips():
        assert (copy / clip.media_reference.target_url).is_file(), clip.media_reference.target_url
    # OpenTimelineIO's FCP 7 adapter reads the xmeml aligned, every clip's media inside the copy; its FCPXML adapter
    # reads the .fcpxml (it has no multicam of its own to show).
    back = otio.adapters.read_from_file(str(copy / f"{manifest['take_id']}.xml"), adapter_name="fcp_xml")
    clips = list(back.find_clips())
    assert len(clips) == len(manifest["cameras"]) + len(manifest["audio"])
    for clip in clips:
        assert (copy / unquote(clip.media_reference.target_url)).is_file(), clip.media_reference.target_url
        assert clip.range_in_parent().start_time.to_frames() == 0 and clip.source_range.duration.to_frames() == manifest["groups"]
    otio.adapters.read_from_file(str(copy / f"{manifest['take_id']}.fcpxml"), adapter_name="fcpx_xml")
    for judge in (ASCMHL_VERIFY, ASCMHL_DIFF):
        proc = subprocess.run([*judge, str(copy)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ascmhl_verify_passes_and_fails_after_one_flipped_byte(take, manifest, tmp_path):
    # Collection's generation (the nodes' files, by the xxh128 each node computed), then deliver's (everything).
    chain = (take / "ascmhl" / "ascmhl_chain.xml").read_text()
    assert chain.count("<hashlist ") == 2
    collected = next((take / "ascmhl").glob("0001_*.mhl")).read_text()
    for f in manifest["cameras"][0]["files"]:
        assert f">{f['path']}</path>" in collected and f">{f['xxh128']}</xxh128>" in collected
    assert ">deliver/" not in collected and "<pattern>manifest.json</pattern>" in collected
    generation = next((take / "ascmhl").glob("0002_*.mhl")).read_text()
    for f in manifest["cameras"][0]["files"]:
        assert f">{f['path']}</path>" in generation
    assert ">deliver/" in generation and f">{manifest['take_id']}.fcpxml<" in generation
    assert ">manifest.json</path>" in generation
    for judge in (ASCMHL_VERIFY, ASCMHL_DIFF):
        proc = subprocess.run([*judge, str(take)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    bad = tmp_path / "bad"
    shutil.copytree(take, bad)
    victim = bad / manifest["cameras"][0]["files"][0]["path"]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x01
    victim.write_bytes(bytes(data))
    proc = subprocess.run([*ASCMHL_VERIFY, str(bad)], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "mismatch" in (proc.stdout + proc.stderr), proc.stdout + proc.stderr


def test_a_second_run_makes_nothing(take, manifest):
    before = {p: p.stat().st_mtime_ns for p in take.rglob("*") if p.is_file()}
    proc = deliver(take)
    assert proc.returncode == 0, proc.stderr
    assert "made" not in proc.stdout and "up to date" in proc.stdout, proc.stdout
    assert {p: p.stat().st_mtime_ns for p in take.rglob("*") if p.is_file()} == before


def test_the_otio_goes_through_both_official_adapters_aligned(take, manifest, tmp_path):
    import opentimelineio as otio
    timeline = otio.adapters.read_from_file(str(take / f"{manifest['take_id']}.otio"))
    # Once delivered, the .otio points at the deliverables, at the take's own rate.
    targets = [c.media_reference.target_url for c in timeline.find_clips()]
    assert targets == [f"deliver/{mov(take, manifest, c).name}" for c in manifest["cameras"]] \
        + [f"deliver/{wav(take, manifest, a).name}" for a in manifest["audio"]], targets
    assert {c.source_range.start_time.rate for c in timeline.find_clips()} == {fps_of(manifest)}
    start = frame_of_day(manifest["timecode"], fps_of(manifest))
    for adapter, ext in [("fcp_xml", "xml"), ("fcpx_xml", "fcpxml")]:
        out = tmp_path / f"take.{ext}"
        otio.adapters.write_to_file(timeline, str(out), adapter_name=adapter)
        if adapter == "fcpx_xml":  # the file is exact; the adapter's reader truncates (see test_editorial.py)
            starts = {Fraction(e.get("start").rstrip("s")) for e in ET.parse(out).iter() if e.tag in ("asset", "clip")}
            assert starts == {Fraction(start, fps_of(manifest))}, starts
        back = otio.adapters.read_from_file(str(out), adapter_name=adapter)
        clips = [c for t in back.tracks for c in t.find_clips()]
        assert len(clips) == len(manifest["cameras"]) + len(manifest["audio"]), adapter
        for c in clips:
            assert c.range_in_parent().start_time.to_frames() == 0, (adapter, c.name)
            assert 0 <= start - c.source_range.start_time.to_frames() <= (adapter == "fcpx_xml"), (adapter, c.name)
            assert c.source_range.duration.to_frames() == manifest["groups"], (adapter, c.name)


def test_bad_input_is_one_sentence_and_exit_2(take, tmp_path):
    for args in ([str(tmp_path)], [str(take), "--to", "mov,edl"], [str(take), "--video-codec", "vp9"]):
        proc = subprocess.run([COORD, "deliver", *args], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    partial = copy_take(take, tmp_path / "partial")
    m = json.loads((partial / "manifest.json").read_text())
    m["status"] = "partial"
    (partial / "manifest.json").write_text(json.dumps(m))
    proc = deliver(partial)
    assert proc.returncode == 2 and "not complete" in proc.stderr, proc.stderr
    # A tampered manifest: its names would become paths outside the take, its figures sizes that overflow.
    for field, value in (("node", "../../escape"), ("groups", 2**63 - 1)):
        hostile = copy_take(take, tmp_path / f"hostile-{field}")
        h = json.loads((hostile / "manifest.json").read_text())
        if field == "node":
            h["cameras"][0]["node"] = value
        else:
            h[field] = value
        (hostile / "manifest.json").write_text(json.dumps(h))
        proc = deliver(hostile)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "manifest.json" in proc.stderr, proc.stderr
        assert not (hostile / "deliver").exists() and not (tmp_path / "escape").exists()
    gone = copy_take(take, tmp_path / "gone")
    (gone / m["cameras"][0]["files"][0]["path"]).unlink()
    proc = deliver(gone)
    assert proc.returncode == 2 and "missing" in proc.stderr, proc.stderr


def test_h264_is_rewrapped_and_video_codec_h264_encodes(take, manifest, takes, tmp_path):
    h264, _ = takes["h264"]
    proc = deliver(h264, "--to", "mov")
    assert proc.returncode == 0, proc.stderr
    m = json.loads((h264 / "manifest.json").read_text())
    check_movs(h264, m, "h264")
    # Re-wrapped: the packets are the recorded ones, byte for byte.
    cam = m["cameras"][0]
    def packet_sizes(p: Path) -> list[str]:
        return subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "packet=size", "-of", "csv=p=0",
                               str(p)], capture_output=True, text=True, check=True).stdout.split()
    assert packet_sizes(mov(h264, m, cam)) == packet_sizes(h264 / cam["node"] / f"{cam['camera']}.mkv")
    light = copy_take(take, tmp_path / "light")
    proc = deliver(light, "--to", "mov", "--video-codec", "h264")
    assert proc.returncode == 0, proc.stderr
    check_movs(light, manifest, "h264")
    # Two takes' deliverables share no file name (CONTRACT §15), nor a reel.
    names = lambda t: {p.name for p in (t / "deliver").iterdir() if not p.name.startswith(".") and p.name != "deliver.json"}
    assert names(h264) and names(take) and not names(h264) & names(take), (names(h264), names(take))


def test_prores_hq_is_10_bit_and_copy_refuses_ffv1_in_one_sentence(takes):
    lossless, _ = takes["ffv1"]
    m = json.loads((lossless / "manifest.json").read_text())
    proc = deliver(lossless, "--to", "mov", "--video-codec", "copy")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "FFV1" in proc.stderr and "prores-hq" in proc.stderr and "h264" in proc.stderr, proc.stderr
    assert not list((lossless / "deliver").glob("*.mov")) if (lossless / "deliver").exists() else True
    proc = deliver(lossless, "--to", "mov", "--video-codec", "prores-hq")
    assert proc.returncode == 0, proc.stderr
    check_movs(lossless, m, "prores")
    video = next(s for s in probe(mov(lossless, m, m["cameras"][0]))["streams"] if s["codec_type"] == "video")
    assert (video["profile"], video["codec_tag_string"], video["pix_fmt"]) == ("HQ", "apch", "yuv422p10le"), video


def test_a_killed_deliver_leaves_no_half_written_file_under_its_final_name(take, manifest, tmp_path):
    fresh = copy_take(take, tmp_path / "killed")
    proc = subprocess.Popen([COORD, "deliver", str(fresh), "--to", "mov"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    parts: list[Path] = []
    deadline = time.monotonic() + 120
    while proc.poll() is None and not parts and time.monotonic() < deadline:
        parts = list((fresh / "deliver").glob(".*.part-*")) if (fresh / "deliver").is_dir() else []
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert parts, "coord deliver finished before a temporary file was seen"
    for cam in manifest["cameras"]:
        final = mov(fresh, manifest, cam)
        if final.exists():
            assert int(next(s for s in probe(final)["streams"] if s["codec_type"] == "video")["nb_read_packets"]) == manifest["groups"]
    # The next run cleans up and finishes the job.
    done = deliver(fresh, "--to", "mov")
    assert done.returncode == 0, done.stderr
    assert not list((fresh / "deliver").glob(".*.part-*"))
    check_movs(fresh, manifest, "prores")


def test_a_rig_files_take_deliver_runs_after_collection(tmp_path):
    from conftest import Node
    node = Node(tmp_path / "node", extra_args=["--name", "solo", "--synthetic", "cam0", "--synthetic-mic", "mic0"])
    try:
        bad = tmp_path / "bad.yaml"
        bad.write_text(f"version: 1\nnodes:\n  - name: solo\n    endpoint: {node.endpoint}\ntake:\n  deliver: [mov, edl]\n")
        out = subprocess.run([COORD, "start-take", "--rig", str(bad), "--seconds", "2"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and "take.deliver" in out.stderr and "edl" in out.stderr, out.stderr
        rig = tmp_path / "rig.yaml"
        # A frame-rate cap of 10 at 30 fps: cam0 records one group in 3, the two between filled (dup).
        rig.write_text(f"version: 1\nnodes:\n  - name: solo\n    endpoint: {node.endpoint}\n    cameras:\n      - name: cam0\n"
                       f"        max_fps: 10\ntake:\n  deliver: [fcpxml, fcp7xml, mhl]\n")
        takes = tmp_path / "takes"
        out = subprocess.run([COORD, "start-take", "--rig", str(rig), "--seconds", "2", "--size", "320x240",
                              "--takes-dir", str(takes)], capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stdout + out.stderr
    finally:
        node.terminate()
    take = next(d for d in takes.iterdir() if d.is_dir())
    manifest = json.loads((take / "manifest.json").read_text())
    assert (take / f"{manifest['take_id']}.xml").is_file()
    assert not (take / "deliver").exists(), "mov was not asked for"
    proc = subprocess.run([*ASCMHL_VERIFY, str(take)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # One marker per run of filled frames, at the run's first group, on the camera's angle in all three documents.
    rows = [line.split(",") for line in (take / "solo" / "cam0.frames.csv").read_text().splitlines()[1:]]
    runs = [int(r[1]) for i, r in enumerate(rows) if r[3] == "dup" and (i == 0 or rows[i - 1][3] != "dup")]
    assert len(runs) >= manifest["groups"] // 3 - 1, runs
    start = frame_of_day(manifest["timecode"], fps_of(manifest))
    fcpxml = ET.parse(take / f"{manifest['take_id']}.fcpxml").getroot()
    angle = fcpxml.find(".//mc-angle[@angleID='solo_cam0']/asset-clip")
    fills = [m for m in angle.findall("marker") if "filled" in m.get("value")]
    assert [round(rational_seconds(m.get("start")) * fps_of(manifest)) - start for m in fills] == runs
    xmeml = ET.parse(take / f"{manifest['take_id']}.xml").getroot()
    clip = xmeml.find(".//video/track/clipitem")
    assert [int(m.findtext("in")) for m in clip.findall("marker") if "filled" in m.findtext("name")] == runs
    import opentimelineio as otio
    timeline = otio.adapters.read_from_file(str(take / f"{manifest['take_id']}.otio"))
    [camera_clip] = timeline.video_tracks()[0].find_clips()
    assert [m.marked_range.start_time.to_frames() - start for m in camera_clip.markers if "filled" in m.name] == runs
    # The FCP 7 adapter reads the same markers back.
    back = otio.adapters.read_from_file(str(take / f"{manifest['take_id']}.xml"), adapter_name="fcp_xml")
    read = [c for c in back.find_clips() if c.name.endswith("_solo_cam0")]
    assert len(read) == 1 and len([m for m in read[0].markers if "filled" in m.name]) == len(runs), read
    # The .movs made after the seal: the .otio the history sealed is kept (said on stderr), the seal holds.
    otio_before = (take / f"{manifest['take_id']}.otio").read_bytes()
    proc = deliver(take, "--to", "mov,mhl")
    assert proc.returncode == 0 and "kept as the ASC MHL history seals it" in proc.stderr, proc.stderr
    assert (take / f"{manifest['take_id']}.otio").read_bytes() == otio_before
    proc = subprocess.run([*ASCMHL_VERIFY, str(take)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
