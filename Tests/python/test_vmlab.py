"""The VM tier (issue 26, CONTRACT §11): coord-node as the packaged systemd service in QEMU VMs running Debian 12's
kernel, recording vivid (a real kernel V4L2 driver) and snd-dummy (a real ALSA card), the host's coord recording.

One lab of two VMs is booted for the module (`scripts/vmlab take OUTDIR --vms 2 --keep`); the later tests reuse it.
Needs root, qemu-system-x86_64 and the packages (scripts/package.sh "$COORD_TEST_CACHE/vmlab/debs", or
COORD_VMLAB_DEBS=DIR). The image is built once into $COORD_TEST_CACHE/vmlab (scripts/vmlab build, ~2 min).
Costs about 10-14 minutes with the image cached on the loaded machine (640-856 s measured), most of it installing
the packages in two TCG guests: each VM restores the state saved at its first boot (seconds) instead of booting
(1.5-4 minutes on the loaded machine).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
from vmlab_lib import image  # noqa: E402
from vmlab_lib import truth  # noqa: E402
from vmlab_lib import clocktruth  # noqa: E402
from vmlab_lib.lab import MIC_CARD, MIC_DEVICE, Lab  # noqa: E402

VMLAB = REPO / "scripts/vmlab"
DEBS = Path(os.environ.get("COORD_VMLAB_DEBS") or os.environ.get("COORD_PACKAGES_DIR") or image.LAB / "debs")
SECONDS = 6


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "needs root: the lab's image is built with chroot and mount"
    for tool in ("qemu-system-x86_64", "qemu-img", "ffprobe"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install qemu-system-x86 qemu-utils ffmpeg)"
    if not image.Artefacts().ready():
        if shutil.which("apt-get") is None or shutil.which("mkfs.ext4") is None:
            return "the lab's image is not cached and cannot be built here (needs apt-get, e2fsprogs, cpio)"
        if not image.ROOT_TAR.exists() and shutil.which("debootstrap") is None:
            return f"{image.ROOT_TAR} is not cached and debootstrap is not installed"
    return None


def packages() -> Path:
    """The .debs the VMs install: made once per test run by test_packages.py into COORD_PACKAGES_DIR (scripts/test.sh
    points both there), else made here."""
    if not list(DEBS.glob("coord-node_*.deb")) or not list(DEBS.glob("coord_*.deb")):
        DEBS.mkdir(parents=True, exist_ok=True)
        subprocess.run([str(REPO / "scripts/package.sh"), str(DEBS)], check=True, timeout=3600)
    return DEBS


pytestmark = pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")


def ffprobe_count(path: Path, stream: str) -> int:
    out = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-select_streams", stream,
                          "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", str(path)],
                         capture_output=True, text=True, timeout=120, check=True).stdout.strip()
    return int(out.split(",")[0]) if out and out.split(",")[0].isdigit() else 0


@pytest.fixture(scope="module")
def first_take(tmp_path_factory):
    """`scripts/vmlab take OUTDIR --vms 2 --keep`: the acceptance take, leaving the lab up for the other tests."""
    debs = packages()
    out = tmp_path_factory.mktemp("vmlab")
    started = time.monotonic()
    result = subprocess.run([str(VMLAB), "take", str(out), "--vms", "2", "--seconds", str(SECONDS), "--keep",
                             "--debs", str(debs)], capture_output=True, text=True, timeout=1500)
    lab = Lab.load(out / ".vmlab") if (out / ".vmlab/lab.json").exists() else None
    yield {"out": out, "result": result, "lab": lab, "seconds": time.monotonic() - started}
    if lab is not None:
        lab.down()


@pytest.fixture(scope="module")
def lab(first_take):
    if first_take["lab"] is None:
        pytest.fail(f"the lab did not come up: {first_take['result'].stderr[-2000:]}")
    return first_take["lab"]


def take(lab: Lab, out: Path, seconds: float = 4, **rig) -> tuple[int, Path, dict]:
    lab.write_rig(takes_dir=out, **rig)
    code, take_dir, stderr = lab.start_take(out, seconds)
    assert take_dir is not None, f"coord start-take (exit {code}) left no take directory: {stderr[-1500:]}"
    return code, take_dir, json.loads((take_dir / "manifest.json").read_text())


def camera(manifest: dict, node: str) -> dict:
    return next(c for c in manifest["cameras"] if c["node"] == node)


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


# --- USB webcams and microphones through their real drivers (issue 36, CONTRACT §16) ---------------------------

@pytest.fixture(scope="module")
def usb_take(lab, tmp_path_factory):
    """The module's lab with a USB gadget webcam (uvcvideo) and microphone (snd-usb-audio) in each VM instead of
    vivid and snd-dummy: the lab's dummy_hcd loaded, the gadget programs started, the node files pointed at them."""
    from vmlab_lib import usb
    out = tmp_path_factory.mktemp("usb")
    usb.share_usb(lab.dir / "share", lab.art.release)
    devices = {}
    try:
        for vm in lab.vms:
            cam, mic = usb.start_gadgets(vm, "uvc", "uac2")
            devices[vm.name] = (cam["v4l2"], mic)
            lab.use_camera(vm, cam["v4l2"], restart=False)
            lab.use_microphone(vm, mic)
        before = clocktruth.bursts(lab.vms)
        code, take_dir, manifest = take(lab, out, seconds=SECONDS)
        truths = clocktruth.truths(before, clocktruth.bursts(lab.vms))
        reports = {vm.name: usb.gadget_reports(vm) for vm in lab.vms}
    finally:
        for vm in lab.vms:
            lab.use_camera(vm, "/dev/video0", restart=False)
            lab.use_microphone(vm, MIC_DEVICE)
    uvc = truth.uvc_truth(manifest, take_dir, truths)
    (out / "clock_truth.json").write_text(json.dumps({"clock_truth": clocktruth.report(truths, manifest),
                                                      "uvc_truth": uvc}, indent=1))  # for a look afterwards
    yield {"code": code, "dir": take_dir, "manifest": manifest, "reports": reports, "devices": devices, "truth": uvc}


