"""Sound with every camera (CONTRACT §9): real coord-node processes record SYNCCLICK v1 microphones, the files are
read back with ffprobe/ffmpeg, and scripts/check-audio.py (which does not use coord's code) decodes the clicks to
find the real A/V offset and compares the reported rate error with the one the simulation injected."""
from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

from conftest import Node
from test_demo import COORD, check_take, only_take, run_demo

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("check_audio", ROOT / "scripts/check-audio.py")
check_audio = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_audio)


def checked(take: Path, truth: Path | None = None) -> dict:
    argv = ["python3", str(ROOT / "scripts/check-audio.py"), str(take), "--json"]
    if truth is not None:
        argv += ["--truth", str(truth)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert out.stdout, out.stderr
    return json.loads(out.stdout)


def test_every_demo_node_records_sound_on_the_rig_timebase(tmp_path):
    truth = tmp_path / "truth.json"
    proc, takes = run_demo(tmp_path, "--nodes", "3", "--seconds", "8", "--seed", "11", "--drift-ppm", "100",
                           "--truth-file", str(truth))
    assert proc.returncode == 0, proc.stderr
    take = only_take(takes)
    failures, _ = check_take.check(take)
    assert failures == [], failures
    manifest = json.loads((take / "manifest.json").read_text())
    report = json.loads((take / "sync-report.json").read_text())
    audio = manifest["audio"]
    assert sorted(a["node"] for a in audio) == ["node-1", "node-2", "node-3"]
    for a in audio:
        assert a["path"] == f"{a['node']}/mic0.mka" and a["stream_index"] == 0
        assert a["device"] == "synthetic"  # CONTRACT §11
        assert a["sample_rate"] == 48000 and a["channels"] == 1
        assert a["start_us"] == manifest["t0_us"], "the sound must start on group 0's instant"
        assert set(a["av_offset_us"]) == {"p50", "p99"} and len(a["sha256"]) == 64
        # ffprobe finds exactly one audio stream, and the sound lasts as long as the pictures within a 10 ms buffer.
        info = check_audio.probe(take / a["path"])
        assert [s["codec_type"] for s in info["streams"]] == ["audio"]
        video_s = manifest["groups"] * manifest["frame_period_us"] / 1e6
        assert abs(float(info["format"]["duration"]) - video_s) <= 0.010 + 0.001, info["format"]
    assert {(r["node"], r["mic"]) for r in report["audio"]} == {(a["node"], a["mic"]) for a in audio}
    # The report page plots each microphone's A/V offset and lists its rate error.
    page = (take / "sync-report.html").read_text()
    assert "<h2>Sound</h2>" in page and 'class="sound"' in page
    for a in audio:
        assert f"{a['node']}/{a['mic']}" in page and f"{a['rate_error_ppm']:+.1f} ppm" in page
    # The editorial timeline gets one audio track per microphone, as long as the pictures (opentimelineio reads it).
    import opentimelineio as otio
    timeline = otio.adapters.read_from_file(str(take / f"{manifest['take_id']}.otio"))
    sound = [t for t in timeline.tracks if t.kind == otio.schema.TrackKind.Audio]
    pictures = [t for t in timeline.tracks if t.kind == otio.schema.TrackKind.Video]
    assert sorted(t.name for t in sound) == ["node-1/mic0", "node-2/mic0", "node-3/mic0"]
    for t in sound:
        clip = t[0]
        assert clip.media_reference.target_url == t.name + ".mka"
        assert abs(clip.source_range.duration.to_seconds() - pictures[0][0].source_range.duration.to_seconds()) < 1e-3
        assert abs(clip.source_range.start_time.to_seconds() - pictures[0][0].source_range.start_time.to_seconds()) < 1e-3
    result = checked(take, truth)
    assert result["passed"], result
    for mic in result["mics"]:
        assert mic["clicks"] >= 7, mic
        assert mic["offset_us"]["p99"] <= 1000, mic
        assert mic["rate_error_diff_ppm"] <= 5, mic
    # The drawn rate errors really differ from zero: the check above is not trivially met.
    assert max(abs(m["true_rate_error_ppm"]) for m in result["mics"]) > 20


def test_no_audio_records_pictures_only(tmp_path):
    proc, takes = run_demo(tmp_path, "--nodes", "2", "--seconds", "3", "--seed", "3", "--no-audio")
    assert proc.returncode == 0, proc.stderr
    take = only_take(takes)
    manifest = json.loads((take / "manifest.json").read_text())
    assert "audio" not in manifest
    assert not list(take.rglob("*.mka"))


def record_with_a_microphone_that_ends(tmp_path, ends_after_ms: int, seconds: int):
    """A take on two nodes, each a camera and a microphone; node "lost"'s microphone ends `ends_after_ms` after
    the node opens it. Returns the take directory and the lost node (terminated)."""
    lost = Node(tmp_path / "lost", extra_args=["--name", "lost", "--synthetic", "cam0", "--synthetic-mic", "mic0",
                                               "--synthetic-mic-ends-after-ms", str(ends_after_ms)])
    kept = Node(tmp_path / "kept", extra_args=["--name", "kept", "--synthetic", "cam0", "--synthetic-mic", "mic0"])
    try:
        rig = tmp_path / "rig.yaml"
        rig.write_text(f"version: 1\nnodes:\n  - name: lost\n    endpoint: {lost.endpoint}\n"
                       f"  - name: kept\n    endpoint: {kept.endpoint}\n")
        takes = tmp_path / "takes"
        out = subprocess.run([str(COORD), "start-take", "--rig", str(rig), "--seconds", str(seconds), "--size",
                              "320x240", "--takes-dir", str(takes)], capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stdout + out.stderr
    finally:
        lost.terminate()
        kept.terminate()
    return only_take(takes), lost


def test_a_microphone_removed_mid_take_ends_cleanly_and_the_cameras_go_on(tmp_path):
    # The microphone ends 9 s after the node opened it at configure, which now runs while the clocks are
    # aligned: several seconds before group 0 on a loaded machine, so the take runs long enough to see it end.
    take, _ = record_with_a_microphone_that_ends(tmp_path, 9000, seconds=10)
    manifest = json.loads((take / "manifest.json").read_text())
    assert manifest["status"] == "complete", "sound alone never fails a take"
    assert all(c["frames"] == manifest["groups"] for c in manifest["cameras"])
    ended = [e for e in manifest["events"] if e["kind"] == "microphone-ended"]
    assert len(ended) == 1 and ended[0]["node"] == "lost" and "mic0" in ended[0]["detail"], manifest["events"]
    audio = {a["node"]: a for a in manifest["audio"]}
    video_s = manifest["groups"] * manifest["frame_period_us"] / 1e6
    # The lost microphone's file ends early but is whole: ffprobe reads it, and it holds what the manifest says.
    lost_info = check_audio.probe(take / audio["lost"]["path"])
    lost_s = float(lost_info["format"]["duration"])
    assert 0.5 < lost_s < video_s - 1, lost_s
    assert len(check_audio.decode(take / audio["lost"]["path"], 48000)) == audio["lost"]["frames"]
    assert audio["lost"].get("ended"), audio["lost"]
    assert abs(float(check_audio.probe(take / audio["kept"]["path"])["format"]["duration"]) - video_s) <= 0.011


def test_a_microphone_lost_before_group_0_leaves_no_file_and_the_manifest_says_so(tmp_path):
    from test_deliver import ASCMHL_VERIFY, deliver
    # The microphone ends 0.1 s after the node starts it at arm, long before group 0 (the lead alone is 2 s).
    take, lost = record_with_a_microphone_that_ends(tmp_path, 100, seconds=2)
    manifest = json.loads((take / "manifest.json").read_text())
    assert manifest["status"] == "complete", "sound alone never fails a take"
    # No file for it, on the node or in the take, and none listed: every sound file the manifest lists ffprobe reads.
    assert not (take / "lost" / "mic0.mka").exists() and not list(lost.staging.rglob("*.mka"))
    assert [a["node"] for a in manifest["audio"]] == ["kept"]
    assert float(check_audio.probe(take / manifest["audio"][0]["path"])["format"]["duration"]) > 1
    assert [(m["node"], m["mic"]) for m in manifest["audio_lost"]] == [("lost", "mic0")], manifest.get("audio_lost")
    assert "simulated unplug" in manifest["audio_lost"][0]["ended"]
    ended = [e for e in manifest["events"] if e["kind"] == "microphone-ended"]
    assert len(ended) == 1 and "ended before group 0" in ended[0]["detail"] and "no file" in ended[0]["detail"], ended
    assert "no sound: ended before group 0" in (take / "sync-report.html").read_text()
    failures, _ = check_take.check(take)
    assert failures == [], failures
    # Deliver: a WAV for the kept microphone only, one sentence for the lost one; the MHL verifies.
    proc = deliver(take, "--to", "mov,fcpxml,fcp7xml,mhl")
    assert proc.returncode == 0, proc.stderr
    assert "microphone lost/mic0 recorded no sound" in proc.stderr, proc.stderr
    # Named with the take (CONTRACT §15).
    assert sorted(p.name for p in (take / "deliver").glob("*.wav")) == [f"{manifest['take_id']}_kept_mic0.wav"]
    assert "lost_mic0" not in (take / f"{manifest['take_id']}.fcpxml").read_text()
    verify = subprocess.run([*ASCMHL_VERIFY, str(take)], capture_output=True, text=True, timeout=120)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_required_sound_refuses_a_node_without_a_microphone_and_makes_a_lost_one_a_gap(tmp_path):
    silent = Node(tmp_path / "silent", extra_args=["--name", "silent", "--synthetic", "cam0"])
    lost = Node(tmp_path / "lost", extra_args=["--name", "lost", "--synthetic", "cam0", "--synthetic-mic", "mic0",
                                               "--synthetic-mic-ends-after-ms", "3500"])
    try:
        takes = tmp_path / "takes"
        refused_rig = tmp_path / "refused.yaml"
        refused_rig.write_text(f"version: 1\nnodes:\n  - name: silent\n    endpoint: {silent.endpoint}\n"
                               f"  - name: lost\n    endpoint: {lost.endpoint}\ntake:\n  audio: required\n")
        out = subprocess.run([str(COORD), "start-take", "--rig", str(refused_rig), "--seconds", "3", "--size", "320x240",
                              "--takes-dir", str(takes)], capture_output=True, text=True, timeout=120)
        assert out.returncode == 2, out.stdout + out.stderr
        assert "node silent has no microphone" in out.stderr and "take.audio" in out.stderr, out.stderr
        assert not takes.exists() or not any(takes.iterdir()), "a refused take leaves no directory"

        rig = tmp_path / "rig.yaml"
        rig.write_text(f"version: 1\nnodes:\n  - name: lost\n    endpoint: {lost.endpoint}\ntake:\n  audio: required\n")
        out = subprocess.run([str(COORD), "start-take", "--rig", str(rig), "--seconds", "6", "--size", "320x240",
                              "--takes-dir", str(takes)], capture_output=True, text=True, timeout=180)
        assert out.returncode != 0, "a required microphone that ended makes the take partial"
    finally:
        silent.terminate()
        lost.terminate()
    manifest = json.loads((only_take(takes) / "manifest.json").read_text())
    assert manifest["status"] == "partial" and manifest["audio_required"] is True
    assert any(e["kind"] == "incomplete" and "lost/mic0" in e["detail"] for e in manifest["events"]), manifest["events"]
    assert all(c["frames"] == manifest["groups"] for c in manifest["cameras"]), "the pictures are whole"
