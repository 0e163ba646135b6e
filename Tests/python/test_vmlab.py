"""The VM tier (issue 26, CONTRACT §11): coord-node as the packaged systemd service in QEMU VMs running Debian 12's
kernel, recording vivid (a real kernel V4L2 driver) and snd-dummy (a real ALSA card), the host's coord recording.

One lab of two VMs is booted once a session (vmlab_fixtures.py: `scripts/vmlab take OUTDIR --vms 2 --keep`); the later
tests here and in test_vmlab_devices.py reuse it.
Needs root, qemu-system-x86_64 and the packages (scripts/package.sh "$COORD_TEST_CACHE/vmlab/debs", or
COORD_VMLAB_DEBS=DIR). The image is built once into $COORD_TEST_CACHE/vmlab (scripts/vmlab build, ~2 min).
Costs about 10-14 minutes with the image cached on the loaded machine (640-856 s measured), most of it installing
the packages in two TCG guests: each VM restores the state saved at its first boot (seconds) instead of booting
(1.5-4 minutes on the loaded machine).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from vmlab_lib import clocktruth  # noqa: E402
from vmlab_lib.lab import MIC_CARD, MIC_DEVICE  # noqa: E402
from vmlab_fixtures import REPO, SECONDS, camera, ffprobe_count, take, why_not  # noqa: E402

pytestmark = pytest.mark.skipif(why_not() is not None, reason=why_not() or "")


# --- the acceptance take ---------------------------------------------------------------------------------------

def test_take_from_two_vms_is_complete(first_take):
    result, out = first_take["result"], first_take["out"]
    assert result.returncode == 0, f"vmlab take exit {result.returncode}: {result.stderr[-3000:]}"
    take_dir = Path(result.stdout.strip().splitlines()[-1])
    assert take_dir.parent == out and take_dir.is_dir(), result.stdout
    manifest = json.loads((take_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete", manifest["events"]
    groups = manifest["groups"]
    assert groups > 0
    assert sorted(c["node"] for c in manifest["cameras"]) == ["vm1", "vm2"]
    for cam in manifest["cameras"]:
        mkv = take_dir / cam["node"] / f"{cam['camera']}.mkv"
        assert ffprobe_count(mkv, "v:0") == groups, f"{mkv}: not {groups} frames"
    # Sound from each VM's ALSA card (snd-dummy), not a synthetic microphone.
    assert sorted(a["node"] for a in manifest["audio"]) == ["vm1", "vm2"]
    for mic in manifest["audio"]:
        assert mic["frames"] > 0 and mic["sample_rate"] > 0
        assert ffprobe_count(take_dir / mic["path"], f"a:{mic['stream_index']}") > 0, mic["path"]


def test_vmlab_json_shows_systemd_type_notify_with_a_watchdog(first_take):
    report = json.loads((first_take["out"] / "vmlab.json").read_text())
    assert [vm["name"] for vm in report["vms"]] == ["vm1", "vm2"]
    for vm in report["vms"]:
        assert vm["kernel"].startswith("6.1.0-") and vm["kernel"].endswith("-amd64")
        assert vm["systemd"]["Type"] == "notify"
        assert vm["systemd"]["ActiveState"] == "active"
        assert vm["systemd"]["WatchdogUSec"] > 0
        assert vm["systemd"]["NRestarts"] == 0


def test_clock_truth_is_certain_to_under_a_millisecond_and_coord_s_clock_track_lies_within_its_bound(first_take):
    """The lab's clock truth (scripts/vmlab_lib/clocktruth.py: host ↔ guest stamps over the vmlab.clock port, a burst
    before and one after the take), independent of coord, and coord's own clock_track held against it."""
    report = json.loads((first_take["out"] / "vmlab.json").read_text())
    assert report["take"]["dir"], f"the acceptance take recorded nothing to hold the truth against: {report['take']}"
    entries = {e["vm"]: e for e in report["clock_truth"]}
    assert sorted(entries) == ["vm1", "vm2"], report["clock_truth"]
    for vm, e in entries.items():
        print(f"{vm}: clock truth {e}")
        assert e["exchanges"] == 2 * clocktruth.BURST, e
        assert 0 < e["min_rtt_us"] <= 2 * e["uncertainty_us"] < 2000, e  # ±half the chosen round trip, under 1 ms
        assert e["span_s"] > SECONDS, e  # one burst before the take, one after
        # The guests run on TSC (each boot's own calibration, about 12 ppm) or hpet (the host's rate): never far off.
        assert abs(e["rate_ppm"]) < 200, e
        # coord's mapping of the guest's clock (clock_track: node = rig + offset) agrees with the truth within the
        # bound coord states for it at each point, plus the truth's own uncertainty.
        assert e["clock_track"]["points"] > 0 and e["clock_track"]["within_bound"], e


