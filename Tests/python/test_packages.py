"""Debian packages (issue 13 item 1, CONTRACT §7): scripts/package.sh builds coord_<version>_<arch>.deb and
coord-node_<version>_<arch>.deb; both install with dpkg -i into a clean Debian 12 root made by debootstrap, with only
the dependencies they declare added; the programs, their man pages and completions work there; coord-node's postinst
makes its system user (video group), state directory and keys and starts nothing; node.yaml is a conffile;
systemd-analyze verify accepts the unit; lintian reports no error or warning that is not overridden with a reason
(deploy/debian/LINTIAN.md); a purge removes the keys.

Slow (a release build, unless COORD_PACKAGES_DIR holds packages already; the first run also makes the Debian root).
Needs root (chroot, mount). The minimal bookworm root is made once with debootstrap and kept as a tarball outside
the clone, in $COORD_TEST_CACHE (default /var/cache/coord-test), beside an apt archive cache for the packages'
dependencies, so a run downloads nothing it has downloaded before.
"""
from __future__ import annotations

import fcntl
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("COORD_TEST_CACHE", "/var/cache/coord-test"))
ROOT_TAR = CACHE / "bookworm-root.tar"
ARCHIVES = CACHE / "apt-archives"
MIRROR = os.environ.get("COORD_DEBIAN_MIRROR", "http://deb.debian.org/debian")
CHROOT_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LC_ALL": "C.UTF-8",
    "DEBIAN_FRONTEND": "noninteractive",
}
# apt inside the root downloads as root: the shared archive cache is owned by the host's users, not the root's _apt.
APT = ["apt-get", "-y", "-q", "--no-install-recommends", "-o", "APT::Sandbox::User=root"]

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                       reason="needs root: it installs the packages into a debootstrap root with chroot and mount"),
    pytest.mark.skipif(shutil.which("dpkg") is None, reason="not a Debian system (no dpkg)"),
    pytest.mark.skipif(shutil.which("debootstrap") is None and not ROOT_TAR.exists(),
                       reason=f"debootstrap is not installed (apt-get install debootstrap) and {ROOT_TAR} is not cached"),
]


def run(argv, *, timeout=600, check=True, env=None, cwd=None) -> subprocess.CompletedProcess:
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, argv))} exited {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def need(tool: str, package: str) -> str:
    path = shutil.which(tool)
    assert path, f"{tool} is not installed: apt-get install {package} (scripts/setup.sh)"
    return path


def field(deb: Path, name: str) -> str:
    return run(["dpkg-deb", "--field", str(deb), name]).stdout.strip()


# --- the packages -----------------------------------------------------------------------------------------------

def newest(directory: Path, package: str) -> Path | None:
    found = [p for p in directory.glob(f"{package}_*.deb") if p.name.count("_") == 2]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


EARLY_BUILD_TIMEOUT_S = 3600


def wait_for_the_early_build():
    """scripts/test.sh builds the packages in the background while the tests before this file run, holding
    $COORD_PACKAGES_LOCK until package.sh ends: wait for it rather than start a second release build."""
    lock_path = os.environ.get("COORD_PACKAGES_LOCK")
    if not lock_path or not Path(lock_path).exists():
        return
    deadline = time.monotonic() + EARLY_BUILD_TIMEOUT_S
    with open(lock_path) as lock:
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                assert time.monotonic() < deadline, \
                    f"the background package build (scripts/test.sh, lock {lock_path}) ran over {EARLY_BUILD_TIMEOUT_S} s"
                time.sleep(1)  # a bounded poll of a lock another process holds; the wait is the build's
        fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="module")
def debs(tmp_path_factory) -> dict[str, Path]:
    """{"coord": …, "coord-node": …}: from $COORD_PACKAGES_DIR if it holds both, else built by scripts/package.sh
    (into $COORD_PACKAGES_DIR when set, so the next run reuses them)."""
    given = os.environ.get("COORD_PACKAGES_DIR")
    out = Path(given) if given else tmp_path_factory.mktemp("debs")
    wait_for_the_early_build()
    if not (given and newest(out, "coord") and newest(out, "coord-node")):
        out.mkdir(parents=True, exist_ok=True)
        run([str(REPO / "scripts/package.sh"), str(out)], timeout=3600)
    found = {name: newest(out, name) for name in ("coord", "coord-node")}
    assert all(found.values()), f"scripts/package.sh left {sorted(p.name for p in out.iterdir())} in {out}"
    return found


# --- the clean Debian 12 root -----------------------------------------------------------------------------------

