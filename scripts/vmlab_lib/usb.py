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
import shutil
import subprocess
import tempfile
from pathlib import Path

from .image import LAB, LabError, NICE, _download, log, run

GADGET_DIR = Path(__file__).resolve().parent / "gadget"
PATCH = GADGET_DIR / "dummy_hcd-iso.patch"
SOURCE_FILE = "drivers/usb/gadget/udc/dummy_hcd.c"


def dummy_hcd(release: str, lab: Path = LAB) -> Path:
    """The patched dummy_hcd.ko for kernel `release` (6.1.0-N-amd64), built once per patch and kernel."""
    key = hashlib.sha256(PATCH.read_bytes() + release.encode()).hexdigest()[:12]
    out = lab / "modules" / f"dummy_hcd-{release}-{key}.ko"
    if out.exists():
        return out
    for tool in ("make", "gcc", "patch", "xz"):
        if shutil.which(tool) is None:
            raise LabError(f"building the lab's dummy_hcd needs {tool} (apt-get install build-essential xz-utils).")
    dl = lab / "dl"
    version = release.split("-")[0].rsplit(".", 1)[0]  # 6.1.0 → 6.1
    debs = [_download(f"linux-headers-{release}", dl), _download(f"linux-source-{version}", dl)]
    common = release.rsplit("-", 1)[0] + "-common"  # 6.1.0-N-common
    debs += [_download(f"linux-headers-{common}", dl), _download(f"linux-kbuild-{version}", dl)]
    log(f"building dummy_hcd for {release} with {PATCH.name} (out of tree, about a minute)")
    with tempfile.TemporaryDirectory(dir=lab) as work:
        work = Path(work)
        root = work / "root"
        for deb in debs:
            run(["dpkg-deb", "-x", deb, root])
        headers = root / "usr/src" / f"linux-headers-{release}"
        # The headers' Makefile includes the common tree by its absolute path on an installed system.
        makefile = headers / "Makefile"
        makefile.write_text(makefile.read_text().replace("include /usr/src/", f"include {root}/usr/src/"))
        tarball = root / "usr/src" / f"linux-source-{version}.tar.xz"
        run(["tar", "-C", work, "-xJf", tarball, f"linux-source-{version}/{SOURCE_FILE}"], timeout=900)
        build = work / "build"
        build.mkdir()
        shutil.copy2(work / f"linux-source-{version}" / SOURCE_FILE, build / "dummy_hcd.c")
        result = subprocess.run(["patch", "-p5", "-i", str(PATCH)], cwd=build, capture_output=True, text=True)
        if result.returncode != 0:
            raise LabError(f"{PATCH.name} does not apply to linux-source-{version}'s dummy_hcd.c: "
                           f"{(result.stdout + result.stderr).strip()[-400:]}")
        (build / "Kbuild").write_text("obj-m := dummy_hcd.o\n")
        run(NICE + ["make", "-C", headers, f"M={build}", "modules"], timeout=900)
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_suffix(".partial")
        shutil.copy2(build / "dummy_hcd.ko", partial)
        partial.rename(out)
    return out
