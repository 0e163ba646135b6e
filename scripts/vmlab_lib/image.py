"""The lab's cached artefacts: Debian 12's kernel, a tiny initramfs and the root image (CONTRACT §11).

Everything lives outside the clone in $COORD_TEST_CACHE/vmlab (default /var/cache/coord-test/vmlab) and is made
once: the kernel from `apt-get download linux-image-6.1.0-*-amd64` + `dpkg-deb -x` (nothing is installed on the
host), an initramfs of busybox-static that loads virtio-blk and ext4 and switches to /dev/vda, and an ext4 root
image from the debootstrap root Tests/python/test_packages.py caches (bookworm-root.tar) plus systemd, udev,
kmod, v4l-utils, alsa-utils, python3 (the guest agent) and the runtime libraries the .debs load.
"""
from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

CACHE = Path(os.environ.get("COORD_TEST_CACHE", "/var/cache/coord-test"))
LAB = CACHE / "vmlab"
ROOT_TAR = CACHE / "bookworm-root.tar"
ARCHIVES = CACHE / "apt-archives"
MIRROR = os.environ.get("COORD_DEBIAN_MIRROR", "http://deb.debian.org/debian")
GUEST_DIR = Path(__file__).resolve().parent / "guest"
# Bump when the image's recipe changes: a cached image of another recipe is rebuilt.
RECIPE = "5"

CHROOT_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root", "LC_ALL": "C.UTF-8", "DEBIAN_FRONTEND": "noninteractive",
}
APT = ["apt-get", "-y", "-q", "--no-install-recommends", "-o", "APT::Sandbox::User=root"]
PACKAGES = [
    "systemd", "systemd-sysv", "udev", "kmod", "v4l-utils", "alsa-utils", "python3", "iproute2", "procps",
    # what coord-node and coord load (their Depends:)
    "libasound2", "libavcodec59", "libavformat59", "libavutil57", "libv4l-0", "libzmq5", "libaravis-0.8-0",
    "libxxhash0",
    # coord-node's libcamera runtime (issue 37: dpkg-shlibdeps gives libcamera0.0.3 on Debian 12)
    "libcamera0.0.3",
]
# What the initramfs loads to reach the root file system (their dependencies come from modules.dep).
BOOT_MODULES = ["virtio_pci", "virtio_blk", "crc32c_generic", "ext4"]
NICE = ["nice", "-n", "19"]


class LabError(Exception):
    """One clear sentence for the user."""


def run(cmd, *, timeout=1800, env=None, quiet=True):
    result = subprocess.run([str(c) for c in cmd], capture_output=quiet, text=True, timeout=timeout, env=env)
    if result.returncode != 0:
        tail = ((result.stderr or "") + (result.stdout or ""))[-2000:] if quiet else ""
        raise LabError(f"{' '.join(str(c) for c in cmd[:6])} failed (exit {result.returncode}): {tail.strip()}")
    return result.stdout if quiet else ""


def log(message: str) -> None:
    print(f"vmlab: {message}", file=__import__("sys").stderr, flush=True)


class Artefacts:
    """Paths of one built lab: kernel, initrd, root image, and the kernel's release."""

    def __init__(self, lab: Path = LAB):
        self.lab = lab
        self.kernel = lab / "vmlinuz"
        self.initrd = lab / "initrd.img"
        self.image = lab / "root.img"
        self.release_file = lab / "kernel-release"
        self.stamp = lab / "root.recipe"

    @property
    def release(self) -> str:
        return self.release_file.read_text().strip()

    def ready(self) -> bool:
        return (self.kernel.exists() and self.initrd.exists() and self.image.exists()
                and self.stamp.exists() and self.stamp.read_text().strip() == RECIPE)