def test_usb_webcams_and_microphones_record_through_uvcvideo_and_snd_usb_audio(usb_take):
    manifest, take_dir = usb_take["manifest"], usb_take["dir"]
    assert usb_take["code"] == 0 and manifest["status"] == "complete", manifest["events"]
    groups = manifest["groups"]
    for cam in manifest["cameras"]:
        assert cam["device"]["driver"] == "uvcvideo", cam["device"]
        assert cam["device"]["bus_info"] == "usb-dummy_hcd.0-1", cam["device"]
        mkv = take_dir / cam["node"] / f"{cam['camera']}.mkv"
        errors, found = truth.centre_errors(manifest, take_dir, cam["node"], cam["camera"])
        assert len(found) == groups, f"{mkv}: {len(found)} frames, not {groups}"
        # Every frame the webcam's: its stripe intact, the sensor's counter never going back (a filled frame
        # repeats one), its centre the counter's instant on the sensor's own period.
        report = usb_take["reports"][cam["node"]]["uvc"]
        assert None not in found, f"{mkv}: unreadable stripes at {[i for i, s in enumerate(found) if s is None]}"
        for (c0, t0), (c1, t1) in zip(found, found[1:]):
            assert c1 >= c0, (cam["node"], c0, c1)
            assert abs((t1 - t0) - (c1 - c0) * report["period_s"] * 1e6) <= 1, (cam["node"], c0, c1, t0, t1)
        # How far the node's centre for each frame is from the truth, on the node's own clock, against the bound the
        # report claims (±2σ of its clock and centre uncertainties): the node names the stamp it chose by uvcvideo's
        # hwtimestamps (issue 36 item 3) and widens the uncertainty by how late it believes that stamp is.
        stamp = cam["device"].get("timestamp") or {}
        assert stamp.get("stamp") == ("device-clock" if stamp.get("hwtimestamps") else "first-packet"), cam["device"]
        stated = next(c for c in json.loads((take_dir / "sync-report.json").read_text())["cameras"]
                      if c["node"] == cam["node"] and c["camera"] == cam["camera"])
        bound = 2 * (stated["clock_uncertainty_us"] ** 2 + (stated.get("center_uncertainty_us") or 0) ** 2) ** 0.5
        if stamp["stamp"] == "first-packet":  # the lateness it believes is inside the bound it states
            assert bound >= stamp["late_us"], (bound, stamp)
        outside = [round(e) for e in errors if abs(e) > bound]
        assert not outside, f"{cam['node']}: {len(outside)} of {len(errors)} centres outside ±{bound:.0f} µs: {outside[:10]}"
        errors.sort()
        print(f"{cam['node']}: node's centre − true centre p50 {errors[len(errors) // 2] / 1000:.1f} ms, "
              f"min {errors[0] / 1000:.1f}, max {errors[-1] / 1000:.1f} ms; sensor {report}")
    # Cross-VM through the lab's clock truth: each new frame's true centre (its stripe, mapped from the guest's clock
    # to the host's, which is the rig's) gives each camera's true phase and each group's true spread; the report's
    # figures lie within the bound it states of them (plus the truth's own uncertainty).
    uvc = usb_take["truth"]
    for c in uvc["cameras"]:
        print(f"{c['vm']}/{c['camera']}: true phase {c['phase_error_us']} µs, the report's {c['report_phase_error_us']}"
              f" ±{c['bound_us']} (truth ±{c['truth_uncertainty_us']}); report − truth per frame {c['centre_error_us']}")
        assert c["frames"] > 0 and c["unreadable"] == 0, c
        assert c["holds"], c
    spread = uvc["spread"]
    print(f"true spread {spread['spread_us']} µs over {spread['groups']} groups, the report's {spread['report_spread_us']}"
          f" (bound {spread['report_spread_bound_us']}); worst excess {spread['worst_excess_us']} µs")
    assert spread["groups"] > 0 and spread["holds"], spread
    for mic in manifest["audio"]:  # the USB card's name (snd-usb-audio takes it from the product string)
        assert "SYNCCLICK microphone" in json.dumps(mic["device"]), mic
        assert mic["frames"] > 0
    check = subprocess.run([sys.executable, str(REPO / "scripts/check-audio.py"), str(take_dir), "--node-clock",
                            "--json", "--max-offset-us", "100000"], capture_output=True, text=True, timeout=120)
    mics = json.loads(check.stdout)["mics"]
    print(f"clicks through snd-usb-audio: {mics}; players {[r.get('clicks') for r in usb_take['reports'].values()]}")
    # The sound came through the USB card: the gadget's clicks are in each file (a gadget played into before the
    # host recorded gives zeros). Where they land is printed, not asserted: the player places a burst by its readings
    # of the gadget card's position, which under TCG load jump as dummy_hcd's timer catches up (its late_us p50 4-26
    # ms, `moves`), so the truth holds to 3 ms in a quiet take (2.3-2.8 ms late) and to tens of ms in a busy one.
    assert all(m.get("clicks", 0) >= 1 for m in mics), mics


