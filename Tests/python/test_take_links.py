"""Nothing in a take directory is trusted to be a plain file (CONTRACT §14, issue 34): `coord deliver`, `coord report`,
`coord collect` and the console refuse a symbolic link, FIFO or device anywhere in a take with one sentence naming
the path, never read or write through a link, and never block on a FIFO. Real `coord demo` takes and real processes;
every "outside" folder is checked afterwards for anything written into it."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COORD = os.environ.get("COORD", str(ROOT / ".build/debug/coord"))


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([COORD, *map(str, args)], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """A 2-node 1-second demo take, collected, nothing delivered yet."""
    takes = tmp_path_factory.mktemp("links") / "takes"
    proc = run("demo", "--takes-dir", takes, "--seconds", "1", "--nodes", "2", timeout=300)
    assert proc.returncode == 0, proc.stderr
    [take] = [d for d in takes.iterdir() if d.is_dir()]
    return take


@pytest.fixture
def take(recorded, tmp_path) -> Path:
    """A fresh copy of the recorded take, links kept as links."""
    return Path(shutil.copytree(recorded, tmp_path / recorded.name, symlinks=True))


@pytest.fixture
def outside(tmp_path) -> Path:
    d = tmp_path / "outside"
    d.mkdir()
    return d


def cameras(take: Path) -> list[dict]:
    return json.loads((take / "manifest.json").read_text())["cameras"]


def one_sentence(stderr: str) -> str:
    lines = [l for l in stderr.strip().splitlines() if l.startswith("coord:")]
    assert len(lines) == 1, stderr
    return lines[0]


def snapshot(d: Path) -> dict:
    return {p.relative_to(d).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns) for p in d.rglob("*")}


def test_a_camera_file_swapped_for_a_link_to_another_cameras_is_refused(take):
    first, second = cameras(take)[0], cameras(take)[1]
    assert first["node"] != second["node"]
    mkv = take / first["files"][0]["path"]
    mkv.unlink()
    mkv.symlink_to(take / second["files"][0]["path"])
    history = snapshot(take / "ascmhl")
    for what in ("mov", "mhl"):
        proc = run("deliver", take, "--to", what)
        assert proc.returncode == 2, proc.stderr
        sentence = one_sentence(proc.stderr)
        assert first["files"][0]["path"] in sentence and "symbolic link" in sentence, sentence
    # No .mov was made from the other camera's pictures, and no ASC MHL generation left the file out.
    assert not (take / "deliver").exists() or not list((take / "deliver").glob("*.mov"))
    assert snapshot(take / "ascmhl") == history


@pytest.mark.parametrize("folder,items", [("deliver", "mov"), ("ascmhl", "mhl")])
def test_a_linked_deliver_or_ascmhl_folder_is_refused_and_nothing_is_written_outside(take, outside, folder, items):
    if (take / folder).exists():
        shutil.rmtree(take / folder)
    (take / folder).symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)
    proc = run("deliver", take, "--to", items)
    assert proc.returncode == 2, proc.stderr
    sentence = one_sentence(proc.stderr)
    assert f"{take}/{folder}" in sentence and "symbolic link" in sentence, sentence
    assert snapshot(outside) == before == {}


def test_a_frames_table_linked_to_etc_passwd_is_refused_unread(take):
    table = take / cameras(take)[0]["files"][0]["path"].replace(".mkv", ".frames.csv")
    table.unlink()
    table.symlink_to("/etc/passwd")
    proc = run("deliver", take, "--to", "mov")
    assert proc.returncode == 2, proc.stderr
    sentence = one_sentence(proc.stderr)
    assert table.relative_to(take).as_posix() in sentence and "symbolic link" in sentence, sentence
    assert "root:" not in proc.stderr + proc.stdout
    assert not (take / "deliver").exists() or not list((take / "deliver").glob("*.mov"))
    # coord report refuses the take the same way, and quotes nothing of the file.
    for args in ((), ("--json",), ("--html", str(take.parent / "page.html"))):
        proc = run("report", take, *args)
        assert proc.returncode == 2, proc.stderr
        sentence = one_sentence(proc.stderr)
        assert "frames.csv" in sentence and "symbolic link" in sentence, sentence
        assert "root:" not in proc.stderr + proc.stdout
    assert not (take.parent / "page.html").exists()


def test_a_linked_manifest_is_refused_by_deliver_and_report(take, outside):
    (outside / "manifest.json").write_bytes((take / "manifest.json").read_bytes())
    (take / "manifest.json").unlink()
    (take / "manifest.json").symlink_to(outside / "manifest.json")
    for args in (("deliver", take), ("report", take)):
        proc = run(*args)
        assert proc.returncode == 2, proc.stderr
        assert "manifest.json is a symbolic link" in one_sentence(proc.stderr), proc.stderr


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "dev-null"])
def test_a_fifo_or_device_in_place_of_a_camera_file_does_not_hang_deliver(take, kind):
    mkv = take / cameras(take)[1]["files"][0]["path"]
    mkv.unlink()
    if kind == "fifo":
        os.mkfifo(mkv)
    else:
        mkv.symlink_to("/dev/zero" if kind == "dev-zero" else "/dev/null")
    try:
        proc = run("deliver", take, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"coord deliver blocked on a {kind} in place of {mkv.name}")
    assert proc.returncode == 2, proc.stderr
    sentence = one_sentence(proc.stderr)
    assert mkv.relative_to(take).as_posix() in sentence, sentence
    assert ("FIFO" if kind == "fifo" else "symbolic link") in sentence, sentence
    proc = run("report", take, timeout=60)
    assert proc.returncode == 2 and mkv.name in one_sentence(proc.stderr), proc.stderr


def test_a_fifo_elsewhere_in_the_take_stops_the_mhl_walk_with_a_sentence(take):
    os.mkfifo(take / "notes")
    proc = run("deliver", take, "--to", "mhl", timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert f"{take}/notes is a FIFO" in one_sentence(proc.stderr), proc.stderr


def test_an_unharmed_copy_still_delivers(take):
    proc = run("deliver", take, "--to", "mov,mhl", timeout=300)
    assert proc.returncode == 0, proc.stderr


def test_collect_does_not_verify_or_write_through_a_linked_node_folder(tmp_path, outside):
    from test_budget_pressure import rig_file, start_node
    nodes = [start_node(tmp_path, "left", "cam0"), start_node(tmp_path, "right", "cam0")]
    try:
        rig = rig_file(tmp_path / "rig.yaml", [("left", nodes[0], ""), ("right", nodes[1], "")],
                       "collect:\n  after_confirm: keep\n")
        takes = tmp_path / "takes"
        proc = run("start-take", "--rig", rig, "--seconds", "1", "--takes-dir", takes, timeout=300)
        assert proc.returncode == 0, proc.stderr
        [take] = [d for d in takes.iterdir() if d.is_dir()]
        # The node's folder moved outside and linked back: its files are byte for byte the verified ones.
        shutil.move(take / "left", outside / "left")
        (take / "left").symlink_to(outside / "left", target_is_directory=True)
        before = snapshot(outside)
        proc = run("collect", "--rig", rig, take, timeout=300)
        assert proc.returncode != 0, proc.stderr
        assert f"{take}/left is a symbolic link" in proc.stderr, proc.stderr
        assert snapshot(outside) == before
        missing = [m["path"] for m in json.loads((take / "manifest.json").read_text())["collection"]["missing"]]
        assert missing and all(p.startswith("left/") for p in missing), missing
    finally:
        for n in nodes:
            n.kill()


def test_the_console_serves_no_take_file_through_a_link(tmp_path, outside):
    from test_console import ConsoleDemo
    demo = ConsoleDemo(tmp_path, nodes=1, cameras=1)
    try:
        take_id = "20260101-000000-links-abcdef"
        take = demo.takes / take_id
        (take / "a").mkdir(parents=True)
        (take / "a" / "cam0.frames.csv").write_text("frame,group,center_us,flags\n")
        (outside / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
        (take / "etc").symlink_to(outside, target_is_directory=True)
        (take / "a" / "linked.csv").symlink_to(outside / "passwd")
        (demo.takes / "20260101-000000-other-abcdef").symlink_to(outside, target_is_directory=True)
        os.mkfifo(take / "a" / "cam1.mkv")
        assert demo.get(f"/takes/{take_id}/a/cam0.frames.csv") == b"frame,group,center_us,flags\n"
        for bad in (f"{take_id}/etc/passwd", f"{take_id}/a/linked.csv", "20260101-000000-other-abcdef/passwd",
                    f"{take_id}/a/cam1.mkv"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(urllib.request.Request(f"{demo.base}/takes/{bad}", headers=demo.auth), timeout=10)
            body = refused.value.read()
            assert refused.value.code == 404 and json.loads(body)["error"], bad
            assert b"root:" not in body
    finally:
        demo.close()