def cached_root_tarball() -> Path:
    """The minimal bookworm root (debootstrap --variant=minbase), made once and kept in CACHE."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test runs at once make it once
        if not ROOT_TAR.exists():
            need("debootstrap", "debootstrap")
            with tempfile.TemporaryDirectory(dir=CACHE) as work:
                root = Path(work) / "root"
                run(["debootstrap", "--variant=minbase", "bookworm", str(root), MIRROR], timeout=1800)
                run(["chroot", str(root), "apt-get", "clean"], env=CHROOT_ENV)
                partial = ROOT_TAR.with_suffix(".tar.partial")
                run(["tar", "--numeric-owner", "-C", str(root), "-cf", str(partial), "."], timeout=600)
                partial.rename(ROOT_TAR)
    return ROOT_TAR


def mounted(path: Path) -> bool:
    target = str(path.resolve())
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == target for line in f)


@pytest.fixture(scope="module")
def lintian(debs, tmp_path_factory):
    """lintian on both packages, started before the root is made: its two minutes of reading the binaries run beside
    the install's. Yields (process, stdout file, stderr file), or None when lintian is not installed (the test says so)."""
    path = shutil.which("lintian")
    if path is None:
        yield None
        return
    folder = tmp_path_factory.mktemp("lintian")
    out, err = folder / "stdout", folder / "stderr"
    with open(out, "w") as o, open(err, "w") as e:
        proc = subprocess.Popen([path, "--fail-on", "error,warning", "--tag-display-limit", "0", *map(str, debs.values())],
                                stdout=o, stderr=e, text=True)
    try:
        yield proc, out, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


@pytest.fixture(scope="module")
def root(debs, lintian, tmp_path_factory):
    """A fresh copy of the cached root with /proc mounted and the shared apt archive cache bound in."""
    tarball = cached_root_tarball()
    base = tmp_path_factory.mktemp("bookworm")
    root = base / "root"
    root.mkdir()
    run(["tar", "--numeric-owner", "-C", str(root), "-xpf", str(tarball)], timeout=600)
    # The accounts as debootstrap left them, for the sysusers.d check.
    (base / "clean-etc").mkdir()
    for name in ("passwd", "group", "shadow", "gshadow"):
        shutil.copy2(root / "etc" / name, base / "clean-etc" / name)
    shutil.copy2("/etc/resolv.conf", root / "etc/resolv.conf")
    ARCHIVES.joinpath("partial").mkdir(parents=True, exist_ok=True)
    mounts = [root / "proc", root / "var/cache/apt/archives"]
    try:
        run(["mount", "-t", "proc", "proc", str(mounts[0])])
        run(["mount", "--bind", str(ARCHIVES), str(mounts[1])])
        (root / "tmp/debs").mkdir()
        for deb in debs.values():
            shutil.copy2(deb, root / "tmp/debs" / deb.name)
        yield root
    finally:
        for m in reversed(mounts):
            if mounted(m):
                subprocess.run(["umount", "--lazy", str(m)], check=False)
        if not any(mounted(m) for m in mounts):  # never delete through a mount
            shutil.rmtree(base, ignore_errors=True)


def chroot(root: Path, *argv: str, check=True, timeout=600) -> subprocess.CompletedProcess:
    return run(["chroot", str(root), *argv], check=check, timeout=timeout, env=CHROOT_ENV)


def apt(root: Path, *argv: str) -> subprocess.CompletedProcess:
    """apt-get in the root; when the root's package lists are stale (the mirror moved on), updates them once."""
    p = chroot(root, *APT, *argv, check=False, timeout=1800)
    if p.returncode != 0:
        chroot(root, "apt-get", "-q", "update", timeout=600)
        p = chroot(root, *APT, *argv, timeout=1800)
    return p


@pytest.fixture(scope="module")
def installed(root, debs) -> dict:
    """Both packages installed with dpkg -i after exactly their declared dependencies (apt-get satisfy, no
    recommends). Returns dpkg's output and the packages the dependencies added."""
    before = set(chroot(root, "dpkg-query", "-W", "-f=${Package}\n").stdout.split())
    depends = ", ".join(field(deb, "Depends") for deb in debs.values())
    apt(root, "satisfy", depends)
    added = set(chroot(root, "dpkg-query", "-W", "-f=${Package}\n").stdout.split()) - before
    p = chroot(root, "dpkg", "-i", *(f"/tmp/debs/{deb.name}" for deb in (debs["coord-node"], debs["coord"])))
    chroot(root, "apt-get", "check")
    return {"dpkg": p.stdout + p.stderr, "added": added}


# --- the tests --------------------------------------------------------------------------------------------------

