"""USB devices in the lab (issue 36, CONTRACT §16): the lab's own dummy_hcd, built out of tree from Debian's
linux-source-6.1 with gadget/dummy_hcd-iso.patch (isochronous endpoints served one packet per interval of the
monotonic clock, an 11-bit frame counter), and the gadget-side programs that make a USB webcam (usb_f_uvc) and a
USB microphone (usb_f_uac2) of it, seen by the same guest kernel through Debian's own uvcvideo and snd-usb-audio.

The module is built on the host against the lab kernel's headers (`apt-get download` + `dpkg-deb -x`: installing
the headers package would upgrade the host's linux-libc-dev), cached by the patch's hash, and loaded in a guest
with insmod only when a USB case asks: the image and its saved states stay as they are.
"""
from __future__ import annotations

import hashlib
import json
import re
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from . import kmod
from .image import LAB, LabError

GADGET_DIR = Path(__file__).resolve().parent / "gadget"
PATCH = GADGET_DIR / "dummy_hcd-iso.patch"
# Applied after PATCH: the host controllers under a PCI parent, which libcamera's UVC pipeline needs (issue 37).
PCI_PATCH = GADGET_DIR / "dummy_hcd-pci-parent.patch"
SOURCE_FILE = "drivers/usb/gadget/udc/dummy_hcd.c"


def dummy_hcd(release: str, lab: Path = LAB) -> Path:
    """The patched dummy_hcd.ko for kernel `release` (6.1.0-N-amd64), built once per patch and kernel."""
    key = hashlib.sha256(PATCH.read_bytes() + PCI_PATCH.read_bytes() + release.encode()).hexdigest()[:12]
    out = lab / "modules" / f"dummy_hcd-{release}-{key}.ko"
    def prepare(src: Path, build: Path) -> None:
        shutil.copy2(src / SOURCE_FILE, build / "dummy_hcd.c")
        for patch in (PATCH, PCI_PATCH):
            result = subprocess.run(["patch", "-p5", "-i", str(patch)], cwd=build, capture_output=True, text=True)
            if result.returncode != 0:
                raise LabError(f"{patch.name} does not apply to linux-source's dummy_hcd.c: "
                               f"{(result.stdout + result.stderr).strip()[-400:]}")

    return kmod.build(release, lab, out, what=f"dummy_hcd with {PATCH.name}", sources=(SOURCE_FILE,),
                      kbuild="obj-m := dummy_hcd.o\n", prepare=prepare, tools=("make", "gcc", "patch", "xz"))


CAMERAS = ("vivid", "uvc", "libcamera")
MICS = ("dummy", "aloop", "uac2")
# The gadgets' UDCs: dummy_hcd num=2 makes two controllers, one device each.
UVC_UDC, UAC2_UDC = "dummy_udc.0", "dummy_udc.1"


def check_kinds(camera: str, mic: str) -> None:
    if camera not in CAMERAS:
        raise LabError(f"--camera must be one of {', '.join(CAMERAS)}, not {camera!r}.")
    if mic not in MICS:
        raise LabError(f"--mic must be one of {', '.join(MICS)}, not {mic!r}.")


def share_usb(share: Path, release: str) -> None:
    """Puts the patched dummy_hcd.ko and the gadget programs into the lab's 9p share."""
    shutil.copy2(dummy_hcd(release), share / "dummy_hcd.ko")
    for name in ("uvc_gadget.py", "uac2_gadget.py", "configfs_gadget.py", "clicks.py"):
        shutil.copy2(Path(__file__).resolve().parent / "guest" / name, share / name)


