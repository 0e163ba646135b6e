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
import subprocess
import sys
import time
from pathlib import Path

GADGET = "vmlab_uac2"
PRODUCT = "SYNCCLICK microphone"
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import configfs_gadget  # noqa: E402  (beside this file in the lab's share)


def make_gadget(udc: str) -> None:
    g = configfs_gadget.gadget(GADGET, "0x0101", PRODUCT, udc.replace("dummy_udc.", "100"), "uac2")
    if not configfs_gadget.configured(g, "uac2.0"):  # its attributes are fixed once linked (an earlier run's)
        f = configfs_gadget.function(g, "uac2.0")
        # p_*: what the gadget plays, the host's capture (the microphone); c_chmask 0: no host playback endpoint.
        for key, value in (("p_srate", 48000), ("p_chmask", 1), ("p_ssize", 2), ("c_chmask", 0)):
            configfs_gadget.write(f / key, value)
    configfs_gadget.bind(g, udc, "uac2.0")


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
    configfs_gadget.load("usb_f_uac2")
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
        configfs_gadget.unbind(configfs_gadget.ROOT / GADGET)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
