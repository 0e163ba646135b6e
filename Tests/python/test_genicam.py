"""GenICam cameras (CONTRACT §12) on real coord-node processes, through Aravis' fake GigE Vision camera
(`arv-fake-gv-camera-0.8`, aravis-tools): it speaks the real GVCP/GVSP protocol over UDP on loopback, so discovery,
feature access, streaming, lost packets and a vanished camera go through the same code a Basler or FLIR camera does.

The fake's frames sit where its own timer puts them (it cannot be triggered or steered precisely), so these tests
check completeness, drops and faults, not sync; docs/genicam.md says what real rigs use for that.

Every test here runs inside a network namespace of its own with only loopback up (`netns`, module-wide): the fake,
the nodes and the coordinator all talk over that loopback, and nothing a test sends (GigE Vision discovery is a
broadcast) reaches a network of the host. A node looks for GigE Vision cameras only on the interfaces it is told
(`--genicam-interface lo` here). A second fake needs a namespace of its own (two on one loopback collide on the GVCP
port): the two-node test runs each node with its fake inside a netlab namespace (scripts/netlab.py) within this one."""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import Node, node_binary
from test_v4l2_node import scripted_node_binary

ROOT = Path(__file__).resolve().parents[2]
COORD = Path(os.environ.get("COORD") or ROOT / ".build" / "debug" / "coord")
FAKE = shutil.which("arv-fake-gv-camera-0.8")
DEVICE = "Aravis-Fake-GV01"
GVCP_PORT = 3956

CLONE_NEWNET = 0x40000000

pytestmark = [
    pytest.mark.skipif(FAKE is None, reason="arv-fake-gv-camera-0.8 is missing (scripts/setup.sh installs aravis-tools)"),
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None,
                       reason="the GenICam tests run in a network namespace of their own: root and iproute2 (scripts/setup.sh)"),
]

_spec = importlib.util.spec_from_file_location("check_take", ROOT / "scripts" / "check-take.py")
check_take = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_take)


@pytest.fixture(scope="module", autouse=True)
def netns():
    """This module's tests in a new network namespace with only loopback up; the test process (and so every process it
    starts) is moved into it and back to where it was afterwards."""
    libc = ctypes.CDLL(None, use_errno=True)
    original = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.unshare(CLONE_NEWNET) != 0:
            pytest.skip(f"cannot make a network namespace: {os.strerror(ctypes.get_errno())}")
        try:
            subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=10)
            # No IPv6 on any link made here: its router solicitations would count as traffic on them.
            for key in ("all", "default"):
                Path(f"/proc/sys/net/ipv6/conf/{key}/disable_ipv6").write_text("1")
            yield
        finally:
            assert libc.setns(original, CLONE_NEWNET) == 0, os.strerror(ctypes.get_errno())
    finally:
        os.close(original)


def links() -> list[str]:
    """The network interfaces of the namespace this process is in."""
    return [line.split(":")[0].strip() for line in Path("/proc/net/dev").read_text().splitlines()[2:]]


def tx_packets(link: str) -> int:
    """Packets sent on `link` so far (this namespace's /proc/net/dev; sysfs shows the host's)."""
    for line in Path("/proc/net/dev").read_text().splitlines()[2:]:
        name, counters = line.split(":", 1)
        if name.strip() == link:
            return int(counters.split()[9])
    raise AssertionError(f"no link {link} here: {links()}")


def run(args, timeout=60) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def gvcp_bound(netns: str | None = None) -> bool:
    """Whether a fake camera's GVCP socket (UDP 127.0.0.1:3956) is bound, in `netns` or here."""
    prefix = ["ip", "netns", "exec", netns] if netns else []
    out = run(prefix + ["cat", "/proc/net/udp"], timeout=10).stdout
    return any(line.split()[1].upper() == f"0100007F:{GVCP_PORT:04X}" for line in out.splitlines()[1:] if len(line.split()) > 1)