def start_gadgets(vm, camera: str, mic: str) -> tuple[dict | None, str | None]:
    """Loads the lab's dummy_hcd in `vm` and starts the gadget programs the kinds ask for, as transient systemd
    units; returns the node file's camera ({v4l2: the uvcvideo node}) and microphone (`hw:ID,0,0` of the USB
    card), None for what is not a USB device."""
    if camera not in ("uvc", "libcamera") and mic != "uac2":
        return None, None
    # The stock dummy_hcd would not bind the gadgets (no isochronous endpoints); ours loads in its place and
    # taints the kernel (out of tree, unsigned). The host-side drivers, uvcvideo and snd-usb-audio, are Debian's.
    vm.sh("[ -e /sys/class/udc/dummy_udc.0 ] || { modprobe -a udc_core usbcore && insmod /mnt/host/dummy_hcd.ko num=2; }")
    cam_entry, mic_device = None, None
    if camera in ("uvc", "libcamera"):
        vm.sh("systemctl stop vmlab-uvc 2>/dev/null; systemctl reset-failed vmlab-uvc 2>/dev/null; "
              "systemd-run --unit=vmlab-uvc --collect -p Nice=-15 python3 /mnt/host/uvc_gadget.py "
              f"--udc {UVC_UDC} --report /run/vmlab-uvc.json")
        node = vm.sh("for i in $(seq 600); do for p in /dev/v4l/by-id/usb-coord_vmlab_SYNCSTRIPE*-video-index0; do "
                     "[ -e \"$p\" ] && { echo $p; exit 0; }; done; sleep 0.1; done; "
                     "systemctl status vmlab-uvc --no-pager -n 20; exit 1", timeout=90).strip()
        cam_entry = {"name": "cam0", "v4l2": node}
    if camera == "libcamera":  # the same gadget webcam, named by the id libcamera's UVC pipeline gives it
        cam_entry = {"name": "cam0", "libcamera": libcamera_id(vm)}
    if mic == "uac2":
        vm.sh("systemctl stop vmlab-uac2 2>/dev/null; systemctl reset-failed vmlab-uac2 2>/dev/null; "
              "systemd-run --unit=vmlab-uac2 --collect -p Nice=-15 python3 /mnt/host/uac2_gadget.py "
              f"--udc {UAC2_UDC} --report /run/vmlab-clicks.json")
        card = vm.sh("for i in $(seq 600); do for c in /proc/asound/card[0-9]*; do "
                     "[ \"$(cat $c/usbid 2>/dev/null)\" = 1d6b:0101 ] && { cat $c/id; exit 0; }; done; sleep 0.1; "
                     "done; systemctl status vmlab-uac2 --no-pager -n 20; exit 1", timeout=90).strip()
        mic_device = f"hw:{card},0,0"
    return cam_entry, mic_device


def start_webcams(vm, count: int) -> list[str]:
    """Restarts `vm`'s webcam gadget with `count` UVC functions (webcams on one USB device, so on dummy_hcd.0's one
    bus; 1 puts it back as start_gadgets made it); returns the host-side capture nodes, by path, in interface order."""
    vm.sh("systemctl stop vmlab-uvc 2>/dev/null; systemctl reset-failed vmlab-uvc 2>/dev/null; "
          "systemd-run --unit=vmlab-uvc --collect -p Nice=-15 python3 /mnt/host/uvc_gadget.py "
          f"--udc {UVC_UDC} --functions {count} --report /run/vmlab-uvc.json")
    listing = vm.sh(f"for i in $(seq 600); do n=$(ls /dev/v4l/by-path/ 2>/dev/null | grep -c 'dummy_hcd.0-.*index0'); "
                    f"[ \"$n\" -eq {count} ] && {{ ls -d /dev/v4l/by-path/*dummy_hcd.0-*index0; exit 0; }}; sleep 0.1; "
                    "done; systemctl status vmlab-uvc --no-pager -n 20; exit 1", timeout=90)
    return sorted(line.strip() for line in listing.splitlines() if line.strip())


def libcamera_id(vm) -> str:
    """The gadget webcam's camera id as the packaged node lists it through libcamera (the controller's ACPI path,
    then the USB vendor:product): the one camera of the uvcvideo pipeline."""
    listing = vm.sh("coord-node --list-cameras 2>&1; true", timeout=120)
    ids = [line.split(" ", 1)[1].strip() for line in listing.splitlines()
           if line.startswith("libcamera ") and ":" in line]
    if len(ids) != 1:
        raise LabError(f"{vm.name}: libcamera lists {len(ids)} cameras, not the gadget webcam alone "
                       f"(coord-node --list-cameras: {listing.strip()[-600:]})")
    return ids[0]


def use_camera_entry(vm, key: str, value: str) -> None:
    """Points the node file's camera at `{key: value}` (v4l2 or libcamera), whichever key it had; the node reads it
    when it is restarted."""
    script = ("import json, re, sys; p = '/etc/coord-node/node.yaml'; t = open(p).read(); "
              "open(p, 'w').write(re.sub(r'\"(v4l2|libcamera)\": \"(?:[^\"\\\\]|\\\\.)*\"', "
              "lambda m: json.dumps(sys.argv[1]) + ': ' + json.dumps(sys.argv[2]), t, count=1))")
    vm.sh(f"python3 -c {shlex.quote(script)} {shlex.quote(key)} {shlex.quote(value)}")