def test_names_version_and_depends(debs):
    arch = run(["dpkg", "--print-architecture"]).stdout.strip()
    versions = set()
    for name, deb in debs.items():
        m = re.fullmatch(rf"{re.escape(name)}_([0-9][A-Za-z0-9.+~]*)_([a-z0-9-]+)\.deb", deb.name)
        assert m, f"{deb.name} is not {name}_<version>_<arch>.deb"
        assert m.group(2) == arch, f"{deb.name} is not for this machine's architecture {arch}"
        assert field(deb, "Version") == m.group(1) and field(deb, "Architecture") == arch and field(deb, "Package") == name
        versions.add(m.group(1))
        depends = field(deb, "Depends")
        assert "libzmq5" in depends and "libc6" in depends, depends
        assert not re.search(r"-dev\b|swift", depends), f"{name} depends on more than runtime libraries: {depends}"
    assert len(versions) == 1, versions
    node_depends = field(debs["coord-node"], "Depends")
    # libcamera (issue 37): the runtime of the distribution the node is built on (libcamera0.0.3 on Debian 12).
    for library in ("libavformat", "libavcodec", "libavutil", "libv4l-0", "libcamera"):
        assert library in node_depends, node_depends


def test_swift_runtime_is_static(debs, tmp_path):
    for name, deb in debs.items():
        run(["dpkg-deb", "-x", str(deb), str(tmp_path / name)])
        needed = run(["readelf", "-d", str(tmp_path / name / "usr/bin" / name)]).stdout
        libraries = re.findall(r"Shared library: \[([^\]]+)\]", needed)
        assert libraries and not [l for l in libraries if re.match(r"lib(swift|Foundation|dispatch|BlocksRuntime)", l)], \
            f"{name} loads {libraries}"


def test_install_adds_only_declared_dependencies(installed, root, debs):
    for name in debs:
        status = chroot(root, "dpkg-query", "-W", "-f=${Status}", name).stdout
        assert status == "install ok installed", f"{name}: {status}"
    # Nothing beyond the dependencies' closure: no recommends, no compiler or Swift toolchain.
    assert not [p for p in installed["added"] if p.endswith("-dev") or p.startswith(("swift", "gcc", "clang"))], \
        sorted(installed["added"])


def test_programs_run(installed, root, debs):
    version = chroot(root, "coord-node", "--version")
    upstream = field(debs["coord-node"], "Version").split("+")[0]
    assert version.stdout.strip().startswith(upstream), f"coord-node --version printed {version.stdout!r}"
    usage = chroot(root, "coord", "--help").stdout
    assert "USAGE: coord" in usage and "start-take" in usage, usage
    assert "USAGE: coord-node" in chroot(root, "coord-node", "--help").stdout


def test_completions_installed(installed, root):
    for program in ("coord", "coord-node"):
        for path in (f"usr/share/bash-completion/completions/{program}", f"usr/share/zsh/vendor-completions/_{program}",
                     f"usr/share/fish/vendor_completions.d/{program}.fish"):
            text = (root / path).read_text()
            assert program in text and len(text) > 500, path
    # bash can source its completion for coord (bash is in every root).
    chroot(root, "bash", "-c", "source /usr/share/bash-completion/completions/coord && complete -p coord")


def test_node_user_state_directory_and_conffile(installed, root):
    passwd = chroot(root, "getent", "passwd", "coord-node").stdout.strip().split(":")
    assert passwd[5] == "/var/lib/coord-node" and passwd[6] == "/usr/sbin/nologin", passwd
    assert int(passwd[2]) < 1000, f"coord-node is not a system user: uid {passwd[2]}"
    assert "video" in chroot(root, "id", "-nG", "coord-node").stdout.split()
    state = (root / "var/lib/coord-node").stat()
    uid, gid = int(passwd[2]), int(passwd[3])
    assert (state.st_uid, state.st_gid, stat.S_IMODE(state.st_mode)) == (uid, gid, 0o750)
    conffiles = chroot(root, "dpkg-query", "-W", "-f=${Conffiles}", "coord-node").stdout
    assert re.search(r"^ /etc/coord-node/node\.yaml [0-9a-f]{32}$", conffiles, re.M), conffiles
    assert (root / "etc/coord-node/authorized").is_dir()


