#!/usr/bin/env python3
"""A USB microphone playing SYNCCLICK v1, in a lab VM (issue 36, CONTRACT §16): a configfs usb_f_uac2 gadget on the
lab's dummy_hcd (UDC --udc: mono 16-bit 48 kHz towards the host, nothing back), which this same kernel's
snd-usb-audio binds as a card "USB-Audio - SYNCCLICK microphone"; clicks.py plays the train into the gadget's own
card (UAC2Gadget) on this guest's whole seconds.

    python3 uac2_gadget.py [--udc dummy_udc.1] [--report /run/vmlab-clicks.json]

The gadget sends what is played into it only while the host records: played before the host's capture started,
the samples are lost and the host reads zeros, and the gadget's playback ends with EIO when the host stops. So the
player runs only while the host card's capture substream is RUNNING (read from /proc/asound), and starts again at
the next recording. Prints the host card's ALSA id once it appears (the node file's `hw:ID,0,0`).
"""
import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

GADGET = Path("/sys/kernel/config/usb_gadget/vmlab_uac2")
PRODUCT = "SYNCCLICK microphone"
HERE = Path(__file__).resolve().parent


def write(path: Path, value) -> None:
    path.write_text(f"{value}\n")


def make_gadget(udc: str) -> None:
    os.system("modprobe libcomposite && modprobe usb_f_uac2")
    if not Path("/sys/kernel/config/usb_gadget").exists():
        os.system("mount -t configfs none /sys/kernel/config")
    g = GADGET
    g.mkdir(exist_ok=True)
    write(g / "idVendor", "0x1d6b")
    write(g / "idProduct", "0x0101")
    write(g / "bcdUSB", "0x0200")
    s = g / "strings/0x409"
    s.mkdir(parents=True, exist_ok=True)
    write(s / "manufacturer", "coord vmlab")
    write(s / "product", PRODUCT)
    write(s / "serialnumber", udc.replace("dummy_udc.", "100"))
    c = g / "configs/c.1"
    (c / "strings/0x409").mkdir(parents=True, exist_ok=True)
    write(c / "strings/0x409/configuration", "uac2")
    f = g / "functions/uac2.0"
    f.mkdir(exist_ok=True)
    # p_*: what the gadget plays, the host's capture (the microphone); c_chmask 0: no host playback endpoint.
    for key, value in (("p_srate", 48000), ("p_chmask", 1), ("p_ssize", 2), ("c_chmask", 0)):
        write(f / key, value)
    if not (c / "uac2.0").is_symlink():
        (c / "uac2.0").symlink_to(f)
    write(g / "UDC", udc)


def host_card(timeout: float = 30) -> Path:
    """/proc/asound/cardN of the card snd-usb-audio made of the gadget."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for card in sorted(Path("/proc/asound").glob("card[0-9]*")):
            usbid = card / "usbid"
            if usbid.exists() and usbid.read_text().strip() == "1d6b:0101":
                return card
        time.sleep(0.05)  # snd-usb-audio probing the new device; nothing to wait on
    raise SystemExit(f"uac2_gadget: snd-usb-audio made no card of the gadget within {timeout:.0f} s.")


def recording(card: Path) -> bool:
    status = card / "pcm0c/sub0/status"
    try:
        return "RUNNING" in status.read_text()
    except OSError:
        return False


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--udc", default="dummy_udc.1")
    ap.add_argument("--report")
    a = ap.parse_args()
    make_gadget(a.udc)
    card = host_card()
    print(f"host card: {(card / 'id').read_text().strip()}", flush=True)
    try:
        while True:
            # Polling the kernel's state: no event says that the host's capture started.
            while not recording(card):
                time.sleep(0.02)
            cmd = [sys.executable, str(HERE / "clicks.py"), "--device", "hw:UAC2Gadget,0,0"]
            if a.report:
                cmd += ["--report", a.report]
            player = subprocess.Popen(cmd)
            while player.poll() is None and recording(card):
                time.sleep(0.05)
            if player.poll() is None:
                player.terminate()
            player.wait()
    finally:
        try:
            write(GADGET / "UDC", "")
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
