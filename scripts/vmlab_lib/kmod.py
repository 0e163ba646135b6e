"""Kernel modules the lab builds out of tree from Debian's linux-source-6.1 against the lab kernel's headers (the
patched dummy_hcd of usb.py, gpio-sim of gpiosim.py): test infrastructure only, never shipped.

The headers and the source come as .debs (`apt-get download` + `dpkg-deb -x` into the lab's cache: installing the
headers package would upgrade the host's linux-libc-dev), and a built module is cached under the key its caller
gives, so a lab builds each one once per recipe and kernel.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Callable

from .image import LabError, NICE, _download, log, run


def build(release: str, lab: Path, out: Path, *, what: str, sources: tuple[str, ...], kbuild: str,
          prepare: Callable[[Path, Path], None], tools: tuple[str, ...] = ("make", "gcc", "xz")) -> Path:
    """Builds `out` (a .ko) for kernel `release` (6.1.0-N-amd64) unless it is there: `sources` (paths inside the
    kernel tree) are unpacked, `prepare(tree, build)` puts the module's files into the build directory, `kbuild`
    is its Kbuild (its `obj-m := <name>.o` names the .ko make leaves), copied to `out` whole or not at all."""
    if out.exists():
        return out
    for tool in tools:
        if shutil.which(tool) is None:
            raise LabError(f"building the lab's {what} needs {tool} (apt-get install build-essential xz-utils).")
    dl = lab / "dl"
    version = release.split("-")[0].rsplit(".", 1)[0]  # 6.1.0 → 6.1
    common = release.rsplit("-", 1)[0] + "-common"  # 6.1.0-N-common
    debs = [_download(f"linux-headers-{release}", dl), _download(f"linux-source-{version}", dl),
            _download(f"linux-headers-{common}", dl), _download(f"linux-kbuild-{version}", dl)]
    log(f"building {what} for {release} (out of tree, about a minute)")
    with tempfile.TemporaryDirectory(dir=lab) as work:
        work = Path(work)
        root = work / "root"
        for deb in debs:
            run(["dpkg-deb", "-x", deb, root])
        headers = root / "usr/src" / f"linux-headers-{release}"
        makefile = headers / "Makefile"  # includes the common tree by its absolute path on an installed system
        makefile.write_text(makefile.read_text().replace("include /usr/src/", f"include {root}/usr/src/"))
        tree = f"linux-source-{version}"
        run(["tar", "-C", work, "-xJf", root / "usr/src" / f"{tree}.tar.xz"] + [f"{tree}/{s}" for s in sources],
            timeout=900)
        build_dir = work / "build"
        build_dir.mkdir()
        prepare(work / tree, build_dir)
        (build_dir / "Kbuild").write_text(kbuild)
        run(NICE + ["make", "-C", headers, f"M={build_dir}", "modules"], timeout=900)
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_suffix(".partial")
        shutil.copy2(build_dir / (kbuild.split(":=", 1)[1].split()[0].removesuffix(".o") + ".ko"), partial)
        partial.rename(out)
    return out
