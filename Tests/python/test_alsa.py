"""ALSA capture tried for real (issue 16): a PulseAudio server with a null sink, its monitor read by coord-node
through ALSA's pulse plugin (`--audio mic0=pulse`), while `paplay` plays a known click train (a 1 ms 4 kHz burst
every second) into the sink. The take's `.mka` is read back with ffprobe/ffmpeg and the clicks decoded without
coord's code. There is no sound card here; PulseAudio is the real userspace sound server the issue names.

What can be checked: the sound arrives through ALSA, lands on the rig timebase from group 0 to the stop instant
(duration = the pictures' to the sample), every click is there one second apart; a device that cannot be opened
is left out with one sentence and the take goes on. What cannot: the click train's absolute time (paplay's start is
not on CLOCK_MONOTONIC's whole seconds), and PulseAudio's delivery timing wanders by milliseconds (its scheduling,
measured here: the ALSA plugin's stamps drift up to ~10 ms and snap back), which the node reports as it sees it.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import struct
import subprocess
import time
import wave
from pathlib import Path

import pytest

from conftest import Node
from test_audio import check_audio
from test_demo import COORD, only_take

for _tool in ("pulseaudio", "paplay", "pactl"):
    if shutil.which(_tool) is None:
        pytest.skip(f"`{_tool}` is not installed (scripts/setup.sh installs it)", allow_module_level=True)
if not any(Path(p).exists() for p in ("/usr/lib/x86_64-linux-gnu/alsa-lib/libasound_module_pcm_pulse.so",
                                      "/usr/lib/aarch64-linux-gnu/alsa-lib/libasound_module_pcm_pulse.so")):
    pytest.skip("ALSA's pulse plugin (libasound2-plugins) is not installed", allow_module_level=True)


@pytest.fixture
def pulse(tmp_path):
    """A private PulseAudio server: a null sink `coordtest` whose monitor is the default source."""
    run = tmp_path / "pulse"
    run.mkdir()
    env = dict(os.environ, XDG_RUNTIME_DIR=str(run), HOME=str(run), PULSE_SERVER=f"unix:{run}/pulse.sock")
    server = subprocess.Popen(["pulseaudio", "-n", "--daemonize=no", "--exit-idle-time=-1", "--use-pid-file=no",
                               "-L", f"module-native-protocol-unix socket={run}/pulse.sock auth-anonymous=1",
                               "-L", "module-null-sink sink_name=coordtest rate=48000"],
                              env=env, stdout=subprocess.DEVNULL, stderr=open(run / "pulse.log", "w"))
    deadline = time.monotonic() + 10
    while subprocess.run(["pactl", "info"], env=env, capture_output=True).returncode != 0:
        assert time.monotonic() < deadline and server.poll() is None, (run / "pulse.log").read_text()
        time.sleep(0.1)
    subprocess.run(["pactl", "set-default-source", "coordtest.monitor"], env=env, check=True)
    yield env
    server.terminate()
    server.wait(timeout=10)


def click_train(path: Path, seconds: int, rate: int = 48000):
    """A 1 ms 4 kHz burst at −6 dBFS at the start of every second."""
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        frames = bytearray()
        for i in range(seconds * rate):
            s = (i % rate) / rate
            v = 0.501 * 32767 * math.sin(2 * math.pi * 4000 * s) if s < 0.001 else 0.0
            frames += struct.pack("<h", int(round(v)))
        w.writeframes(bytes(frames))


def test_alsa_capture_through_pulseaudio_records_the_click_train_on_the_rig_timebase(tmp_path, pulse, monkeypatch):
    for key in ("XDG_RUNTIME_DIR", "HOME", "PULSE_SERVER"):
        monkeypatch.setenv(key, pulse[key])  # the node inherits them: its ALSA pulse plugin finds the server
    clicks = tmp_path / "clicks.wav"
    click_train(clicks, 16)
    node = Node(tmp_path / "node", extra_args=["--name", "box", "--synthetic", "cam0", "--audio", "mic0=pulse",
                                               "--audio", "gone=hw:9,0"])
    player = None
    try:
        rig = tmp_path / "rig.yaml"
        rig.write_text(f"version: 1\nnodes:\n  - name: box\n    endpoint: {node.endpoint}\n")
        player = subprocess.Popen(["paplay", "--device=coordtest", str(clicks)], env=pulse)
        # The take starts once the sink plays (PulseAudio moves its monitor's timing when a stream starts).
        deadline = time.monotonic() + 10
        while "RUNNING" not in subprocess.run(["pactl", "list", "short", "sinks"], env=pulse, capture_output=True,
                                              text=True).stdout:
            assert time.monotonic() < deadline, "the null sink never started playing"
            time.sleep(0.05)
        takes = tmp_path / "takes"
        out = subprocess.run([str(COORD), "start-take", "--rig", str(rig), "--seconds", "8", "--size", "320x240",
                              "--takes-dir", str(takes)], capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stdout + out.stderr
    finally:
        if player is not None:
            player.terminate()
        node.terminate()
    take = only_take(takes)
    manifest = json.loads((take / "manifest.json").read_text())
    assert manifest["status"] == "complete", "a microphone that cannot open never fails the take"
    gone = [e for e in manifest["events"] if e["kind"] == "microphone-ended" and "hw:9,0" in e["detail"]]
    assert len(gone) == 1 and "gone" in gone[0]["detail"], manifest["events"]
    (mic,) = [a for a in manifest["audio"] if a["mic"] == "mic0"]
    assert mic["start_us"] == manifest["t0_us"] and len(mic["sha256"]) == 64
    info = check_audio.probe(take / mic["path"])
    assert [s["codec_type"] for s in info["streams"]] == ["audio"]
    video_s = manifest["groups"] * manifest["frame_period_us"] / 1e6
    assert abs(float(info["format"]["duration"]) - video_s) <= 0.011
    samples = check_audio.decode(take / mic["path"], 48000)
    assert len(samples) == mic["frames"]
    onsets = check_audio.clicks(samples, 48000)
    assert len(onsets) >= 7, f"{len(onsets)} clicks in {video_s:.1f} s of sound played through PulseAudio"
    spacing_us = [(b - a) / 48000 * 1e6 - 1e6 for a, b in zip(onsets, onsets[1:])]
    # PulseAudio's delivery wanders by milliseconds; what the node wrote must still be one click a second.
    assert max(abs(x) for x in spacing_us) < 15_000, spacing_us
    assert math.isfinite(mic["rate_error_ppm"]) and math.isfinite(mic["av_offset_us"]["p99"])
    print(f"ALSA through PulseAudio: click spacing − 1 s (µs) {[round(x) for x in spacing_us]}; node reports rate "
          f"error {mic['rate_error_ppm']} ppm, A/V offset p50/p99 {mic['av_offset_us']} µs")
