"""Cost budgets and system pressure, end to end with real coord-node processes and the real `coord`:
a rig beyond its nodes' capacities is refused before anything records (exit 3) and `--fit` brings it under
budget; a node whose thermal zone heats up mid-take slows, then disables, its lowest-priority camera while
every other camera records untouched; a node whose disk fills is refused up front when that is predictable,
and when it happens anyway its files end cleanly, the take is partial (exit 4) and nothing else is lost.

Thermal zones are a fake sysfs tree the node reads under --system-root; the full disk is a real tmpfs of a
few MiB (mounting needs root; the test is skipped without it)."""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import Client, Node

ROOT = Path(__file__).resolve().parents[2]
COORD = Path(os.environ.get("COORD") or ROOT / ".build" / "debug" / "coord")

_spec = importlib.util.spec_from_file_location("check_take", ROOT / "scripts" / "check-take.py")
check_take = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_take)


def calibration(path: Path, disk_mb_s: float = 500, mjpeg_mpx_s: float = 400, mjpeg_bytes_per_px: float = 0.05) -> Path:
    """A stored calibration as `coord-node calibrate` writes it, with chosen capacities."""
    path.write_text(json.dumps({
        "format": "coord.calibration/1",
        "disk_write_bytes_per_s": disk_mb_s * 1e6,
        "encode": {
            "mjpeg": {"pixels_per_s": mjpeg_mpx_s * 1e6, "bytes_per_pixel": mjpeg_bytes_per_px},
            "ffv1": {"pixels_per_s": 60e6, "bytes_per_pixel": 0.5},
            "h264": {"pixels_per_s": 200e6, "bytes_per_pixel": 0.01},
        },
        "cpu_count": 2,
        "measured_at": "2026-11-21T00:00:00Z",
    }))
    return path


def start_node(tmp_path: Path, name: str, cameras: str, extra: list[str] | None = None) -> Node:
    d = tmp_path / name
    d.mkdir(parents=True, exist_ok=True)
    return Node(d, extra_args=["--name", name, "--synthetic", cameras, *(extra or [])])


def rig_file(path: Path, nodes: list[tuple[str, Node, str]], extra: str = "") -> Path:
    """nodes: (name, node, cameras YAML block or "")."""
    text = "version: 1\nnodes:\n"
    for name, node, cameras in nodes:
        text += f"  - name: {name}\n    endpoint: {node.endpoint}\n{cameras}"
    path.write_text(text + extra)
    return path


def run_coord(*args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([str(COORD), *map(str, args)], capture_output=True, text=True, timeout=timeout)


def last_line(text: str) -> str:
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1] if lines else ""