def test_manifest_names_the_vivid_device(first_take):
    take_dir = Path(first_take["result"].stdout.strip().splitlines()[-1])
    manifest = json.loads((take_dir / "manifest.json").read_text())
    # vivid's VIDIOC_QUERYCAP, as the node read it in the VM; null fields are left out.
    # Beside it, the buffer stamp the node chose (issue 36): vivid is not uvcvideo, so its own stamp, nothing added.
    for cam in manifest["cameras"]:
        device = dict(cam["device"])
        assert device.pop("timestamp", None) == {"stamp": "driver", "marks": "endOfFrame", "late_us": 0, "uncertainty_us": 0}, cam
        assert device == {"driver": "vivid", "card": "vivid", "bus_info": "platform:vivid-000"}, cam
    # The ALSA card's name (snd_card_get_name), not the device string the node file gives (hw:Dummy,0,0).
    for mic in manifest["audio"]:
        assert mic["device"] == MIC_CARD, mic


def test_vivid_takes_an_interval_while_streaming_so_the_node_re_phases_it(first_take):
    """Issue 26 item 2: the node asks each streaming V4L2 camera for the interval it runs; vivid takes it (a UVC
    webcam answers EBUSY), so the arm's warning says the camera is re-phased onto the grid, not that it drifts.
    The phase it reaches is measured by bench/vmlab_steer.py (docs/vmlab.md, "Steering vivid")."""
    stderr = first_take["result"].stderr
    for vm in ("vm1", "vm2"):
        line = next((ln for ln in stderr.splitlines() if f"camera {vm}/cam0" in ln and "frame" in ln), "")
        assert "re-phases it onto the grid" in line, stderr[-3000:]
        assert "cannot steer" not in line, line


def test_journal_lines_carry_priorities(lab):
    vm = lab.vm("vm1")
    warnings = vm.sh("journalctl -u coord-node -p warning -o cat --no-pager")
    everything = vm.sh("journalctl -u coord-node -p debug -o cat --no-pager")
    # vivid has no exposure control: the node warns that it cannot lock it, at warning priority.
    assert "not locked" in warnings
    assert len(everything.splitlines()) > len(warnings.splitlines())


# --- vivid's error injection -----------------------------------------------------------------------------------

def test_injected_drops_are_filled_and_counted(lab, tmp_path):
    vm = lab.vm("vm2")
    baseline = camera(take(lab, tmp_path / "base", pressure_none=True)[2], "vm2")
    vm.sh("v4l2-ctl -d /dev/video0 -c percentage_of_dropped_buffers=70")
    try:
        code, _, manifest = take(lab, tmp_path / "drops", pressure_none=True)
    finally:
        vm.sh("v4l2-ctl -d /dev/video0 -c percentage_of_dropped_buffers=0")
    cam = camera(manifest, "vm2")
    groups = manifest["groups"]
    # 70 % of vivid's buffers never reach the node: at least ~60 % of the groups must be filled and counted.
    assert cam["dropped"] >= 0.6 * groups, (cam, baseline)
    assert cam["dropped"] > baseline["dropped"], (cam, baseline)
    assert any(e["kind"] == "dup" and e["node"] == "vm2" for e in manifest["events"])