def build(lab: Path = LAB) -> Artefacts:
    art = Artefacts(lab)
    lab.mkdir(parents=True, exist_ok=True)
    with open(lab / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two builds at once make it once
        if art.ready():
            return art
        if os.geteuid() != 0:
            raise LabError("building the lab's image needs root (chroot, mount, mkfs): run as root.")
        for tool in ("apt-get", "dpkg-deb", "depmod", "cpio", "mkfs.ext4", "chroot"):
            if shutil.which(tool) is None:
                raise LabError(f"{tool} is not installed (apt-get install qemu-utils e2fsprogs cpio kmod).")
        modules = _kernel(art)
        _initrd(art, modules)
        _root_image(art, modules)
        art.stamp.write_text(RECIPE + "\n")
    return art


def _download(pattern: str, dl: Path) -> Path:
    dl.mkdir(parents=True, exist_ok=True)
    found = sorted(dl.glob(pattern + "_*.deb"))
    if found:
        return found[-1]
    subprocess.run(["apt-get", "download", "-o", "APT::Sandbox::User=root", pattern], cwd=dl, check=True,
                   capture_output=True, timeout=900)
    found = sorted(dl.glob(pattern + "_*.deb"))
    if not found:
        raise LabError(f"apt-get download {pattern} gave no package in {dl}.")
    return found[-1]


def _kernel(art: Artefacts) -> Path:
    """Debian 12's newest linux-image-6.1.0-N-amd64, unpacked; returns its /lib/modules/RELEASE."""
    dl = art.lab / "dl"
    cached = sorted(dl.glob("linux-image-6.1.0-*-amd64_*.deb")) if dl.exists() else []
    if cached:
        package = cached[-1].name.split("_")[0]
    else:
        names = run(["apt-cache", "search", "--names-only", r"^linux-image-6\.1\.0-[0-9]+-amd64$"]).split()
        names = [n for n in names if re.fullmatch(r"linux-image-6\.1\.0-\d+-amd64", n)]
        if not names:
            raise LabError("apt-cache knows no linux-image-6.1.0-*-amd64: is this a Debian 12 host with apt lists?")
        package = sorted(names, key=lambda n: int(n.split("-")[3]))[-1]  # linux-image-6.1.0-N-amd64
    deb = _download(package, dl)
    tree = art.lab / "kernel"
    if tree.exists():
        shutil.rmtree(tree)
    run(["dpkg-deb", "-x", deb, tree])
    release = package.removeprefix("linux-image-")
    shutil.copy2(tree / "boot" / f"vmlinuz-{release}", art.kernel)
    run(["depmod", "-b", tree, release])
    art.release_file.write_text(release + "\n")
    return tree / "lib/modules" / release


def _module_order(modules: Path, wanted: list[str]) -> list[str]:
    """The .ko paths (relative to modules/) to insmod, dependencies first."""
    deps: dict[str, list[str]] = {}
    by_name: dict[str, str] = {}
    for line in (modules / "modules.dep").read_text().splitlines():
        path, _, rest = line.partition(":")
        deps[path] = rest.split()
        by_name[Path(path).name.removesuffix(".ko").replace("-", "_")] = path
    order: list[str] = []

    def visit(path: str) -> None:
        if path in order:
            return
        for d in deps.get(path, []):
            visit(d)
        order.append(path)

    for name in wanted:
        if name not in by_name:
            raise LabError(f"the kernel has no module {name}.")
        visit(by_name[name])
    return order


def _initrd(art: Artefacts, modules: Path) -> None:
    busybox_deb = _download("busybox-static", art.lab / "dl")
    with tempfile.TemporaryDirectory(dir=art.lab) as work:
        work = Path(work)
        run(["dpkg-deb", "-x", busybox_deb, work / "bb"])
        root = work / "initrd"
        for d in ("bin", "proc", "sys", "dev", "newroot", "lib/modules"):
            (root / d).mkdir(parents=True)
        shutil.copy2(work / "bb/bin/busybox", root / "bin/busybox")
        order = _module_order(modules, BOOT_MODULES)
        for path in order:
            shutil.copy2(modules / path, root / "lib/modules" / Path(path).name)
        (root / "modules").write_text("".join(Path(p).name + "\n" for p in order))
        init = root / "init"
        init.write_text((GUEST_DIR / "initrd-init.sh").read_text())
        init.chmod(0o755)
        files = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
        with open(work / "initrd.cpio", "wb") as out:
            subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], input=("\n".join(files) + "\n").encode(),
                           cwd=root, stdout=out, check=True)
        with open(work / "initrd.cpio", "rb") as src, open(art.initrd, "wb") as dst:
            subprocess.run(["gzip", "-1"], stdin=src, stdout=dst, check=True)