class Coordinator:
    """`coord start-take` in the background, its output (progress on stderr, summary on stdout) read line by line."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([str(COORD), *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, stdin=subprocess.DEVNULL)
        self.lines: "queue.Queue[str | None]" = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, pattern: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"coord never printed /{pattern}/; it printed: {self.seen[-15:]}"
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            assert line is not None, f"coord exited before printing /{pattern}/; it printed: {self.seen[-15:]}"
            self.seen.append(line)
            if re.search(pattern, line):
                return line

    def finish(self, timeout: float = 120) -> tuple[int, str]:
        """The exit code and everything printed after what wait_for consumed."""
        code = self.proc.wait(timeout=timeout)
        rest = []
        while (line := self.lines.get(timeout=10)) is not None:
            rest.append(line)
        self.seen += rest
        return code, "\n".join(rest)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def rows(take: Path, node: str, camera: str) -> list[list[str]]:
    lines = (take / node / f"{camera}.frames.csv").read_text().splitlines()
    return [l.split(",") for l in lines[1:] if l]


def assert_untouched(take: Path, manifest: dict, node: str, camera: str):
    """Every group present, none filled, the file plays and every frame is a new sensor frame."""
    who = f"{node}/{camera}"
    groups = manifest["groups"]
    r = rows(take, node, camera)
    assert len(r) == groups, f"{who}: {len(r)} rows for {groups} groups"
    assert [row[3] for row in r].count("dup") == 0, f"{who} has filled groups"
    mkv = take / node / f"{camera}.mkv"
    assert check_take.ffprobe_frames(mkv) == groups, f"{who}: ffprobe frame count differs from {groups}"
    counters = [s[1] for s in check_take.stripes(mkv) if s is not None]
    assert len(counters) == groups and all(b == a + 1 for a, b in zip(counters, counters[1:])), \
        f"{who}: its frames are not consecutive sensor frames"


# ---- what a node reports in the handshake ----

def test_the_handshake_carries_buses_calibration_disk_cpus_and_thermal_zones(tmp_path, zctx, pb):
    sysroot = thermal_tree(tmp_path / "sysroot", 52500)
    (sysroot / "proc").mkdir()
    (sysroot / "proc" / "loadavg").write_text("1.50 1.00 0.50 2/345 6789\n")
    (sysroot / "sys" / "devices" / "system" / "cpu").mkdir(parents=True)
    (sysroot / "sys" / "devices" / "system" / "cpu" / "online").write_text("0-2\n")
    node = start_node(tmp_path, "probe", "front@usb2,back@usb2,side",
                      ["--synthetic-bus", "usb2=480", "--system-root", str(sysroot),
                       "--calibration", str(calibration(tmp_path / "cal.json", disk_mb_s=123))])
    client = Client(zctx, node.endpoint, pb)
    try:
        reply = client.hello()
        assert {c.name: c.bus for c in reply.cameras} == {"front": "usb2", "back": "usb2", "side": ""}
        r = reply.resources
        assert [(b.id, b.kind, b.bandwidth_bytes_per_s) for b in r.buses] == [("usb2", "usb2", 48e6)]
        assert r.calibration.disk_write_bytes_per_s == 123e6
        assert {e.codec for e in r.calibration.encode} == {"mjpeg", "ffv1", "h264"}
        assert r.cpu_count == 3 and abs(r.cpu_load - 0.5) < 1e-9
        assert [(z.name, z.celsius, z.passive_celsius, z.critical_celsius) for z in r.thermal_zones] == [("cpu-thermal", 52.5, 70, 90)]
        st = os.statvfs(node.staging)
        assert 0 < r.free_disk_bytes <= st.f_blocks * st.f_frsize and r.disk_id and r.host_id
    finally:
        client.close()
        node.cleanup()


# ---- the demo's budget check with this machine's calibration ----

def test_a_demo_far_beyond_this_machine_is_refused_before_anything_records(tmp_path):
    takes = tmp_path / "takes"
    done = run_coord("demo", "--nodes", 1, "--cameras-per-node", 8, "--size", "3840x2160", "--fps", 60,
                     "--seconds", 2, "--takes-dir", takes, timeout=180)
    assert done.returncode == 3, done.stdout + done.stderr
    line = last_line(done.stderr)
    assert "node-1" in line and "hardware cost" in line, line
    assert re.search(r"(encoding|bus usb1|disk write)", line), line
    assert re.search(r"hardware cost of \d+(\.\d+)?", line), line
    assert not takes.exists() or not any(takes.iterdir()), "a refused demo leaves no take directory"


# ---- coord plan: each resource over budget, and --fit ----

@pytest.fixture
def three_rigs(tmp_path):
    """Three one-node rigs, each over budget on one resource only."""
    nodes = []
    try:
        generous = calibration(tmp_path / "generous.json")
        bus = start_node(tmp_path, "bus-node", "cam0@usb1,cam1@usb1,cam2@usb1",
                         ["--synthetic-bus", "usb1=480", "--calibration", str(generous)])
        nodes.append(bus)
        enc = start_node(tmp_path, "enc-node", "cam0", ["--calibration", str(calibration(tmp_path / "slow-enc.json", mjpeg_mpx_s=20))])
        nodes.append(enc)
        disk = start_node(tmp_path, "disk-node", "cam0,cam1",
                          ["--calibration", str(calibration(tmp_path / "slow-disk.json", disk_mb_s=4, mjpeg_bytes_per_px=0.2))])
        nodes.append(disk)
        take = "take:\n  size: 1280x720\n  fps: 30\n  codec: mjpeg\n"
        rigs = {
            "bus": rig_file(tmp_path / "bus.yaml", [("bus-node", bus,
                "    cameras:\n      - name: cam0\n        priority: 10\n      - name: cam1\n        priority: 5\n      - name: cam2\n")], take),
            "encoding": rig_file(tmp_path / "enc.yaml", [("enc-node", enc, "")], take),
            "disk write": rig_file(tmp_path / "disk.yaml", [("disk-node", disk,
                "    cameras:\n      - name: cam0\n        priority: 1\n      - cam1\n")], take),
        }
        yield rigs
    finally:
        for n in nodes:
            n.cleanup()


@pytest.mark.parametrize("resource,node", [("bus", "bus-node"), ("encoding", "enc-node"), ("disk write", "disk-node")])
def test_plan_refuses_each_resource_over_budget_and_fit_brings_it_under(three_rigs, resource, node):
    rig = three_rigs[resource]
    done = run_coord("plan", "--rig", rig)
    assert done.returncode == 3, done.stdout + done.stderr
    line = last_line(done.stderr)
    assert f"node {node}" in line and resource in line, line
    m = re.search(r"hardware cost of (\d+(?:\.\d+)?)", line)
    assert m and float(m.group(1)) >= 1.0, line
    assert "node cost" in done.stdout and "rig cost" in done.stdout, done.stdout

    fitted = run_coord("plan", "--rig", rig, "--fit")
    assert fitted.returncode == 0, fitted.stdout + fitted.stderr
    changes = re.findall(r"^  (\S+/\S+ .*)$", fitted.stdout.split("--fit proposes")[1].split("budget with the changes")[0], re.M)
    assert changes, fitted.stdout
    after = fitted.stdout.split("budget with the changes:")[1]
    cost = float(re.search(r"^rig\s+rig cost\s+(\d+(?:\.\d+)?)", after, re.M).group(1))
    assert cost < 1.0, after
    assert "nothing was changed" in fitted.stdout


def test_the_bus_fit_lowers_the_lowest_priority_camera_first(three_rigs):
    fitted = run_coord("plan", "--rig", three_rigs["bus"], "--fit")
    assert fitted.returncode == 0, fitted.stderr
    proposals = fitted.stdout.split("--fit proposes")[1].split("budget with the changes")[0]
    first = re.search(r"^  (\S+)", proposals.split("\n", 1)[1], re.M).group(1)
    assert first.startswith("bus-node/cam2"), proposals   # cam2 has priority 0, the lowest


def test_start_take_with_fit_records_the_fitted_plan(three_rigs, tmp_path):
    takes = tmp_path / "takes"
    refused = run_coord("start-take", "--rig", three_rigs["bus"], "--seconds", 2, "--takes-dir", takes)
    assert refused.returncode == 3 and "bus-node" in last_line(refused.stderr), refused.stderr
    assert not takes.exists() or not any(takes.iterdir())
    done = run_coord("start-take", "--rig", three_rigs["bus"], "--seconds", 2, "--takes-dir", takes, "--fit")
    assert done.returncode == 0, done.stdout + done.stderr
    take = next(takes.iterdir())
    manifest = json.loads((take / "manifest.json").read_text())
    fits = [e for e in manifest["events"] if e["kind"] == "fit"]
    assert fits and all(e["node"] == "bus-node" for e in fits), manifest["events"]
    assert manifest["budget"]["cost"] < 1.0 and manifest["budget"]["changes"], manifest["budget"]
    assert manifest["status"] == "complete"
    failures, _ = check_take.check(take)
    assert not failures, failures
    # Lowest priority first: cam2 (0), then cam1 (5), and the hero cam0 (10) only when that was not enough.
    assert [e["camera"] for e in fits] == ["cam2", "cam1", "cam0"], fits
    sizes = {c["camera"]: (c["width"], c["height"]) for c in manifest["cameras"]}
    assert set(sizes.values()) == {(640, 480)}, sizes


# ---- thermal pressure mid-take ----

def thermal_tree(root: Path, millidegrees: int) -> Path:
    zone = root / "sys" / "class" / "thermal" / "thermal_zone0"
    zone.mkdir(parents=True, exist_ok=True)
    (zone / "type").write_text("cpu-thermal\n")
    (zone / "trip_point_0_type").write_text("passive\n")
    (zone / "trip_point_0_temp").write_text("70000\n")
    (zone / "trip_point_1_type").write_text("critical\n")
    (zone / "trip_point_1_temp").write_text("90000\n")
    set_temp(root, millidegrees)
    return root


def set_temp(root: Path, millidegrees: int):
    path = root / "sys" / "class" / "thermal" / "thermal_zone0" / "temp"
    tmp = path.with_suffix(".new")
    tmp.write_text(f"{millidegrees}\n")
    tmp.replace(path)


def test_a_node_heating_mid_take_slows_then_disables_its_lowest_priority_camera(tmp_path):
    sysroot = thermal_tree(tmp_path / "sysroot", 45000)
    nodes = []
    coordinator = None
    try:
        hot = start_node(tmp_path, "hot", "hero,wide,detail", ["--system-root", str(sysroot)])
        nodes.append(hot)
        cool = start_node(tmp_path, "cool", "cam0")
        nodes.append(cool)
        rig = rig_file(tmp_path / "rig.yaml", [
            ("hot", hot, "    cameras:\n      - name: hero\n        priority: 10\n      - name: wide\n        priority: 0\n"
                         "      - name: detail\n        priority: 5\n"),
            ("cool", cool, "")], "pressure:\n  serious: slow\n  critical: disable\n  slow_record_every: 2\n")
        takes = tmp_path / "takes"
        coordinator = Coordinator("start-take", "--rig", rig, "--seconds", 12, "--takes-dir", takes)
        coordinator.wait_for(r"recording \d", timeout=60)
        set_temp(sysroot, 75000)   # past the passive trip: serious
        slowed = coordinator.wait_for(r"records one group in 2", timeout=15)
        assert "hot/wide" in slowed, slowed
        status = run_coord("status", "--rig", rig, timeout=30)
        assert "pressure serious: thermal zone cpu-thermal is at 75 °C" in status.stdout, status.stdout
        set_temp(sysroot, 82000)   # halfway to the critical trip: critical
        disabled = coordinator.wait_for(r"was disabled", timeout=15)
        assert "hot/wide" in disabled, disabled
        set_temp(sysroot, 60000)
        code, stderr = coordinator.finish()
        assert code == 4, stderr   # a camera stopped early: the take is partial, and says which
        assert "hot/wide" in last_line(stderr) and "disabled" in last_line(stderr), stderr
        take = next(takes.iterdir())
        manifest = json.loads((take / "manifest.json").read_text())
        report = json.loads((take / "sync-report.json").read_text())
        kinds = {(e["kind"], e["node"], e["camera"]) for e in manifest["events"]}
        assert ("camera-slowed", "hot", "wide") in kinds and ("camera-disabled", "hot", "wide") in kinds, kinds
        assert any(k == "pressure" and n == "hot" for k, n, _ in kinds), kinds
        report_kinds = {(e["kind"], e["camera"]) for e in report["events"]}
        assert ("camera-slowed", "wide") in report_kinds and ("camera-disabled", "wide") in report_kinds, report["events"]
        for node, camera in [("hot", "hero"), ("hot", "detail"), ("cool", "cam0")]:
            assert_untouched(take, manifest, node, camera)
        # The slowed camera: every second group repeats from the slow-down on, and it ends where it was disabled.
        slow_from = next(e for e in manifest["events"] if e["kind"] == "camera-slowed")
        off_from = next(e for e in manifest["events"] if e["kind"] == "camera-disabled")
        g_slow = int(re.search(r"from group (\d+)", slow_from["detail"]).group(1))
        g_off = int(re.search(r"from group (\d+)", off_from["detail"]).group(1))
        wide = rows(take, "hot", "wide")
        assert len(wide) == g_off, f"wide has {len(wide)} rows, disabled from group {g_off}"
        assert all(r[3] == "" for r in wide[:g_slow])
        assert all((r[3] == "dup") == ((i - g_slow) % 2 == 1) for i, r in enumerate(wide[g_slow:], start=g_slow)), wide[g_slow:g_slow + 6]
        assert check_take.ffprobe_frames(take / "hot" / "wide.mkv") == len(wide)
        cam = next(c for c in manifest["cameras"] if c["camera"] == "wide")
        assert cam["disabled"] is True and cam["held"] == sum(1 for r in wide if r[3] == "dup") and cam["dropped"] == 0, cam
    finally:
        if coordinator:
            coordinator.kill()
        for n in nodes:
            n.cleanup()


# ---- a filling disk ----

@pytest.fixture
def small_disk(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs as a node's disk needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture
def small_and_roomy(tmp_path, small_disk):
    """Two nodes with one camera each: `small` stages on the small disk, `roomy` on the test's own."""
    cal = calibration(tmp_path / "cal.json")
    nodes = []
    try:
        nodes.append(Node(small_disk, extra_args=["--name", "small", "--synthetic", "cam0", "--calibration", str(cal)]))
        nodes.append(start_node(tmp_path, "roomy", "cam0", ["--calibration", str(cal)]))
        yield rig_file(tmp_path / "rig.yaml", [("small", nodes[0], ""), ("roomy", nodes[1], "")])
    finally:
        for n in nodes:
            n.cleanup()