@contextmanager
def fake_camera(*args: str, netns: str | None = None):
    """A fake GigE Vision camera on 127.0.0.1, answering once its GVCP port is bound; killed on exit."""
    if gvcp_bound(netns):
        pytest.skip("another GigE Vision camera already answers on 127.0.0.1 here")
    prefix = ["ip", "netns", "exec", netns] if netns else []
    proc = subprocess.Popen(prefix + [FAKE, "-i", "127.0.0.1", *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not gvcp_bound(netns):
            assert proc.poll() is None, f"the fake camera exited with {proc.returncode}"
            assert time.monotonic() < deadline, "the fake camera did not bind its GVCP port within 10 s"
            time.sleep(0.05)
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def genicam_node(tmp_path: Path, name: str, cameras: dict[str, str], synthetic: str = "", interfaces=("lo",)) -> Node:
    d = tmp_path / name
    d.mkdir(parents=True, exist_ok=True)
    args = ["--name", name, "--synthetic", synthetic]
    for interface in interfaces:
        args += ["--genicam-interface", interface]
    for camera, device in cameras.items():
        args += ["--genicam", f"{camera}={device}"]
    return Node(d, extra_args=args)


def rig(path: Path, nodes: dict[str, str], size: str = "320x240", fps: int = 30, extra: str = "") -> Path:
    path.write_text("version: 1\nnodes:\n" + "".join(f"  - name: {n}\n    endpoint: {e}\n" for n, e in nodes.items())
                    + f"take:\n  size: {size}\n  fps: {fps}\n  codec: ffv1\n{extra}")
    return path


def start_take(tmp_path: Path, rig_path: Path, seconds: float) -> subprocess.Popen:
    return subprocess.Popen([str(COORD), "start-take", "--rig", str(rig_path), "--seconds", str(seconds),
                             "--takes-dir", str(tmp_path / "takes")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL)


def finish(proc: subprocess.Popen, tmp_path: Path) -> tuple[int, str, Path | None]:
    out, err = proc.communicate(timeout=120)
    takes = tmp_path / "takes"
    dirs = sorted(takes.iterdir()) if takes.exists() else []
    return proc.returncode, out + err, (dirs[0] if dirs else None)


def rows(take_dir: Path, node: str, camera: str) -> list[list[str]]:
    lines = (take_dir / node / f"{camera}.frames.csv").read_text().splitlines()
    return [l.split(",") for l in lines[1:] if l]


# ---- one fake camera on loopback ----

@pytest.fixture(scope="module")
def loopback_take(netns, tmp_path_factory):
    """One 3 s take from `--genicam cam0=Aravis-Fake-GV01`; (returncode, output, take dir, node log)."""
    tmp_path = tmp_path_factory.mktemp("genicam-take")
    with fake_camera():
        node = genicam_node(tmp_path, "n1", {"cam0": DEVICE})
        try:
            # Load on the test host is not the camera's doing: the pressure policy must not slow it.
            extra = "pressure:\n  serious: none\n  critical: none\n"
            code, output, take_dir = finish(start_take(tmp_path, rig(tmp_path / "rig.yaml", {"n1": node.endpoint}, extra=extra), 3), tmp_path)
            log = node.stderr_tail(200)
        finally:
            node.cleanup()
    # The fake is gone before the other tests start theirs.
    return code, output, take_dir, log


def test_a_take_from_the_fake_camera_is_complete(loopback_take):
    code, output, take_dir, log = loopback_take
    assert code == 0, output + log
    manifest = json.loads((take_dir / "manifest.json").read_text())
    groups = manifest["groups"]
    assert groups >= 60, manifest
    assert check_take.ffprobe_frames(take_dir / "n1" / "cam0.mkv") == groups
    assert len(rows(take_dir, "n1", "cam0")) == groups
    assert "genicam=Aravis-Fake-GV01" in log and "format=BayerRG8" in log, log
    # Frames really came from the camera: on a quiet host none is repeated; on a loaded 2-core one (the suite runs
    # beside builds and VMs) the recorder falls behind at times, so only most of them are asked for.
    real = [r for r in rows(take_dir, "n1", "cam0") if r[3] != "dup"]
    assert len(real) >= groups // 3, (len(real), groups)


def test_the_manifest_names_the_camera_as_aravis_gige_vision(loopback_take):
    code, output, take_dir, _ = loopback_take
    assert code == 0, output
    [cam] = json.loads((take_dir / "manifest.json").read_text())["cameras"]
    assert cam["device"] == {"driver": "aravis", "protocol": "GigEVision", "vendor": "Aravis", "model": "Fake",
                             "serial": "GV01"}, cam


def test_list_cameras_shows_the_fake_with_its_formats_and_size_ranges():
    with fake_camera():
        done = run([node_binary(), "--list-cameras", "--genicam-interface", "lo"], timeout=60)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "GenICam: USB3 Vision, and GigE Vision looked for on lo only\n" in out, out
    assert f"genicam {DEVICE}\n  protocol: GigEVision at 127.0.0.1\n  vendor: Aravis\n  model: Fake\n" in out, out
    # The fake's Width and Height take any value from 1 to 2048: the ranges and steps, not a list of sizes.
    assert "  width: 1…2048, step 1\n  height: 1…2048, step 1\n" in out, out
    assert "    BayerRG8 (recorded)" in out and "    Mono16\n" in out, out
    assert f"1 GenICam camera(s) coord can record from: {DEVICE}; use --genicam NAME=DEVICE_ID" in out, out


def test_with_no_interface_named_no_gige_vision_camera_is_looked_for():
    with fake_camera():
        done = run([node_binary(), "--list-cameras"], timeout=60)
    assert done.returncode == 0, done.stderr
    assert "no GenICam cameras found; GigE Vision not looked for (name the interface its cameras are on with --genicam-interface IFACE)\n" in done.stdout, done.stdout
    assert f"genicam {DEVICE}" not in done.stdout, done.stdout


def test_a_gige_camera_with_no_interface_named_is_one_sentence_saying_to_name_it(tmp_path):
    with fake_camera():
        done = run([node_binary(), "--name", "n1", "--endpoint", "tcp://127.0.0.1:*", "--staging", tmp_path / "staging",
                    "--synthetic", "", "--genicam", f"cam0={DEVICE}"], timeout=60)
    lines = [l for l in done.stderr.splitlines() if l.strip()]
    assert done.returncode == 1 and len(lines) == 1, (done.returncode, lines)
    assert lines[0].startswith(f'coord-node: camera cam0: no GenICam camera answers as "{DEVICE}"'), lines
    assert "GigE Vision discovery is off: name the network interface its cameras are on with --genicam-interface IFACE" in lines[0], lines


@pytest.mark.parametrize("interface, needle", [
    ("nosuch0", "GenICam interface nosuch0 is not a network interface of this host (see ip link)"),
    ("a/b", '--genicam-interface entry "a/b" is not usable: a network interface name has 1 to 15 characters'),
])
def test_a_bad_genicam_interface_is_one_sentence(tmp_path, interface, needle):
    done = run([node_binary(), "--name", "n1", "--endpoint", "tcp://127.0.0.1:*", "--staging", tmp_path / "staging",
                "--synthetic", "", "--genicam", f"cam0={DEVICE}", "--genicam-interface", interface], timeout=60)
    lines = [l for l in done.stderr.splitlines() if l.strip()]
    assert done.returncode in (1, 2) and len(lines) == 1 and needle in lines[0], (done.returncode, lines)


def test_discovery_goes_out_on_the_named_interface_and_nowhere_else(tmp_path):
    # A second link beside loopback, as a rig's office network beside its camera NIC: a veth pair, addressed.
    subprocess.run(["ip", "link", "add", "office0", "type", "veth", "peer", "name", "office1"], check=True, timeout=10)
    try:
        for args in (["addr", "add", "10.77.0.1/24", "dev", "office0"], ["link", "set", "office0", "up"],
                     ["link", "set", "office1", "up"]):
            subprocess.run(["ip", *args], check=True, timeout=10)
        time.sleep(0.2)
        before = tx_packets("office0")
        with fake_camera():
            # A node told `lo` finds the fake, plans and records, and sends nothing on office0.
            node = genicam_node(tmp_path, "n1", {"cam0": DEVICE})
            try:
                code, output, take_dir = finish(start_take(tmp_path, rig(tmp_path / "rig.yaml", {"n1": node.endpoint}, size="512x512"), 1), tmp_path)
                assert code == 0, output + node.stderr_tail()
            finally:
                node.cleanup()
            listed = run([node_binary(), "--list-cameras", "--genicam-interface", "lo"], timeout=60)
            assert f"genicam {DEVICE}" in listed.stdout, listed.stdout
            assert tx_packets("office0") == before, "GigE Vision traffic left by office0 though only lo was named"
            # Told office0, the node broadcasts there: the counter above would have seen it. (The kernel hands a
            # copy of a broadcast to this host's own sockets too, so the fake on this host answers it all the same.)
            other = run([node_binary(), "--list-cameras", "--genicam-interface", "office0"], timeout=60)
        assert other.returncode == 0, other.stderr
        assert "GigE Vision looked for on office0 only" in other.stdout, other.stdout
        assert tx_packets("office0") >= before + 1
    finally:
        subprocess.run(["ip", "link", "del", "office0"], timeout=10)


def test_the_fake_records_at_its_own_512x512(tmp_path):
    # 512x512 is the fake's own size, inside its Width/Height ranges (1…2048) though in no list of standard sizes.
    with fake_camera():
        node = genicam_node(tmp_path, "n1", {"cam0": DEVICE})
        try:
            extra = "pressure:\n  serious: none\n  critical: none\n"
            code, output, take_dir = finish(start_take(tmp_path, rig(tmp_path / "rig.yaml", {"n1": node.endpoint}, size="512x512", extra=extra), 2), tmp_path)
            log = node.stderr_tail(200)
        finally:
            node.cleanup()
    assert code == 0, output + log
    manifest = json.loads((take_dir / "manifest.json").read_text())
    groups = manifest["groups"]
    mkv = take_dir / "n1" / "cam0.mkv"
    probe = run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height", "-of", "csv=p=0", mkv])
    assert probe.stdout.strip() == "512,512", probe.stdout + probe.stderr
    assert check_take.ffprobe_frames(mkv) == groups
    assert len([r for r in rows(take_dir, "n1", "cam0") if r[3] != "dup"]) >= groups // 3


def test_a_size_outside_the_cameras_ranges_is_one_sentence_naming_them(tmp_path):
    with fake_camera():
        node = genicam_node(tmp_path, "n1", {"cam0": DEVICE})
        try:
            done = run([COORD, "plan", "--rig", rig(tmp_path / "rig.yaml", {"n1": node.endpoint}, size="4096x512")], timeout=60)
        finally:
            node.cleanup()
    assert done.returncode != 0, done.stdout + done.stderr
    assert f"camera n1/cam0 ({DEVICE}) cannot be 4096x512: it takes width 1…2048 (step 1), height 1…2048 (step 1)." in done.stderr, done.stderr


def test_an_unknown_device_id_is_one_sentence(tmp_path):
    done = run([node_binary(), "--name", "n1", "--endpoint", "tcp://127.0.0.1:*", "--staging", tmp_path / "staging",
                "--synthetic", "", "--genicam", "cam0=Nobody-Here-42", "--genicam-interface", "lo"], timeout=60)
    assert done.returncode == 1 and done.stdout == "", (done.returncode, done.stdout, done.stderr)
    lines = [l for l in done.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith('coord-node: camera cam0: no GenICam camera answers as "Nobody-Here-42"'), lines


@pytest.mark.parametrize("body, needle", [
    ("cameras:\n  - {name: c, genicam: X-1, v4l2: /dev/video0}\n", "line 3: cameras[0] (camera c) has genicam and also v4l2"),
    ("cameras:\n  - {name: c, genicam: \"\"}\n", "line 3: cameras[0].genicam is empty"),
    ("cameras:\n  - {name: c, genicam: X-1, bus: usb1}\n", "cameras[0].bus is for synthetic cameras"),
    ("genicam_interfaces: [eth1, \"\"]\n", "genicam_interfaces[1] \"\" is not usable: it is empty"),
    ("genicam_interfaces: [\"eth 1\"]\n", "genicam_interfaces[0] \"eth 1\" is not usable: a network interface name has 1 to 15"),
])
def test_a_bad_genicam_entry_in_the_node_file_is_one_sentence(tmp_path, body, needle):
    path = tmp_path / "node.yaml"
    path.write_text("version: 1\n" + body)
    done = run([node_binary(), "--config", path], timeout=30)
    assert done.returncode == 2 and needle in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_node_file_names_a_genicam_camera(tmp_path):
    path = tmp_path / "node.yaml"
    path.write_text(f"version: 1\nname: n1\nendpoint: tcp://127.0.0.1:*\nstaging: {tmp_path / 'staging'}\n"
                    "genicam_interfaces: [lo]\ncameras:\n  - {name: cam0, genicam: Nobody-Here-43}\n")
    done = run([node_binary(), "--config", path], timeout=60)
    lines = [l for l in done.stderr.splitlines() if l.strip()]
    assert done.returncode == 1 and lines[-1].startswith('coord-node: camera cam0: no GenICam camera answers as "Nobody-Here-43"'), lines
    assert "GigE Vision looked on lo only" in lines[-1], lines


def test_the_node_file_names_the_genicam_interface_and_the_fake_is_found(tmp_path):
    path = tmp_path / "node.yaml"
    path.write_text(f"version: 1\nname: n1\nendpoint: tcp://127.0.0.1:*\nstaging: {tmp_path / 'staging'}\n"
                    f"genicam_interfaces: [lo]\ncameras:\n  - {{name: cam0, genicam: {DEVICE}}}\n")
    with fake_camera():
        proc = subprocess.Popen([str(node_binary()), "--config", str(path), "--parent-pid", str(os.getpid())],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = proc.stdout.readline()
        finally:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=30)
    assert line.startswith("READY tcp://127.0.0.1:"), (line, err)


def test_a_plan_the_gige_link_cannot_carry_is_refused_naming_the_link(tmp_path):
    with fake_camera():
        node = genicam_node(tmp_path, "n1", {"cam0": DEVICE})
        try:
            # 2048x2048 Bayer at 30 fps is 126 MB/s; a GigE link carries 112.5 (90 % of 1 Gb/s). 640x480 fits.
            big = run([COORD, "plan", "--rig", rig(tmp_path / "big.yaml", {"n1": node.endpoint}, size="2048x2048")], timeout=60)
            small = run([COORD, "plan", "--rig", rig(tmp_path / "small.yaml", {"n1": node.endpoint}, size="640x480")], timeout=60)
        finally:
            node.cleanup()
    assert big.returncode == 3, big.stdout + big.stderr
    assert "node n1 is over budget: bus gige-" in big.stderr and "(gige) needs" in big.stderr, big.stderr
    assert small.returncode == 0, small.stdout + small.stderr


# ---- faults ----

def test_lost_packets_are_dropped_frames_filled_and_the_file_is_intact(tmp_path):
    # 0.5 % of the fake's packets lost: about a quarter of its 53-packet frames arrive incomplete.
    with fake_camera("-r", "5"):
        node = genicam_node(tmp_path, "n1", {"cam0": DEVICE})
        try:
            # A dropped frame reads as a node not keeping up; here it is the link, so the pressure policy must not act.
            extra = "pressure:\n  serious: none\n  critical: none\n"
            code, output, take_dir = finish(start_take(tmp_path, rig(tmp_path / "rig.yaml", {"n1": node.endpoint}, extra=extra), 3), tmp_path)
            assert code == 0, output + node.stderr_tail()
        finally:
            node.cleanup()
    manifest = json.loads((take_dir / "manifest.json").read_text())
    groups = manifest["groups"]
    [cam] = manifest["cameras"]
    dups = [r for r in rows(take_dir, "n1", "cam0") if r[3] == "dup"]
    assert cam["dropped"] >= 1 and cam["dropped"] == len(dups), (cam, len(dups))
    assert len(rows(take_dir, "n1", "cam0")) == groups
    assert check_take.ffprobe_frames(take_dir / "n1" / "cam0.mkv") == groups
    done = run(["ffmpeg", "-v", "error", "-i", take_dir / "n1" / "cam0.mkv", "-f", "null", "-"], timeout=120)
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr


def test_a_vanished_camera_ends_with_its_event_and_the_other_records_on(tmp_path):
    with fake_camera() as fake:
        node = genicam_node(tmp_path, "n1", {"cam0": DEVICE}, synthetic="cam1")
        try:
            proc = start_take(tmp_path, rig(tmp_path / "rig.yaml", {"n1": node.endpoint}, extra="pressure:\n  serious: none\n  critical: none\n"), 6)
            # Kill the camera once its file has grown by a second of the take.
            csvs = node.staging
            deadline = time.monotonic() + 30
            while True:
                found = list(csvs.rglob("cam0.frames.csv"))
                if found and len(found[0].read_text().splitlines()) > 30:
                    break
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "the take wrote no cam0 rows within 30 s"
                time.sleep(0.05)
            fake.kill()
            code, output, take_dir = finish(proc, tmp_path)
        finally:
            node.cleanup()
    assert code == 4, output
    manifest = json.loads((take_dir / "manifest.json").read_text())
    assert manifest["status"] == "partial"
    ended = [e for e in manifest["events"] if e["kind"] == "camera-ended"]
    assert len(ended) == 1 and ended[0]["camera"] == "cam0" and DEVICE in ended[0]["detail"], manifest["events"]
    cam0 = rows(take_dir, "n1", "cam0")
    assert 0 < len(cam0) < manifest["groups"]
    assert check_take.ffprobe_frames(take_dir / "n1" / "cam0.mkv") == len(cam0)
    # The other camera records on to the end: real frames after cam0's last (a loaded host may repeat some).
    cam1 = rows(take_dir, "n1", "cam1")
    assert len(cam1) == manifest["groups"]
    assert len([r for r in cam1[len(cam0):] if r[3] != "dup"]) >= (manifest["groups"] - len(cam0)) // 2, cam1
    assert check_take.ffprobe_frames(take_dir / "n1" / "cam1.mkv") == manifest["groups"]


# ---- two fakes, two namespaces, two nodes ----

def test_two_fake_cameras_in_two_namespaces_on_two_nodes_record_one_take(tmp_path):
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("iptables") is None:
        pytest.skip("two fake cameras need network namespaces: root, iproute2 and iptables (scripts/setup.sh)")
    sys.path.insert(0, str(ROOT / "scripts"))
    import netlab
    port = 5710
    with netlab.Lab(nodes=2, delay_ms=0.1, jitter_ms=0.1, seed=3) as lab:
        procs = []
        try:
            endpoints = {}
            for i in (1, 2):
                ns = lab.netns(i)
                with_fake = lab.start_node(i, [FAKE, "-i", "127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                procs.append(with_fake)
                deadline = time.monotonic() + 10
                while not gvcp_bound(ns):
                    assert with_fake.poll() is None and time.monotonic() < deadline, f"the fake in {ns} did not start"
                    time.sleep(0.05)
                endpoint = f"tcp://{lab.node_address(i)}:{port}"
                node = lab.start_node(i, [str(node_binary()), "--name", f"n{i}", "--endpoint", endpoint,
                                          "--staging", str(tmp_path / f"staging-{i}"), "--synthetic", "",
                                          "--genicam", f"cam0={DEVICE}", "--genicam-interface", "lo",
                                          "--parent-pid", str(os.getpid()),
                                          "--insecure", "--log-level", "warning"],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                procs.append(node)
                line = netlab._read_line(node, 30.0)
                assert line == f"READY {endpoint}", f"node n{i} printed {line!r}"
                endpoints[f"n{i}"] = endpoint
            code, output, take_dir = finish(start_take(tmp_path, rig(tmp_path / "rig.yaml", endpoints), 3), tmp_path)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in procs:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
    assert code == 0, output
    manifest = json.loads((take_dir / "manifest.json").read_text())
    groups = manifest["groups"]
    assert {(c["node"], c["camera"]) for c in manifest["cameras"]} == {("n1", "cam0"), ("n2", "cam0")}
    for n in ("n1", "n2"):
        assert check_take.ffprobe_frames(take_dir / n / "cam0.mkv") == groups
        assert len(rows(take_dir, n, "cam0")) == groups


# ---- a camera bound to a trigger output (CONTRACT §17) ----

def trigger_features(netns: str | None = None) -> dict[str, str]:
    """The fake's FrameStart trigger features as arv-tool reads them (package aravis-tools-cli)."""
    arv_tool = shutil.which("arv-tool-0.8")
    if arv_tool is None:
        pytest.skip("arv-tool-0.8 is missing (package aravis-tools-cli)")
    done = run([arv_tool, "-a", "127.0.0.1", "control", "TriggerSelector", "TriggerMode", "TriggerSource", "TriggerActivation"], timeout=30)
    return dict(l.split(" = ", 1) for l in done.stdout.splitlines() if " = " in l)


def test_a_camera_bound_to_a_trigger_output_is_triggered_during_the_take_and_put_back_after(tmp_path):
    """The node file binds cam0 to output sync: while the take runs the camera's FrameStart trigger is On from Line0
    on the rising edge, and afterwards its features are as before. The fake offers only Line0/RisingEdge (and
    Software) and does not wait for Line0 pulses — it free-runs whatever its TriggerMode — so this checks the
    features the node sets and puts back, not the exposures; this machine has no GPIO chip, so the node is
    coord-node-scripted with `--trigger-log`: its output is a scripted line that logs each pulse (one per group)."""
    config = tmp_path / "node.yaml"
    config.write_text("version: 1\ntriggers:\n  - {name: sync, gpio: {chip: /dev/gpiochip0, line: 17}, width_us: 500}\n"
                      f"cameras:\n  - {{name: cam0, genicam: {DEVICE}, trigger: {{output: sync, source: Line0, activation: RisingEdge, delay_us: 10}}}}\n")
    with fake_camera():
        before = trigger_features()
        assert before["TriggerMode"] == "Off", before
        (tmp_path / "n1").mkdir()
        pulses = tmp_path / "pulses.log"
        node = Node(tmp_path / "n1", extra_args=["--name", "n1", "--synthetic", "", "--genicam-interface", "lo",
                                                 "--genicam", f"cam0={DEVICE}", "--config", str(config),
                                                 "--trigger-log", str(pulses)], binary=scripted_node_binary())
        try:
            proc = start_take(tmp_path, rig(tmp_path / "rig.yaml", {"n1": node.endpoint},
                                            extra="pressure:\n  serious: none\n  critical: none\n"), 4)
            # The take is running once its directory exists and the node has configured the camera.
            deadline = time.monotonic() + 30
            while "camera configured" not in node.stderr_tail(200):
                assert proc.poll() is None and time.monotonic() < deadline, node.stderr_tail(40)
                time.sleep(0.1)
            during = trigger_features()
            code, output, take_dir = finish(proc, tmp_path)
            log = node.stderr_tail(80)
        finally:
            node.cleanup()
        after = trigger_features()
    assert code == 0, (output, log)
    assert during["TriggerMode"] == "On" and during["TriggerSource"] == "Line0" and during["TriggerActivation"] == "RisingEdge", during
    assert during["TriggerSelector"] == "FrameStart", during
    assert after == before, (before, after)
    manifest = json.loads((take_dir / "manifest.json").read_text())
    assert len(pulses.read_text().splitlines()) == manifest["groups"] == manifest["cameras"][0]["trigger"]["pulses"], manifest