# --- systemd -----------------------------------------------------------------------------------------------------



def test_sigstop_is_restarted_by_the_watchdog(lab):
    vm = lab.vm("vm1")
    before = lab.systemd(vm)
    elapsed = lab.watchdog_restart(vm)
    after = lab.systemd(vm)
    assert after["NRestarts"] == before["NRestarts"] + 1
    assert after["MainPID"] != before["MainPID"] and after["ActiveState"] == "active"
    watchdog_s, restart_s = before["WatchdogUSec"] / 1e6, before["RestartUSec"] / 1e6
    # The node pings every half watchdog, so SIGSTOP lands between 0 and watchdog/2 after the last ping:
    # systemd kills it watchdog/2 to watchdog later (10 s unit), restarts it after RestartSec (2 s), READY=1 again.
    assert watchdog_s / 2 + restart_s <= elapsed < watchdog_s + restart_s + 90, elapsed
    journal = vm.sh("journalctl -u coord-node -o cat --no-pager | grep -i watchdog || true")
    assert "watchdog" in journal.lower()
    print(f"watchdog restart: {elapsed:.1f} s")


def newer_package(deb: Path, out: Path) -> Path:
    tree = out / "tree"
    subprocess.run(["dpkg-deb", "-R", str(deb), str(tree)], check=True)
    control = tree / "DEBIAN/control"
    text = control.read_text()
    version = re.search(r"^Version: (.+)$", text, re.M).group(1)
    control.write_text(text.replace(f"Version: {version}", f"Version: {version}.1"))
    newer = out / f"coord-node_{version}.1_amd64.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(tree), str(newer)], check=True, capture_output=True)
    return newer


def test_upgrade_leaves_a_running_node_alone(lab):
    vm = lab.vm("vm2")
    upgrade = lab.dir / "share/upgrade"
    upgrade.mkdir(exist_ok=True)
    deb = sorted((lab.dir / "share/debs").glob("coord-node_*.deb"))[-1]
    newer = newer_package(deb, upgrade)
    before = lab.systemd(vm)
    out = vm.sh(f"dpkg -i /mnt/host/upgrade/{newer.name} 2>&1", timeout=300)
    after = lab.systemd(vm)
    assert after["MainPID"] == before["MainPID"] and after["ActiveState"] == "active", out
    assert "keeps the previous version" in out
    installed = vm.sh("dpkg-query -W -f '${Version}' coord-node")
    assert installed.endswith(".1")


# --- a camera unplugged mid-take ----------------------------------------------------------------------------------

# The plug is pulled in the guest, by a watcher started before the take, once the host's coord reports that every
# camera has written a few frames: the host drops a file into the lab's share (the guest's /mnt/host, 9p, uncached)
# and the watcher presses vivid's Disconnect button. Pulled through the agent after polling the unit's status, the
# plug came out after the 8 s take had ended on the loaded machine (the test's old flake); a watcher that waited
# for the camera's files saw them only seconds late (the .mkv's first cluster, frames.csv's 2 s lag).
UNPLUG = """systemd-run --unit=vmlab-unplug --collect python3 -c '
import os, subprocess, time
deadline = time.monotonic() + 300
while not os.path.exists("/mnt/host/unplug-vm1") and time.monotonic() < deadline:
    time.sleep(0.02)  # a poll of the share: the host has no way to wake the guest
if time.monotonic() < deadline:
    subprocess.run(["v4l2-ctl", "-d", "/dev/video0", "-c", "disconnect=1"], check=True)
'"""
PROGRESS = re.compile(r"frames (\d+)\D(\d+) of (\d+) per camera")