def test_a_disk_too_small_for_the_take_is_refused_up_front(tmp_path, small_and_roomy):
    rig = small_and_roomy
    takes = tmp_path / "takes"
    done = run_coord("start-take", "--rig", rig, "--seconds", 900, "--takes-dir", takes)
    assert done.returncode == 3, done.stdout + done.stderr
    line = last_line(done.stderr)
    assert "node small" in line and "can record only" in line and "disk" in line and "15 min" in line, line
    assert not takes.exists() or not any(takes.iterdir())
    plan = run_coord("plan", "--rig", rig)
    assert plan.returncode == 0 and re.search(r"^small\s+longest take\s+\d+ (s|min)", plan.stdout, re.M), plan.stdout


def test_a_disk_that_fills_mid_take_ends_that_nodes_files_cleanly(tmp_path, small_disk, small_and_roomy):
    rig = small_and_roomy
    coordinator = None
    try:
        takes = tmp_path / "takes"
        coordinator = Coordinator("start-take", "--rig", rig, "--seconds", 10, "--takes-dir", takes)
        # Every camera has written at least a second of frames (30 groups) before the small node's disk fills.
        coordinator.wait_for(r"frames ([3-9]\d|\d{3,})–", timeout=60)
        # Something else fills the node's disk, leaving less than it keeps to finalize its files.
        st = os.statvfs(small_disk)
        with open(small_disk / "filler", "wb") as f:
            f.write(b"\xff" * max(0, st.f_bavail * st.f_frsize - 6 * 1024 * 1024))
        coordinator.wait_for(r"node small: .*stopped its cameras", timeout=15)
        code, stderr = coordinator.finish()
        assert code == 4, stderr
        take = next(takes.iterdir())
        manifest = json.loads((take / "manifest.json").read_text())
        assert manifest["status"] == "partial"
        assert any(e["kind"] == "pressure-shutdown" and e["node"] == "small" for e in manifest["events"]), manifest["events"]
        # The full node's file ends cleanly: it plays, and frames.csv has a row for each of its frames.
        small = rows(take, "small", "cam0")
        assert 0 < len(small) < manifest["groups"]
        assert check_take.ffprobe_frames(take / "small" / "cam0.mkv") == len(small)
        decoded = subprocess.run(["ffmpeg", "-v", "error", "-i", str(take / "small" / "cam0.mkv"), "-f", "null", "-"],
                                 capture_output=True, text=True, timeout=60)
        assert decoded.returncode == 0 and not decoded.stderr.strip(), decoded.stderr
        # Nothing else is lost: the other node recorded every group, and every file matches its checksum.
        assert_untouched(take, manifest, "roomy", "cam0")
        failures, _ = check_take.check(take)
        # The only findings are the full node's shorter file; sizes, checksums and stripes all hold.
        expected = f"{len(small)} rows for {manifest['groups']} groups", f"counts {len(small)} frames"
        assert all(f.startswith("small/cam0:") and any(e in f for e in expected) for f in failures), failures
    finally:
        if coordinator:
            coordinator.kill()