def _root_image(art: Artefacts, modules: Path) -> None:
    if not ROOT_TAR.exists():
        if shutil.which("debootstrap") is None:
            raise LabError(f"{ROOT_TAR} is not cached and debootstrap is not installed (apt-get install debootstrap).")
        with tempfile.TemporaryDirectory(dir=CACHE) as work:
            root = Path(work) / "root"
            run(NICE + ["debootstrap", "--variant=minbase", "bookworm", root, MIRROR], timeout=1800)
            run(["chroot", root, "apt-get", "clean"], env=CHROOT_ENV)
            partial = ROOT_TAR.with_suffix(".tar.partial")
            run(["tar", "--numeric-owner", "-C", root, "-cf", partial, "."], timeout=600)
            partial.rename(ROOT_TAR)
    log("building the root image (debootstrap root + systemd, udev, v4l-utils, alsa-utils; about 2 minutes)")
    with tempfile.TemporaryDirectory(dir=art.lab) as work:
        root = Path(work) / "root"
        root.mkdir()
        run(["tar", "--numeric-owner", "-C", root, "-xpf", ROOT_TAR], timeout=600)
        shutil.copy2("/etc/resolv.conf", root / "etc/resolv.conf")
        ARCHIVES.joinpath("partial").mkdir(parents=True, exist_ok=True)
        mounts = [root / "proc", root / "var/cache/apt/archives"]
        try:
            run(["mount", "-t", "proc", "proc", mounts[0]])
            run(["mount", "--bind", ARCHIVES, mounts[1]])
            run(NICE + ["chroot", root] + APT + ["update"], env=CHROOT_ENV, timeout=900)
            run(NICE + ["chroot", root] + APT + ["install"] + PACKAGES, env=CHROOT_ENV, timeout=1800)
        finally:
            for m in reversed(mounts):
                subprocess.run(["umount", "-l", str(m)], capture_output=True)
        run(["chroot", root, "apt-get", "clean"], env=CHROOT_ENV)
        shutil.rmtree(root / "var/lib/apt/lists", ignore_errors=True)
        (root / "var/lib/apt/lists/partial").mkdir(parents=True)
        _configure(root, modules)
        partial = art.image.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        run(["truncate", "-s", "2G", partial])
        run(NICE + ["mkfs.ext4", "-q", "-F", "-L", "vmlab-root", "-d", root, partial], timeout=900)
        partial.rename(art.image)


def _configure(root: Path, modules: Path) -> None:
    """The guest's settings: modules, network, the guest agent, no login, nothing that runs on a timer."""
    shutil.copytree(modules, root / "lib/modules" / modules.name, symlinks=True, dirs_exist_ok=True)
    (root / "etc/hostname").write_text("vmlab\n")
    (root / "etc/hosts").write_text("127.0.0.1 localhost\n127.0.1.1 vmlab\n")
    (root / "etc/fstab").write_text("/dev/vda / ext4 rw,noatime 0 1\n")
    (root / "etc/resolv.conf").write_text("nameserver 10.0.2.3\n")
    (root / "etc/machine-id").write_text("")
    net = root / "etc/systemd/network/10-vmlab.network"
    net.parent.mkdir(parents=True, exist_ok=True)
    # QEMU's user-mode network: the guest is always 10.0.2.15, the host 10.0.2.2.
    net.write_text("[Match]\nName=en* eth*\n\n[Network]\nAddress=10.0.2.15/24\nGateway=10.0.2.2\nDNS=10.0.2.3\n")
    agent = root / "usr/local/sbin/vmlab-agent"
    shutil.copy2(GUEST_DIR / "agent.py", agent)
    agent.chmod(0o755)
    shutil.copy2(GUEST_DIR / "vmlab-agent.service", root / "etc/systemd/system/vmlab-agent.service")
    wants = root / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    for unit, target in (("vmlab-agent.service", "/etc/systemd/system/vmlab-agent.service"),
                         ("systemd-networkd.service", "/lib/systemd/system/systemd-networkd.service")):
        link = wants / unit
        link.unlink(missing_ok=True)
        link.symlink_to(target)
    for unit in ("apt-daily.timer", "apt-daily-upgrade.timer", "e2scrub_all.timer", "e2scrub_reap.service",
                 "fstrim.timer", "systemd-networkd-wait-online.service", "getty@tty1.service",
                 "serial-getty@ttyS0.service"):
        mask = root / "etc/systemd/system" / unit
        mask.unlink(missing_ok=True)
        mask.symlink_to("/dev/null")
    # The journal on the console too, so a VM that never answers leaves its story in console.log.
    journald = root / "etc/systemd/journald.conf.d"
    journald.mkdir(parents=True, exist_ok=True)
    (journald / "vmlab.conf").write_text("[Journal]\nForwardToConsole=no\nStorage=volatile\n")
    run(["chroot", root, "passwd", "-d", "root"], env=CHROOT_ENV)