# --- the gadget webcam through libcamera's UVC pipeline (issue 37 item 4, CONTRACT §16) ----------------------

# The share of groups that must show a new frame through libcamera, the pressure policy off (docs/vmlab.md: one VM on
# the loaded machine gave 94 % and 98 %, where the node that copied on libcamera's thread gave 8-42 %; this tier's
# two VMs at host load 12 gave 48 %, the gadget dropping none: the margin is for that).
LIBCAMERA_NEW_FRAMES = 0.35

@pytest.fixture(scope="module")
def libcamera_take(lab, tmp_path_factory):
    """The module's lab with each VM's gadget webcam named in the node file by its libcamera id (the lab's
    dummy_hcd sits under a PCI parent, which libcamera's UVC pipeline builds the id from), one take, and the
    node's listing of the camera."""
    from vmlab_lib import usb
    out = tmp_path_factory.mktemp("libcamera")
    usb.share_usb(lab.dir / "share", lab.art.release)
    ids, listings = {}, {}
    try:
        for vm in lab.vms:
            cam, _ = usb.start_gadgets(vm, "libcamera", "dummy")
            ids[vm.name] = cam["libcamera"]
            listings[vm.name] = vm.sh("coord-node --list-cameras 2>&1; true", timeout=120)
            usb.use_camera_entry(vm, "libcamera", cam["libcamera"])
            vm.sh("systemctl restart coord-node", timeout=240)
        # Without the pressure policy's slow-downs: the new frames counted are what the camera path delivered.
        code, take_dir, manifest = take(lab, out, seconds=SECONDS, pressure_none=True)
        log = (lab.dir / "start-take.log").read_text()
        reports = {vm.name: usb.gadget_reports(vm) for vm in lab.vms}
    finally:
        for vm in lab.vms:
            usb.use_camera_entry(vm, "v4l2", "/dev/video0")
            vm.sh("systemctl restart coord-node", timeout=240)
    yield {"code": code, "dir": take_dir, "manifest": manifest, "ids": ids, "listings": listings, "log": log,
           "reports": reports}