def test_postinst_made_the_keys(installed, root):
    secret = root / "etc/coord-node/node.key_secret"
    public = root / "etc/coord-node/node.key"
    uid = int(chroot(root, "id", "-u", "coord-node").stdout)
    assert secret.exists() and public.exists(), installed["dpkg"]
    st = secret.stat()
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == uid, oct(st.st_mode)
    assert stat.S_IMODE(public.stat().st_mode) == 0o644
    assert re.search(r'public-key = "[^"]{40}"', public.read_text())
    assert re.search(r'secret-key = "[^"]{40}"', secret.read_text())
    # The service's user can read them: the shipped node file and keys load, and the node stops only at the cameras
    # the operator has not listed yet (exit 2, a configuration error, which the unit does not restart).
    p = chroot(root, "setpriv", "--reuid=coord-node", "--regid=coord-node", "--init-groups",
               "coord-node", "--config", "/etc/coord-node/node.yaml", check=False, timeout=60)
    assert p.returncode == 2 and "camera" in p.stderr, (p.returncode, p.stdout, p.stderr)


def test_nothing_was_started(installed, root):
    running = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                exe = os.readlink(proc / "exe")
            except OSError:
                continue
            if exe.startswith(str(root)):
                running.append(exe)
    assert not running, f"the installation left {running} running"
    assert not list((root / "var/lib/coord-node").iterdir()), "the state directory is not empty: something recorded"
    assert not (root / "etc/systemd/system/multi-user.target.wants/coord-node.service").exists(), \
        "the postinst enabled the service before the node file lists any camera"


def test_man_pages(installed, root):
    # man-db is added here for this check only (after the dependency checks above): the packages do not need it.
    apt(root, "install", "man-db")
    for program in ("coord", "coord-node"):
        page = chroot(root, "man", "-P", "cat", program).stdout
        assert program.upper() in page and "SYNOPSIS" in page, page[:400]
    node_page = chroot(root, "man", "-P", "cat", "coord-node").stdout
    coord_page = chroot(root, "man", "-P", "cat", "coord").stdout
    assert "--config" in node_page and "keys" in coord_page
    # What the parser cannot know: where the files are and what each exit status means.
    for page in (node_page, coord_page):
        assert "FILES" in page and "EXIT STATUS" in page, page[-1500:]
    assert "/etc/coord-node/node.yaml" in node_page and "node.example.yaml" in node_page
    assert "rig.example.yaml" in coord_page and re.search(r"\b3\s+Refused", coord_page), coord_page[-1500:]


def uncommented(text: str) -> str:
    """The example with every commented-out setting switched on, as an operator would uncomment it."""
    out = []
    for line in text.splitlines():
        m = re.match(r"^(\s*)# ?((?:[a-z_]+:|- |  ).*)$", line)
        if m and not line.lstrip("# ").startswith(("coord", "Every", "A ", "1.", "2.", "3.", "Before")):
            line = m.group(1) + m.group(2)
        out.append(line)
    return "\n".join(out) + "\n"


def test_the_example_files_are_installed_and_load_as_written(installed, root):
    """A box set up from the packages alone has annotated examples, and they load: as written and with every
    commented setting uncommented (metrics: 0.0.0.0:9710 once stopped the node as a "base-60 number"). The node
    then stops only at the camera this test root does not have (exit 1), never at the file (exit 2)."""
    node_example = root / "usr/share/doc/coord-node/examples/node.example.yaml"
    rig_example = root / "usr/share/doc/coord/examples/rig.example.yaml"
    assert node_example.exists() and rig_example.exists()
    variants = {"as-written": node_example.read_text(), "uncommented": uncommented(node_example.read_text())}
    assert "\nmetrics: 0.0.0.0:9710" in variants["uncommented"], variants["uncommented"]
    for name, text in variants.items():
        (root / f"tmp/{name}.yaml").write_text(text)
        p = chroot(root, "coord-node", "--config", f"/tmp/{name}.yaml", check=False, timeout=60)
        assert p.returncode == 1 and "/dev/v4l/by-id/" in p.stderr, (name, p.returncode, p.stderr)
    # The rig example loads and is carried out: its nodes do not exist here, so the first is named (exit 1, not 2).
    p = chroot(root, "coord", "plan", "--rig", "/usr/share/doc/coord/examples/rig.example.yaml", check=False, timeout=60)
    assert p.returncode == 1 and "pi-left" in p.stderr, (p.returncode, p.stderr)
    # One port convention: the examples, the packaged node file and the README agree on 5710.
    for text in (rig_example.read_text(), node_example.read_text(), (root / "etc/coord-node/node.yaml").read_text(),
                 (REPO / "README.md").read_text()):
        assert ":5710" in text and ":5555" not in text


