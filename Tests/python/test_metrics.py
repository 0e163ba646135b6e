"""Metrics (issue 13 item 5, CONTRACT §7): two real nodes with `--metrics`, scraped by a real Prometheus (Debian's
`prometheus`, every second) through a real take; its query API gives each camera's frames counter equal (within one
scrape interval of frames) to the frames in the manifest. `promtool check metrics` passes on the exposition taken
mid-take; every name starts with coord_node_ and per-camera series carry node and camera labels."""
from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import Node
from test_budget_pressure import COORD

for _tool in ("prometheus", "promtool"):
    if shutil.which(_tool) is None:
        pytest.skip(f"`{_tool}` is not installed (Debian's prometheus package; scripts/setup.sh installs it)",
                    allow_module_level=True)

METRICS_RE = re.compile(r"^METRICS (http://127\.0\.0\.1:\d+/metrics)$")
FPS = 30


def metrics_url(node: Node) -> str:
    line = node.stdout_lines.get(timeout=20)
    m = METRICS_RE.match(line or "")
    assert m, f"expected METRICS http://…/metrics after READY, got {line!r}; stderr: {node.stderr_tail()}"
    return m.group(1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


class Prometheus:
    def __init__(self, tmp_path: Path, targets: list[str]):
        self.port = free_port()
        config = tmp_path / "prometheus.yml"
        config.write_text("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n"
                          "  - job_name: coord-node\n    static_configs:\n"
                          f"      - targets: [{', '.join(repr(t) for t in targets)}]\n")
        self.log = open(tmp_path / "prometheus.log", "wb")
        self.proc = subprocess.Popen(["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                      f"--web.listen-address=127.0.0.1:{self.port}"], stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 30
        while True:
            try:
                if "Ready" in get(f"http://127.0.0.1:{self.port}/-/ready"):
                    break
            except OSError:
                pass
            assert self.proc.poll() is None and time.monotonic() < deadline, "Prometheus did not become ready"
            time.sleep(0.2)

    def query(self, expr: str) -> list[dict]:
        body = json.loads(get(f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})))
        assert body["status"] == "success", body
        return body["data"]["result"]

    def targets_up(self) -> int:
        return sum(1 for r in self.query("up") if r["value"][1] == "1")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=20)
        self.log.close()


def test_prometheus_scrapes_two_nodes_through_a_take(tmp_path):
    nodes = []
    try:
        for name, cams in (("left", "cam0,cam1"), ("right", "cam0")):
            nodes.append(Node(tmp_path / name, extra_args=["--name", name, "--synthetic", cams, "--metrics", "127.0.0.1:0"]))
        urls = [metrics_url(n) for n in nodes]
        prom = Prometheus(tmp_path, [urllib.parse.urlparse(u).netloc for u in urls])
        try:
            deadline = time.monotonic() + 20
            while prom.targets_up() < 2:
                assert time.monotonic() < deadline, "Prometheus never scraped both nodes"
                time.sleep(0.5)
            rig = tmp_path / "rig.yaml"
            rig.write_text("version: 1\nnodes:\n" + "".join(f"  - name: {n}\n    endpoint: {node.endpoint}\n"
                                                            for n, node in zip(("left", "right"), nodes)))
            takes = tmp_path / "takes"
            proc = subprocess.Popen([str(COORD), "start-take", "--rig", str(rig), "--seconds", "6", "--size", "320x240",
                                     "--fps", str(FPS), "--takes-dir", str(takes)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            # Mid-take: the exposition is valid Prometheus text, with per-camera series.
            deadline = time.monotonic() + 60
            while "coord_node_camera_frames_total" not in (text := get(urls[0])):
                assert proc.poll() is None and time.monotonic() < deadline, "no camera series while recording"
                time.sleep(0.3)
            lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
            assert lint.returncode == 0, lint.stdout + lint.stderr
            samples = [l for l in text.splitlines() if l and not l.startswith("#")]
            assert all(l.startswith("coord_node_") for l in samples), samples
            assert all('node="left"' in l and 'camera="' in l for l in samples if l.startswith("coord_node_camera_")), samples
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            take = next(d for d in takes.iterdir() if d.is_dir())
            manifest = json.loads((take / "manifest.json").read_text())
            # Prometheus' own view of the counters, once every series has a sample scraped after the take ended.
            ended = time.time()
            deadline = time.monotonic() + 20
            while True:
                results = prom.query("timestamp(coord_node_camera_frames_total)")
                if results and all(float(r["value"][1]) > ended for r in results):
                    break
                assert time.monotonic() < deadline, f"no scrape after the take's end: {results}"
                time.sleep(0.2)
            found = {(r["metric"]["node"], r["metric"]["camera"]): float(r["value"][1])
                     for r in prom.query("coord_node_camera_frames_total")}
            expected = {(c["node"], c["camera"]): c["frames"] for c in manifest["cameras"]}
            assert set(found) == set(expected), (found, expected)
            for key, frames in expected.items():
                assert abs(found[key] - frames) <= FPS, (key, found[key], frames)
            served = {r["metric"]["node"]: float(r["value"][1]) for r in prom.query("coord_node_collection_served_bytes_total")}
            sizes = {}
            for c in manifest["cameras"]:
                sizes[c["node"]] = sizes.get(c["node"], 0) + sum(f["bytes"] for f in c["files"])
            for node, size in sizes.items():
                assert served[node] >= size, (node, served[node], size)
            takes_done = {r["metric"]["node"]: float(r["value"][1]) for r in prom.query("coord_node_takes_recorded_total")}
            assert takes_done == {"left": 1.0, "right": 1.0}, takes_done
        finally:
            prom.stop()
    finally:
        for n in nodes:
            n.cleanup()


def test_a_bad_metrics_address_is_one_sentence(tmp_path):
    from conftest import node_binary
    r = subprocess.run([str(node_binary()), "--name", "x", "--endpoint", "tcp://127.0.0.1:*", "--staging", str(tmp_path),
                        "--synthetic", "cam0", "--metrics", "nowhere"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--metrics must be HOST:PORT" in r.stderr, r.stderr


def test_metrics_beyond_loopback_are_warned_about(tmp_path):
    """/metrics has no keys: served on a network address, anyone there reads it, so the node says so (as the console
    does for a LAN address); on loopback it says nothing."""
    wide = Node(tmp_path / "wide", extra_args=["--metrics", "0.0.0.0:0"])
    narrow = Node(tmp_path / "narrow", extra_args=["--metrics", "127.0.0.1:0"])
    try:
        warnings = [l for l in wide.stderr_tail(400).splitlines() if "/metrics listens on" in l]
        assert len(warnings) == 1, wide.stderr_tail()
        assert "0.0.0.0" in warnings[0] and "without keys" in warnings[0], warnings[0]
        assert "/metrics listens on" not in narrow.stderr_tail(400), narrow.stderr_tail()
    finally:
        wide.cleanup()
        narrow.cleanup()