def gadget_reports(vm) -> dict:
    """The gadget programs' own figures (the webcam's sensor: ppm, start, period, frames; the click player's)."""
    out = {}
    for key, path in (("uvc", "/run/vmlab-uvc.json"), ("clicks", "/run/vmlab-clicks.json"),
                      ("unplug", "/run/vmlab-unplug.json")):
        text = vm.sh(f"cat {path} 2>/dev/null || true").strip()
        if text:
            try:
                out[key] = json.loads(text)
            except ValueError:
                pass
    return out


# --- a webcam unplugged mid-take (issue 36 item 4): `vmlab take OUT --camera uvc --unplug vm1@2s` ----------------

UNPLUG = re.compile(r"^(vm\d+)@(\d+(?:\.\d+)?)s?$")
PROGRESS = re.compile(r"recording (\d+(?:\.\d+)?) ")  # coord's "recording 1.7 / 8.0 s  frames …"


def parse_unplug(text: str, vms: int, camera: str) -> tuple[str, float]:
    """`--unplug VM@SECONDS` (vm1@2s): which VM's webcam is unplugged, how many seconds into the recording."""
    seen = UNPLUG.match(text.strip())
    if seen is None:
        raise LabError(f"--unplug must be VM@SECONDS like vm1@2s, not {text!r}.")
    name, at = seen.group(1), float(seen.group(2))
    if not 1 <= int(name[2:]) <= vms:
        raise LabError(f"--unplug names {name}, but the lab has vm1-vm{vms}.")
    if camera != "uvc":
        raise LabError("--unplug unbinds a USB gadget webcam: it needs --camera uvc.")
    return name, at


def arm_unplug(vm, share: Path) -> Path:
    """Starts a watcher in `vm` that unbinds its webcam gadget's UDC (to the host: the device is unplugged) as soon
    as the returned file appears in the lab's share; the host makes it when coord's progress passes the instant."""
    plug = share / f"unplug-{vm.name}"
    plug.unlink(missing_ok=True)
    vm.sh("rm -f /run/vmlab-unplug.json; systemctl stop vmlab-unplug 2>/dev/null; "
          "systemctl reset-failed vmlab-unplug 2>/dev/null; "
          f"systemd-run --unit=vmlab-unplug --collect python3 -c '{UNPLUG_WATCHER % (plug.name, UVC_UDC)}'")
    return plug


def plug_puller(plug: Path, at_s: float):
    """A line reader for coord's stderr that makes `plug` once the recording is `at_s` seconds in."""
    def on_line(line: str) -> None:
        seen = PROGRESS.search(line)
        if seen and float(seen.group(1)) >= at_s and not plug.exists():
            plug.touch()
    return on_line


def run_watching(cmd: list[str], on_line, timeout: float) -> subprocess.CompletedProcess:
    """subprocess.run(cmd) with each stderr line handed to `on_line` as it comes (coord's progress)."""
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, text=True)
        lines = []
        try:
            for line in proc.stderr:
                lines.append(line)
                on_line(line)
            proc.wait(timeout=timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        out.seek(0)
        return subprocess.CompletedProcess(cmd, proc.returncode, out.read(), "".join(lines))


# In the guest: waits for the host's file in the 9p share (uncached; the host cannot wake the guest), then unbinds
# the webcam gadget and writes when (the guest's CLOCK_MONOTONIC) and how long the unbind took.
UNPLUG_WATCHER = """
import json, os, time
deadline = time.monotonic() + 1800
while not os.path.exists("/mnt/host/%s") and time.monotonic() < deadline:
    time.sleep(0.02)
if time.monotonic() < deadline:
    t = time.clock_gettime(time.CLOCK_MONOTONIC)
    with open("/sys/kernel/config/usb_gadget/vmlab_uvc/UDC", "w") as f:
        f.write("\\n")
    json.dump({"udc": "%s", "unbound_s": t, "unbind_took_s": round(time.clock_gettime(time.CLOCK_MONOTONIC) - t, 3)},
              open("/run/vmlab-unplug.json", "w"))
"""