def test_sysusers_conf_makes_the_same_user(debs, root, tmp_path):
    """With systemd installed the postinst runs systemd-sysusers on the shipped sysusers.d file: it makes the system
    user in the video group (checked on a copy of the clean root's accounts)."""
    sysusers = need("systemd-sysusers", "systemd")
    run(["dpkg-deb", "-x", str(debs["coord-node"]), str(tmp_path / "pkg")])
    (tmp_path / "etc").mkdir()
    for name in ("passwd", "group", "shadow", "gshadow"):
        shutil.copy2(root.parent / "clean-etc" / name, tmp_path / "etc" / name)
    shutil.copytree(tmp_path / "pkg/usr/lib/sysusers.d", tmp_path / "usr/lib/sysusers.d")
    run([sysusers, f"--root={tmp_path}", "coord-node.conf"])
    user = [l for l in (tmp_path / "etc/passwd").read_text().splitlines() if l.startswith("coord-node:")]
    assert user and user[0].split(":")[5:] == ["/var/lib/coord-node", "/usr/sbin/nologin"], user
    assert int(user[0].split(":")[2]) < 1000
    video = [l for l in (tmp_path / "etc/group").read_text().splitlines() if l.startswith("video:")]
    assert video and "coord-node" in video[0].split(":")[3].split(","), video


def test_systemd_analyze_verifies_the_unit(debs, tmp_path):
    """systemd-analyze verify, with the package unpacked into a root beside Debian's own units (the test root has no
    systemd): ExecStart's binary, the man page the unit's Documentation= names, every directive."""
    analyze = need("systemd-analyze", "systemd")
    units = Path("/lib/systemd/system")
    assert (units / "multi-user.target").exists(), "this machine has no systemd units: apt-get install systemd"
    shutil.copytree(units, tmp_path / "lib/systemd/system", symlinks=True)
    run(["dpkg-deb", "-x", str(debs["coord-node"]), str(tmp_path)])
    unit = tmp_path / "lib/systemd/system/coord-node.service"
    env = dict(os.environ, MANPATH=str(tmp_path / "usr/share/man"))
    p = run([analyze, "verify", f"--root={tmp_path}", str(unit)], check=False, env=env, cwd=tmp_path)
    complaints = [l for l in (p.stdout + p.stderr).splitlines() if l.strip()]
    assert p.returncode == 0 and not complaints, "\n".join(complaints) or f"exit {p.returncode}"
    text = unit.read_text()
    for directive in ("Type=notify", "WatchdogSec=10", "NotifyAccess=main", "User=coord-node", "Group=coord-node",
                      "StateDirectory=coord-node", "ExecStart=/usr/bin/coord-node --config /etc/coord-node/node.yaml",
                      "Restart=on-failure", "LimitRTPRIO="):
        assert re.search(rf"^{re.escape(directive)}", text, re.M), directive
    assert re.search(r"^SupplementaryGroups=.*\bvideo\b", text, re.M)
    assert not re.search(r"^(PrivateDevices|RestrictRealtime|DevicePolicy)=(yes|true|strict|closed)", text, re.M)


def test_lintian(lintian):
    """No lintian error or warning, except those overridden in the packages with a reason (deploy/debian)."""
    if lintian is None:
        need("lintian", "lintian")
    proc, out, err = lintian
    returncode = proc.wait(timeout=900)
    stdout, stderr = out.read_text(), err.read_text()
    tags = [l for l in stdout.splitlines() if re.match(r"[EW]: ", l)]
    assert returncode == 0 and not tags, "\n".join(tags) or stdout + stderr


def test_reinstall_keeps_keys_and_edited_node_file(installed, root, debs):
    """An upgrade (here: the same packages again) keeps the node's keys and the operator's node file."""
    secret = root / "etc/coord-node/node.key_secret"
    node_file = root / "etc/coord-node/node.yaml"
    key_before = secret.read_text()
    node_file.write_text(node_file.read_text() + "log_level: debug\n")
    p = chroot(root, "dpkg", "-i", *(f"/tmp/debs/{deb.name}" for deb in (debs["coord-node"], debs["coord"])))
    assert secret.read_text() == key_before, p.stdout
    assert node_file.read_text().endswith("log_level: debug\n")


def test_purge_removes_keys_and_conffile(installed, root):
    """Last: removing and purging. The node's secret goes with the package; the system user stays (Debian policy)."""
    chroot(root, "dpkg", "--purge", "coord-node", "coord")
    for path in ("etc/coord-node/node.key_secret", "etc/coord-node/node.key", "etc/coord-node/node.yaml",
                 "usr/bin/coord-node", "usr/bin/coord", "var/lib/coord-node"):
        assert not (root / path).exists(), f"{path} is left after purge"
    assert chroot(root, "getent", "passwd", "coord-node", check=False).returncode == 0