def test_list_cameras_shows_the_gadget_webcam_through_libcamera_with_its_sizes_and_limits(libcamera_take):
    for vm, listing in libcamera_take["listings"].items():
        camera_id = libcamera_take["ids"][vm]
        # The id: the controller's ACPI path (its PCI parent's firmware node), then the gadget's vendor:product.
        assert camera_id.startswith("\\_SB_.PCI0") and camera_id.endswith("-1d6b:0102"), camera_id
        block = listing[listing.index(f"libcamera {camera_id}"):]
        assert "pipeline: uvcvideo" in block and "SYNCSTRIPE webcam" in block, block
        assert "formats: YUYV 320x180,640x360" in block, block
        # libcamera 0.0.3's UVC pipeline lists no FrameDurationLimits: the line says so, and why it matters.
        assert "frame duration limits: none listed (the camera free-runs)" in block, block


def test_libcamera_records_the_gadget_webcam_into_a_complete_take(libcamera_take):
    manifest, take_dir = libcamera_take["manifest"], libcamera_take["dir"]
    assert libcamera_take["code"] == 0 and manifest["status"] == "complete", manifest["events"]
    groups = manifest["groups"]
    for cam in manifest["cameras"]:
        device = cam["device"]
        assert device["driver"] == "libcamera" and device["pipeline"] == "uvcvideo", device
        assert device["id"] == libcamera_take["ids"][cam["node"]] and "SYNCSTRIPE" in device["model"], device
        mkv = take_dir / cam["node"] / f"{cam['camera']}.mkv"
        errors, found = truth.centre_errors(manifest, take_dir, cam["node"], cam["camera"])
        assert len(found) == groups == ffprobe_count(mkv, "v:0"), f"{mkv}: {len(found)} frames, not {groups}"
        assert None not in found, f"{mkv}: unreadable stripes at {[i for i, s in enumerate(found) if s is None]}"
        errors.sort()
        print(f"{cam['node']} through libcamera: {len(errors)} new frames of {groups} groups; node's centre − true centre"
              f" p50 {errors[len(errors) // 2] / 1000:.1f} ms, min {errors[0] / 1000:.1f}, max {errors[-1] / 1000:.1f} ms;"
              f" sensor {libcamera_take['reports'][cam['node']].get('uvc')}")
        # The frames reach the file (docs/vmlab.md's libcamera figures: a quiet run's share, less CI's margin).
        assert len(errors) >= LIBCAMERA_NEW_FRAMES * groups, f"{len(errors)} new frames of {groups} groups"
        # The UVC pipeline's SensorTimestamp is uvcvideo's buffer stamp, chosen as for --v4l2 (hwtimestamps=0, the
        # lab's default: the first packet's arrival, after the exposure), and the manifest says so. How late the centres
        # are is printed, not asserted: under TCG on a loaded machine the first packet trails the exposure by
        # whatever dummy_hcd's late timer held it (bench/results/vmlab-usb-truth.json: +145 to +691 ms at load 12).
        stamp = device["timestamp"]
        first_packet = not stamp.get("hwtimestamps")
        assert (stamp["stamp"], stamp["marks"]) == (("first-packet", "endOfExposure") if first_packet
                                                    else ("device-clock", "startOfExposure")), stamp
    # The UVC pipeline does not follow a per-request frame duration: measured at arm, and the arm says so; and the
    # arm says which stamp the centres come from and how late they may be.
    assert "did not honour FrameDurationLimits" in libcamera_take["log"], libcamera_take["log"][-2000:]
    assert re.search(r"is stamped (when its first USB packet arrives|by its own clock)", libcamera_take["log"]), \
        libcamera_take["log"][-2000:]