def test_disconnect_mid_take_ends_that_camera_while_the_other_vm_records_on(lab, tmp_path):
    out = tmp_path / "unplug"
    out.mkdir()
    vm = lab.vm("vm1")
    plug = lab.dir / "share/unplug-vm1"
    plug.unlink(missing_ok=True)
    before = vm.sh("dmesg | grep -c 'vivid-000: disconnect' || true").strip()
    vm.sh(UNPLUG)
    lab.write_rig(takes_dir=out, audio="optional")
    coord = subprocess.Popen([str(lab.coord), "start-take", "--rig", str(lab.dir / "rig.yaml"), "--seconds", "8",
                              "--takes-dir", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    try:
        for line in coord.stderr:  # coord's progress: "recording 1.7 / 8.0 s  frames 12–36 of 240 per camera …"
            lines.append(line)
            seen = PROGRESS.search(line)
            if seen and not plug.exists() and int(seen.group(1)) >= 5:
                plug.touch()
        coord.wait(timeout=600)
    finally:
        if coord.poll() is None:
            coord.kill()
        plug.unlink(missing_ok=True)
        vm.sh("systemctl stop vmlab-unplug 2>/dev/null || true")
    stderr = "".join(lines)
    after = vm.sh("dmesg | grep -c 'vivid-000: disconnect' || true").strip()
    assert int(after) == int(before) + 1, f"the Disconnect button was not pressed once: {stderr[-1500:]}"
    take_dir = next(p for p in out.iterdir() if p.is_dir())
    manifest = json.loads((take_dir / "manifest.json").read_text())
    assert coord.returncode == 4 and manifest["status"] == "partial", (coord.returncode, stderr[-2000:])
    ended = [e for e in manifest["events"] if e["node"] == "vm1" and e["camera"] == "cam0" and e["kind"] == "camera-ended"]
    assert ended and "unplugged" in ended[0]["detail"], manifest["events"]
    # The camera's file ends where the device went away; the other VM records every group.
    assert 5 <= camera(manifest, "vm1")["frames"] < manifest["groups"], camera(manifest, "vm1")
    assert ffprobe_count(take_dir / "vm2/cam0.mkv", "v:0") == manifest["groups"], camera(manifest, "vm2")
    # vivid reconnects once its last user closes the device: the node let go of it.
    assert "vivid" in vm.sh("v4l2-ctl -d /dev/video0 --info")


# --- a real card's click train, and a kernel clock whose rate is known (issue 26 items 3 and 5) -----------------------

CLOCK_PPM = 40.0  # vm2's CLOCK_MONOTONIC is set this much fast with adjtimex: a truth coord does not see
# On the hpet clock source a guest's CLOCK_MONOTONIC counts the host's own (QEMU's emulated HPET runs on it), within
# the 0.2-0.5 ppm of the kernel's rounding (issue 26's measurement); tsc would add each boot's calibration error.
HPET_PPM = 0.5


@pytest.fixture(scope="module")
def clicks_take(lab, tmp_path_factory):
    """One take: vm1 records SYNCCLICK v1 played into snd-aloop's Loopback,0 (on whole seconds of vm1's own clock)
    from Loopback,1 through ALSA; both guests on the hpet clock source, vm2's kernel clock set CLOCK_PPM fast."""
    vm1, vm2 = lab.vm("vm1"), lab.vm("vm2")
    out = tmp_path_factory.mktemp("clicks")
    try:
        sources = [lab.clocksource(vm, "hpet") for vm in (vm1, vm2)]
        rates = lab.set_clock_rate(vm1, 0.0), lab.set_clock_rate(vm2, CLOCK_PPM)
        assert sources == ["hpet", "hpet"] and rates == (0.0, CLOCK_PPM), (sources, rates)
        lab.use_microphone(vm1, "hw:Loopback,1,0")
        # Started last: the node's restart and a clock source switch move the card's play position under it.
        lab.play_clicks(vm1)
        before = lab.clicks_report(vm1)  # the player's own timing, settled before the take
        bursts = clocktruth.bursts(lab.vms)  # the lab's clock truth around the takes: the rates it measures
        for attempt in range(2):
            code, take_dir, manifest = take(lab, out / str(attempt), seconds=SECONDS)
            eio = [e["detail"] for e in manifest["events"]
                   if e["kind"] == "microphone-ended" and "Input/output" in e["detail"]]
            if not eio:
                break
            print(f"snd-aloop's capture ended with EIO (take {attempt + 1}): {eio[0]}")
        after = lab.clicks_report(vm1)
        truths = clocktruth.truths(bursts, clocktruth.bursts(lab.vms))
    finally:
        lab.set_clock_rate(vm2, 0.0)
        for vm in (vm1, vm2):
            lab.clocksource(vm, "tsc")
        lab.use_microphone(vm1, MIC_DEVICE)
        lab.stop_clicks(vm1)
    yield {"code": code, "dir": take_dir, "manifest": manifest, "player": before, "after": after, "eio": eio,
           "truths": truths}


def test_alsa_records_a_click_train_through_a_real_card(clicks_take):
    manifest, take_dir = clicks_take["manifest"], clicks_take["dir"]
    if clicks_take["eio"]:
        # Seen in about one take of four on the loaded machine, with and without a player: the capture side of
        # snd-aloop fails its read with EIO and the node ends the microphone (docs/vmlab.md). Twice in a row here.
        pytest.xfail(f"snd-aloop's capture ended with EIO in two takes: {clicks_take['eio'][0]}")
    assert clicks_take["code"] == 0 and manifest["status"] == "complete", manifest["events"]
    mic = next(a for a in manifest["audio"] if a["node"] == "vm1")
    # The player's underruns (before group 0 on the loaded machine, when the node opens the card) restart its train;
    # the clicks in the file below are the judge of the take's part.
    check = subprocess.run([sys.executable, str(REPO / "scripts/check-audio.py"), str(take_dir), "--node-clock",
                            "--json", "--max-offset-us", "5000"], capture_output=True, text=True, timeout=120)
    vm1 = next(r for r in json.loads(check.stdout)["mics"] if r["node"] == "vm1")
    print(f"ALSA hw:Loopback,1,0 in vm1: {vm1}; the player before the take {clicks_take['player']}, "
          f"after {clicks_take['after']}")
    # A click every second of the take, each within 5 ms of its whole second on vm1's clock (seen: under 1 ms).
    assert vm1["clicks"] >= SECONDS - 1, vm1
    assert not vm1["problems"], vm1
    if "device" in mic:  # packages older than the manifest's `device` leave it out
        assert mic["device"] == "Loopback", mic


def test_coord_reports_a_kernel_clock_rate_within_its_own_bound(clicks_take):
    manifest = clicks_take["manifest"]
    clocks = {c["node"]: c["clock"] for c in manifest["cameras"]}
    truth = {"vm1": 0.0, "vm2": CLOCK_PPM}
    print({vm: (clocks[vm]["drift_ppm"], truth[vm], clocks[vm]["uncertainty_us"], clocks[vm]["bound_us"])
           for vm in truth})
    for vm, ppm in truth.items():
        track = [p["t_us"] for p in manifest["clock_track"] if p["node"] == vm]
        span_s = max(max(track) - min(track), manifest["groups"] * manifest["frame_period_us"]) / 1e6
        # The drift coord reports may be off (the emulated CPU's load skews the probes), but never by more than
        # the error it admits: over the take, the wrong rate must stay inside the stated bound.
        error_us = max(0.0, abs(clocks[vm]["drift_ppm"] - ppm) - HPET_PPM) * span_s
        assert error_us <= clocks[vm]["bound_us"], (vm, clocks[vm], ppm, span_s)
        # The lab's clock truth finds the rate the lab set, to within its two bursts' uncertainties over their span.
        t = clicks_take["truths"][vm]
        span_truth_s = (t.after.at_us - t.before.at_us) / 1e6
        print(f"{vm}: set {ppm} ppm, the clock truth {t.rate_ppm:+.2f} ppm over {span_truth_s:.1f} s, coord "
              f"{clocks[vm]['drift_ppm']:+.2f}")
        assert abs(t.rate_ppm - ppm) <= HPET_PPM + 2 * t.uncertainty_us / span_truth_s, (vm, t.entry(), ppm)
