"""The console and the take it is recording (issue 34, CONTRACT §14), with real coord-node processes, the real
`coord console --rig`, real signals and the take read back from disk:

- SIGINT or SIGTERM to a console while an open-ended take records stops every camera on one group, collects,
  writes the manifest and report, and only then exits; every node is idle after it and the take checks;
- a second signal abandons the take with one sentence naming the command that finishes it, which then does;
- a console started again over a rig that records shows that take (true elapsed time, never `partial`) and its
  Stop stops it and collects it;
- an open-ended `start-take` killed with SIGKILL, then `coord stop-take` and `coord collect`, ends complete with
  the groups it really recorded, the same when collected again, and `coord deliver` accepts it."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from test_budget_pressure import COORD, Coordinator, check_take, rig_file, run_coord, start_node
from test_console import ConsoleDemo, read_console_line
from test_console_page import CHROMEDRIVER, CHROMIUM, browser, wait  # noqa: F401


@pytest.fixture
def rig(tmp_path):
    nodes = [start_node(tmp_path, "left", "cam0"), start_node(tmp_path, "right", "cam0")]
    path = rig_file(tmp_path / "rig.yaml", [("left", nodes[0], ""), ("right", nodes[1], "")],
                    "take:\n  fps: 25\n  size: 320x240\n")
    yield path
    for n in nodes:
        n.kill()


class RigConsole:
    """`coord console --rig` on a free port, its stderr kept in a file."""

    def __init__(self, tmp_path: Path, rig: Path, label: str = "console"):
        self.takes = tmp_path / "takes"
        self.stderr_path = tmp_path / f"{label}.err"
        self.proc = subprocess.Popen([str(COORD), "console", "--rig", str(rig), "--listen", "127.0.0.1:0",
                                      "--takes-dir", str(self.takes)],
                                     stdout=subprocess.PIPE, stderr=open(self.stderr_path, "w"), text=True)
        self.base, self.token = read_console_line(self.proc)

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def get(self, path: str):
        request = urllib.request.Request(self.base + path, headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(request, timeout=10) as r:
            return json.loads(r.read())

    def post(self, path: str, body: dict | None = None):
        request = urllib.request.Request(self.base + path, data=json.dumps(body or {}).encode(), method="POST",
                                         headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def current(self, until, timeout: float = 60, what: str = "the take"):
        deadline = time.monotonic() + timeout
        current = None
        while time.monotonic() < deadline:
            current = self.get("/api/takes")["current"]
            if current and until(current):
                return current
            time.sleep(0.1)
        raise AssertionError(f"{what} never came: {current}; console said: {self.stderr[-2000:]}")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def rig_states(rig: Path) -> str:
    r = run_coord("status", "--rig", rig)
    return r.stdout + r.stderr


def only_take(takes: Path) -> Path:
    dirs = [d for d in takes.iterdir() if d.is_dir()]
    assert len(dirs) == 1, [d.name for d in dirs]
    return dirs[0]


def assert_complete(take: Path, *, at_least_s: float, at_most_s: float) -> dict:
    manifest = json.loads((take / "manifest.json").read_text())
    assert manifest["status"] == "complete", manifest["events"]
    seconds = manifest["groups"] * manifest["frame_period_us"] / 1e6
    assert at_least_s <= seconds <= at_most_s, f"{seconds} s recorded"
    assert all(c["frames"] == manifest["groups"] for c in manifest["cameras"]), manifest["cameras"]
    failures, _ = check_take.check(take)
    assert not failures, failures
    report = json.loads((take / "sync-report.json").read_text())
    assert report["groups"] == manifest["groups"]
    return manifest


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_to_the_console_stops_collects_and_then_exits(tmp_path, rig, sig):
    console = RigConsole(tmp_path, rig)
    try:
        status, take = console.post("/api/takes", {"name": "signalled"})
        assert status == 202, take
        recording = console.current(lambda t: t["state"] == "recording" and t["elapsed_s"] > 1.5, what="two seconds recorded")
        console.proc.send_signal(sig)
        code = console.proc.wait(timeout=90)
        assert code == 0, console.stderr[-3000:]
    finally:
        console.kill()
    assert "stopping take" in console.stderr and "interrupt again to abandon" in console.stderr, console.stderr[-2000:]
    take = only_take(console.takes)
    assert take.name == recording["take_id"]
    manifest = assert_complete(take, at_least_s=1.5, at_most_s=30)
    assert (take / "sync-report.html").exists()
    assert any(e["kind"] == "operator-stop" for e in manifest["events"]) or manifest["groups"] > 0
    states = rig_states(rig)
    assert "recording" not in states and "armed" not in states, states


def test_a_second_signal_abandons_the_take_and_names_the_command_that_finishes_it(tmp_path, rig):
    console = RigConsole(tmp_path, rig)
    try:
        status, _ = console.post("/api/takes", {"name": "abandoned"})
        assert status == 202
        console.current(lambda t: t["state"] == "recording" and t["elapsed_s"] > 1, what="a second recorded")
        console.proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 10
        while "interrupt again" not in console.stderr:
            assert time.monotonic() < deadline, console.stderr[-2000:]
            time.sleep(0.05)
        console.proc.send_signal(signal.SIGINT)
        code = console.proc.wait(timeout=30)
    finally:
        console.kill()
    assert code == 130, console.stderr[-2000:]
    said = [l for l in console.stderr.splitlines() if "interrupted again" in l]
    assert len(said) == 1 and f"coord collect --rig {rig}" in said[0], console.stderr[-2000:]
    take = only_take(console.takes)
    # What the sentence says finishes it does: collect refuses, naming the node, only while the nodes still record.
    deadline = time.monotonic() + 60
    while (r := run_coord("collect", "--rig", rig, take)).returncode != 0:
        assert "still recording" in r.stderr, r.stderr
        assert time.monotonic() < deadline, r.stderr
        time.sleep(0.5)
    assert_complete(take, at_least_s=1, at_most_s=30)


@pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason="chromium and chromium-driver are not installed (scripts/setup.sh installs them)")
def test_a_console_started_again_adopts_the_take_its_rig_records_and_its_page_stops_it(tmp_path, rig, browser):  # noqa: F811
    first = RigConsole(tmp_path, rig, "first")
    try:
        status, _ = first.post("/api/takes", {"name": "orphan"})
        assert status == 202
        started = first.current(lambda t: t["state"] == "recording" and t["elapsed_s"] > 1, what="a second recorded")
    finally:
        first.kill()  # SIGKILL: the nodes go on recording the open-ended take
    assert "recording" in rig_states(rig)

    second = RigConsole(tmp_path, rig, "second")
    try:
        adopted = second.current(lambda t: t["take_id"] == started["take_id"], timeout=30, what="the adopted take")
        assert adopted["state"] == "recording" and adopted["name"] == "orphan", adopted
        later = second.current(lambda t: t["elapsed_s"] > adopted["elapsed_s"] + 0.5, timeout=10, what="elapsed time moving")
        # Its elapsed time is the rig's, counted from group 0 when the first console started it.
        assert later["elapsed_s"] > started["elapsed_s"]
        listed = [t for t in second.get("/api/takes")["takes"] if t["take_id"] == started["take_id"]]
        assert listed and listed[0]["status"] in {"recording", "stopping"} and listed[0]["report"] is None, listed
        status, refused = second.post("/api/takes", {"name": "another"})
        assert status == 409 and started["take_id"] in refused["error"] and "stop" in refused["error"], refused
        # The page shows it recording, with its Stop enabled (Start is not), and its Stop stops it.
        from selenium.webdriver.common.by import By
        browser.get(f"{second.base}/?token={second.token}")
        wait(browser, lambda d: started["take_id"] in d.find_element(By.ID, "take-state").text
             and "recording" in d.find_element(By.ID, "take-state").text, what="the adopted take on the page")
        assert browser.find_element(By.ID, "take-start").get_attribute("disabled") is not None
        wait(browser, lambda d: d.find_element(By.ID, "take-stop").is_enabled(), what="Stop enabled")
        browser.find_element(By.ID, "take-stop").click()
        wait(browser, lambda d: "done" in d.find_element(By.ID, "take-state").text, timeout=90, what="the take done on the page")
        done = second.current(lambda t: t["state"] in {"done", "partial", "failed"}, timeout=90, what="the end of the take")
        assert done["state"] == "done", done
        assert done["report"], done
    finally:
        second.proc.send_signal(signal.SIGINT)
        try:
            second.proc.wait(timeout=30)
        finally:
            second.kill()
    take = only_take(second.takes)
    assert_complete(take, at_least_s=later["elapsed_s"], at_most_s=60)
    states = rig_states(rig)
    assert "recording" not in states, states


def test_an_orphaned_open_ended_take_is_finished_by_stop_take_and_collect(tmp_path, rig):
    takes = tmp_path / "takes"
    session = Coordinator("start-take", "--rig", rig, "--takes-dir", takes, "--name", "orphan")
    try:
        # A second of footage at least (the take's length is whatever it records), as its progress line says.
        session.wait_for(r"recording (?:[1-9]|\d\d+)\.\d s \(until Ctrl-C\)", timeout=60)
        session.proc.send_signal(signal.SIGKILL)
        session.proc.wait(timeout=10)
    finally:
        session.kill()
    take = only_take(takes)
    planned = json.loads((take / "manifest.json").read_text())
    assert planned["groups"] == 24 * 3600 * 25, planned["groups"]  # the interim manifest: the open-ended plan
    r = run_coord("stop-take", "--rig", rig)
    assert r.returncode == 0, r.stderr
    last = int(re.search(r"every camera stops after group (\d+)", r.stdout).group(1))
    deadline = time.monotonic() + 60
    while (r := run_coord("collect", "--rig", rig, take)).returncode != 0:
        assert "still recording" in r.stderr, r.stdout + r.stderr
        assert time.monotonic() < deadline, r.stderr
        time.sleep(0.5)
    manifest = assert_complete(take, at_least_s=1, at_most_s=60)
    assert manifest["groups"] == last + 1 and manifest["planned_groups"] == planned["groups"]
    assert "collection incomplete" not in r.stdout, r.stdout
    page = (take / "sync-report.html").read_text()
    assert "24.0 h" not in page
    # Collected again: the same take, nothing changed.
    again = run_coord("collect", "--rig", rig, take)
    assert again.returncode == 0, again.stderr
    assert json.loads((take / "manifest.json").read_text())["groups"] == manifest["groups"]
    delivered = run_coord("deliver", take, "--to", "mhl", timeout=300)
    assert delivered.returncode == 0, delivered.stderr


def test_a_signal_to_the_demo_console_keeps_the_take_it_records(tmp_path):
    demo = ConsoleDemo(tmp_path, nodes=2, cameras=1)
    try:
        status, take = demo.send("POST", "/api/takes", {"name": "demo"})
        assert status == 202, take
        demo.wait_take({"recording"})
        deadline = time.monotonic() + 30
        while demo.get("/api/takes")["current"]["elapsed_s"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        demo.proc.send_signal(signal.SIGTERM)
        code = demo.proc.wait(timeout=90)
    finally:
        if demo.proc.poll() is None:
            demo.proc.kill()
    assert code == 0, demo.stderr.read_text()[-2000:]
    assert_complete(only_take(demo.takes), at_least_s=1, at_most_s=30)