# --- trigger outputs on a real GPIO chip: the kernel's gpio-sim (issue 38, CONTRACT §17) ----------------------

@pytest.fixture(scope="module")
def trigger_take(lab, tmp_path_factory):
    """The module's lab with a gpio-sim chip in each VM (scripts/vmlab_lib/gpiosim.py), a trigger output on its line
    0 in the node file and vivid's cam0 bound to it, one take, and each output's rising edges as the kernel's
    gpio_value tracepoint timed them (trace_clock mono: the guest's CLOCK_MONOTONIC)."""
    from vmlab_lib import gpiosim
    out = tmp_path_factory.mktemp("trigger")
    gpiosim.share(lab.dir / "share", lab.art.release)
    from concurrent.futures import ThreadPoolExecutor
    try:
        with ThreadPoolExecutor(max_workers=len(lab.vms)) as pool:  # each VM restarts its node: side by side
            chips = dict(zip((vm.name for vm in lab.vms), pool.map(gpiosim.use_trigger, lab.vms)))
        before = clocktruth.bursts(lab.vms)
        code, take_dir, manifest = take(lab, out, seconds=SECONDS, fps=gpiosim.LAB_FPS)
        truths = clocktruth.truths(before, clocktruth.bursts(lab.vms))
        edges = {vm.name: gpiosim.read_edges(vm, chips[vm.name][1]) for vm in lab.vms}
        entries = [gpiosim.figures(manifest, vm.name, edges[vm.name]) for vm in lab.vms]
        skew = truth.trigger_truth(entries, edges, manifest, truths)
        (out / "clock_truth.json").write_text(json.dumps({"clock_truth": clocktruth.report(truths, manifest),
                                                          "trigger": entries, "trigger_skew_us": skew}, indent=1))
    finally:
        with ThreadPoolExecutor(max_workers=len(lab.vms)) as pool:
            list(pool.map(gpiosim.drop_trigger, lab.vms))
    yield {"code": code, "dir": take_dir, "manifest": manifest, "entries": entries, "skew": skew}


