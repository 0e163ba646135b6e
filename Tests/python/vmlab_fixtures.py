"""The VM tier's shared lab (issue 26, CONTRACT §11): one lab of two VMs booted once for the session by the first
test that asks (`scripts/vmlab take OUTDIR --vms 2 --keep`: the acceptance take), reused by test_vmlab.py and
test_vmlab_devices.py, and stopped as the last of them ends. conftest.py hands the fixtures to pytest."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
from vmlab_lib import image  # noqa: E402
from vmlab_lib.lab import Lab  # noqa: E402

VMLAB = REPO / "scripts/vmlab"
DEBS = Path(os.environ.get("COORD_VMLAB_DEBS") or os.environ.get("COORD_PACKAGES_DIR") or image.LAB / "debs")
SECONDS = 6


def why_not() -> str | None:
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


def ffprobe_count(path: Path, stream: str) -> int:
    out = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-select_streams", stream,
                          "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", str(path)],
                         capture_output=True, text=True, timeout=120, check=True).stdout.strip()
    return int(out.split(",")[0]) if out and out.split(",")[0].isdigit() else 0


@pytest.fixture(scope="session")
def first_take(tmp_path_factory):
    """`scripts/vmlab take OUTDIR --vms 2 --keep`: the acceptance take, leaving the lab up for the other tests."""
    debs = packages()
    out = tmp_path_factory.mktemp("vmlab")
    started = time.monotonic()
    result = subprocess.run([str(VMLAB), "take", str(out), "--vms", "2", "--seconds", str(SECONDS), "--keep",
                             "--debs", str(debs)], capture_output=True, text=True, timeout=1500)
    lab = Lab.load(out / ".vmlab") if (out / ".vmlab/lab.json").exists() else None
    taken = {"out": out, "result": result, "lab": lab, "seconds": time.monotonic() - started, "down": False}
    yield taken
    lab_down(taken)


def lab_down(taken: dict) -> None:
    """Stops the lab's VMs once (the last VM-tier module does it as it ends, so later tests run without them)."""
    if taken["lab"] is not None and not taken["down"]:
        taken["down"] = True
        taken["lab"].down()


@pytest.fixture(scope="session")
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