def test_trigger_outputs_on_gpio_sim_pulse_once_per_group_on_the_grid(trigger_take):
    manifest, entries = trigger_take["manifest"], trigger_take["entries"]
    assert trigger_take["code"] == 0 and manifest["status"] == "complete", manifest["events"]
    groups, period = manifest["groups"], manifest["frame_period_us"]
    assert sorted(e["vm"] for e in entries) == ["vm1", "vm2"], entries
    for e in entries:
        print(f"{e['vm']}: {e['pulses']} pulses for {e['groups']} groups, kernel edge − grid instant "
              f"{e['error_us']} µs (signed {e['signed_us']})")
        # Every pulse the kernel saw on the line, over the whole trace: one per group, none before or after the take.
        assert e["pulses"] == e["groups"] == groups and e["outside"] == {"before": 0, "after": 0}, e
        errors = e["error_us"]
        assert set(errors) == {"p50", "p99", "max"} and errors["p50"] <= errors["p99"] <= errors["max"], e
        # The generator drops a pulse it would emit more than half a period late, so every kept edge is within it;
        # the p50 bound is what TCG gives on the loaded 2-core machine (docs/vmlab.md: 0.25-8 ms measured).
        assert e["error_us"]["max"] < period / 2 + TRIGGER_MAPPING_US, e
        assert e["error_us"]["p50"] < TRIGGER_P50_US, e
        # Never early: the generator spins to its edge on the clock the kernel stamps with; only the two
        # mappings of that clock to the grid (the node's and the coordinator's clock_track) differ.
        assert e["signed_us"]["min"] > -TRIGGER_MAPPING_US, e
        # The same edges on the host's clock through the lab's clock truth (independent of coord) against the grid
        # instants, which are on the host's clock: early by at most coord's clock bound (the node schedules through
        # coord's mapping) plus the truth's uncertainty, and within half a period plus those late.
        track_bound = max(p["bound_us"] for p in manifest["clock_track"] if p["node"] == e["vm"])
        slack = track_bound + e["truth_uncertainty_us"]
        print(f"{e['vm']}: through the clock truth {e['truth_error_us']} µs (signed {e['truth_signed_us']}, "
              f"truth ±{e['truth_uncertainty_us']}, coord's bound {track_bound})")
        assert e["truth_signed_us"]["min"] > -slack and e["truth_error_us"]["max"] < period / 2 + slack, e
        assert abs(e["truth_error_us"]["p50"] - e["error_us"]["p50"]) <= slack, e
    # The two VMs' edges of each group, on the host's clock: apart by no more than each is late (under half a period)
    # plus both clocks' slack; printed figures are the cross-VM trigger skew.
    skew = trigger_take["skew"]
    print(f"cross-VM edge skew through the clock truth: {skew}")
    assert skew["groups"] == groups and skew["max"] < period / 2 + 2 * TRIGGER_MAPPING_US + skew["uncertainty_us"], skew
    # The manifest's triggered-camera block: the node's own count and timing of the same pulses.
    for cam in manifest["cameras"]:
        t = cam.get("trigger")
        assert t and t["output"] == "trig0" and t["source"] == "Line0", cam
        assert t["pulses"] == groups, t
        assert set(t["error_us"]) == {"p50", "p99", "max"}, t
        kernel = next(e for e in entries if e["vm"] == cam["node"])
        print(f"{cam['node']}/cam0: the node's own figures {t['error_us']} µs, the kernel's {kernel['error_us']} µs")
        # The node times its edge after the ioctl returns, on its own mapping; the kernel inside it, mapped by
        # clock_track: the medians agreed within 13-82 µs in five takes, and may differ by the mappings' bound.
        assert abs(t["error_us"]["p50"] - kernel["error_us"]["p50"]) < TRIGGER_MAPPING_US, (t, kernel)


# The node's and the coordinator's mappings of a guest clock onto the grid agree within the clock's bound (clock_track's
# bound_us: 0.46-2.5 ms under TCG); the p50 of a TCG guest's pulse lateness on the loaded machine (measured 0.25-4.9
# ms at 10 and 30 fps, bench/results/vmlab-trigger.json, and 5-8 ms at 30 fps at load 13).
TRIGGER_MAPPING_US = 3_000
TRIGGER_P50_US = 12_000


def test_a_usb_webcam_unplugged_mid_take_ends_in_one_sentence_while_the_other_vm_records_on(usb_take, lab, tmp_path):
    """Issue 36 item 4 through the real USB stack: vm1's webcam gadget is unbound from its UDC 2 s into the recording
    (`vmlab take --unplug vm1@2s` does the same); uvcvideo unregisters the node, the node's poll reads POLLHUP as
    ENODEV and ends that camera with its sentence, the take is partial and vm2 records every group."""
    from vmlab_lib import usb
    out = tmp_path / "usb-unplug"
    try:
        for vm in lab.vms:  # usb_take's gadgets again (a restart: each program lets go of its node, then unbinds)
            cam, mic = usb.start_gadgets(vm, "uvc", "uac2")
            lab.use_camera(vm, cam["v4l2"], restart=False)
            lab.use_microphone(vm, mic)
        lab.write_rig(takes_dir=out, audio="optional")
        on_line = usb.plug_puller(usb.arm_unplug(lab.vm("vm1"), lab.dir / "share"), 2)
        code, take_dir, stderr = lab.start_take(out, SECONDS, on_line=on_line)
        gadgets = usb.gadget_reports(lab.vm("vm1"))
    finally:
        lab.vm("vm1").sh("systemctl stop vmlab-unplug 2>/dev/null || true")
        for vm in lab.vms:
            lab.use_camera(vm, "/dev/video0", restart=False)
            lab.use_microphone(vm, MIC_DEVICE)
    assert take_dir is not None, f"coord start-take (exit {code}) left no take directory: {stderr[-1500:]}"
    assert "unbound_s" in gadgets.get("unplug", {}), f"the watcher did not unbind vm1's gadget: {gadgets}"
    assert "unplugged_s" in gadgets["uvc"], f"the gadget program did not see its node go: {gadgets['uvc']}"
    manifest = json.loads((take_dir / "manifest.json").read_text())
    assert code == 4 and manifest["status"] == "partial", (code, stderr[-2000:])
    ended = [e for e in manifest["events"] if e["node"] == "vm1" and e["kind"] == "camera-ended"]
    assert ended and "unplugged" in ended[0]["detail"] and "errno 19" in ended[0]["detail"], manifest["events"]
    assert camera(manifest, "vm1")["device"]["driver"] == "uvcvideo"
    assert 0 < camera(manifest, "vm1")["frames"] < manifest["groups"], camera(manifest, "vm1")
    assert ffprobe_count(take_dir / "vm2/cam0.mkv", "v:0") == manifest["groups"], camera(manifest, "vm2")
    print(f"unplugged vm1 at group {ended[0]['detail'].split('after group ')[-1].split(':')[0]} of "
          f"{manifest['groups']}; unbind took {gadgets['unplug']['unbind_took_s']} s")


def test_two_usb_webcams_on_one_bus_are_refused_by_coord_plan_naming_the_bus_and_both(usb_take, lab, tmp_path):
    """Issue 36 item 4: vm1's webcam gadget restarted with two UVC functions, two uvcvideo cameras of one USB device
    on dummy_hcd's one-port bus. The node reads each one's isochronous alternate settings from sysfs (3072 B per
    microframe: 24.6 MB/s reserved each) and `coord plan` refuses the pair even at 15 fps, where their frames would
    be 3.5 MB/s: 49.2 MB/s of isochronous reservations over USB 2's 48 MB/s periodic share. The lab's dummy_hcd
    reserves nothing (bench/vmlab_usb_bus.py: both stream at once without ENOSPC), so the budget is the refusal."""
    from vmlab_lib import usb
    vm1 = lab.vm("vm1")
    node_file = vm1.sh("cat /etc/coord-node/node.yaml")
    try:
        webcams = usb.start_webcams(vm1, 2)
        cameras = "".join(f"  - {json.dumps({'name': f'cam{k}', 'v4l2': p})}\n" for k, p in enumerate(webcams))
        two = re.sub(r"cameras:\n(?:  - .*\n)+", lambda m: "cameras:\n" + cameras, node_file.rstrip() + "\n", count=1)
        vm1.sh(f"cat > /etc/coord-node/node.yaml <<'EOF'\n{two}EOF\nsystemctl restart coord-node", timeout=240)
        listing = vm1.sh("coord-node --list-cameras 2>&1; true", timeout=120)
        rig = lab.write_rig(fps=15, takes_dir=tmp_path)
        plan = subprocess.run([str(lab.coord), "plan", "--rig", str(rig)], capture_output=True, text=True, timeout=300)
    finally:
        usb.start_webcams(vm1, 1)
        vm1.sh(f"cat > /etc/coord-node/node.yaml <<'EOF'\n{node_file.rstrip()}\nEOF\nsystemctl restart coord-node",
               timeout=240)
    assert len(webcams) == 2, webcams
    assert listing.count("reserves up to 24.6 MB/s of the 48.0 MB/s") == 2, listing[-2000:]
    out = plan.stdout + plan.stderr
    assert plan.returncode == 3, out[-2000:]
    bus = re.search(r"vm1: cam0 and cam1 cannot run together at these settings: they need 49\.2 MB/s on "
                    r"(bus usb\d+ \(usb2\)), which carries 48\.0 MB/s; at most 1 of them fits\.", out)
    assert bus, out[-2000:]
    assert "isochronous reservations" in out, out[-2000:]
    print(f"coord plan: {bus.group(0)}")
