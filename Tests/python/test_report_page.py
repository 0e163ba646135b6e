"""sync-report.html as an operator sees it: rendered by Debian's headless chromium and checked on the screenshot
(every camera's series colour is drawn, the plots are there), plus `coord report TAKE_DIR --html FILE`, which
renders the page afresh from the take's files.

$COORD is the coord binary (else .build/debug/coord); `coord demo` finds coord-node next to it or at $COORD_NODE.
Screenshots are kept under pytest's tmp_path (and in $REPORT_SCREENSHOTS when set) for a person to look at.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
COORD = os.environ.get("COORD", str(ROOT / ".build/debug/coord"))
CHROMIUM_TIMEOUT_S = 120
TITLES = ["Frame-centre error per camera", "Spread per group", "Clock uncertainty per node", "Drops and events"]
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#17becf", "#e377c2", "#8c564b",
           "#bcbd22", "#393b79", "#637939", "#843c39", "#7b4173", "#00a087", "#636363", "#fb9a99"]


def chromium() -> str:
    path = shutil.which("chromium") or ("/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None)
    if path is None:
        pytest.skip("chromium is not installed (scripts/setup.sh installs Debian's chromium for this test)")
    return path


def screenshot(page: Path, png: Path, height: int = 2400) -> np.ndarray:
    """Renders `page` with headless chromium at 1280 px wide and returns the screenshot as an RGB array."""
    from PIL import Image

    with tempfile.TemporaryDirectory(prefix="coord-chromium-") as profile:
        proc = subprocess.run(
            [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
             "--disable-extensions", "--force-device-scale-factor=1", f"--user-data-dir={profile}",
             f"--screenshot={png}", f"--window-size=1280,{height}", page.resolve().as_uri()],
            capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT_S)
    assert proc.returncode == 0 and png.is_file(), f"chromium could not render {page}: {proc.stderr[-2000:]}"
    keep = os.environ.get("REPORT_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(keep) / png.name)
    with Image.open(png) as image:
        return np.asarray(image.convert("RGB")).astype(np.int16)


def hex_rgb(color: str) -> tuple[int, int, int]:
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16)


def pixels_of(shot: np.ndarray, color: str, tolerance: int = 10) -> int:
    """Pixels within `tolerance` of `color` in every channel."""
    return int((np.abs(shot - np.array(hex_rgb(color), dtype=np.int16)) <= tolerance).all(axis=2).sum())


def camera_colors(html: str) -> dict[str, str]:
    """node/camera → series colour, from the page's camera table (each row starts with the colour chip)."""
    table = html.split('<table class="cameras">', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r'<span class="chip" style="background:(#[0-9a-f]{6})"></span>([^<]*)</td><td class="l">([^<]*)</td>', table)
    return {f"{node}/{camera}": color for color, node, camera in rows}


def assert_self_contained(html: str):
    """No scripts, styles, fonts or images from anywhere: checked on the markup and the inline CSS (an event's
    detail is the operator's text and may well mention a URL)."""
    lower = html.lower()
    for element in ["<script", "<link", "<img", "<iframe", "<object", "<embed", "<image", "<use", "<foreignobject"]:
        assert element not in lower, f"the page has a {element}> element"
    styles = " ".join(re.findall(r"<style>(.*?)</style>", lower, re.S))
    tags = " ".join(re.findall(r"<[^>]*>", lower))
    for forbidden in ["http:", "https:", "//", "url(", "@import", "@font-face", "src=", "href="]:
        assert forbidden not in tags and forbidden not in styles, \
            f"the page refers to something outside itself: {forbidden!r}"


def run_coord(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([COORD, *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def demo_take(tmp_path_factory) -> Path:
    """One short demo take on two nodes."""
    if not os.access(COORD, os.X_OK):
        pytest.fail(f"the coord binary is missing at {COORD}; build it (swift build) or set COORD.")
    takes = tmp_path_factory.mktemp("report-page") / "takes"
    proc = run_coord("demo", "--nodes", "2", "--seconds", "2", "--seed", "11", "--size", "320x240", "--takes-dir", str(takes))
    assert proc.returncode == 0, proc.stderr
    dirs = [d for d in takes.iterdir() if d.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def plots(take: Path) -> int:
    """The page's plots: four, and the sound plot when the take has microphones."""
    return 4 + bool(json.loads((take / "manifest.json").read_text()).get("audio"))


def test_demo_page_shows_every_cameras_series(demo_take, tmp_path):
    html = (demo_take / "sync-report.html").read_text()
    assert_self_contained(html)
    assert html.count("<svg") == plots(demo_take) == 5
    for title in TITLES:
        assert title in html, f"the page has no plot titled {title!r}"
    manifest = json.loads((demo_take / "manifest.json").read_text())
    colors = camera_colors(html)
    assert sorted(colors) == sorted(f"{c['node']}/{c['camera']}" for c in manifest["cameras"])
    assert len(set(colors.values())) == len(colors), f"two cameras share a colour: {colors}"

    shot = screenshot(demo_take / "sync-report.html", tmp_path / "demo-report.png")
    # The page is drawn, not blank: a good share of the screenshot is neither background nor white.
    background = (np.abs(shot - np.array([250, 250, 250])) <= 3).all(axis=2) | (shot >= 252).all(axis=2)
    assert (~background).mean() > 0.05, "the screenshot is almost empty"
    # Legend swatches and table chips are a few hundred pixels per colour; a drawn series is thousands.
    for camera, color in colors.items():
        n = pixels_of(shot, color)
        assert n >= 1500, f"{camera}'s series colour {color} covers only {n} pixels of the screenshot"
    # The verdict badge is on screen, in its colour.
    assert pixels_of(shot, "#1b7f3b" if manifest["status"] == "complete" else "#c62828", tolerance=6) >= 800


def test_report_html_renders_the_page_afresh(demo_take, tmp_path):
    # An older take: its page predates the plots. `coord report --html` must not copy it.
    take = tmp_path / demo_take.name
    shutil.copytree(demo_take, take)
    (take / "sync-report.html").write_text("<!doctype html><html><body><table></table></body></html>\n")
    out = tmp_path / "out" / "page.html"
    out.parent.mkdir()
    proc = run_coord("report", str(take), "--html", str(out))
    assert proc.returncode == 0, proc.stderr
    assert demo_take.name in proc.stdout, "the summary names the take"
    page = out.read_text()
    original = (demo_take / "sync-report.html").read_text()
    assert page.count("<svg") == original.count("<svg") == plots(demo_take)
    assert page.count("<polyline") == original.count("<polyline")
    for title in TITLES:
        assert title in page
    assert_self_contained(page)
    assert [p.name for p in out.parent.iterdir()] == ["page.html"], "the page is written atomically, no leftovers"


def test_report_html_without_frames_tables_still_renders(demo_take, tmp_path):
    take = tmp_path / demo_take.name
    shutil.copytree(demo_take, take)
    manifest = json.loads((take / "manifest.json").read_text())
    gone = manifest["cameras"][0]
    (take / gone["node"] / f"{gone['camera']}.frames.csv").unlink()
    out = tmp_path / "page.html"
    proc = run_coord("report", str(take), "--html", str(out))
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    assert page.count("<svg") == plots(take)
    assert f"{gone['node']}/{gone['camera']}.frames.csv is missing" in page


def test_report_html_refuses_a_directory_that_is_not_a_take(tmp_path):
    not_a_take = tmp_path / "holiday-photos"
    not_a_take.mkdir()
    out = tmp_path / "page.html"
    proc = run_coord("report", str(not_a_take), "--html", str(out))
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("coord: ") and lines[0].endswith("."), proc.stderr
    assert str(not_a_take) in lines[0]
    assert not out.exists()


def test_report_html_names_an_unwritable_file(demo_take, tmp_path):
    out = tmp_path / "no-such-dir" / "page.html"
    proc = run_coord("report", str(demo_take), "--html", str(out))
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(out) in lines[0], proc.stderr


# ---- a long, eventful take written by hand: 16 cameras, drops, held frames, events, a missing file ----

def write_eventful_take(root: Path, groups: int = 3000, nodes: int = 8, per_node: int = 2) -> Path:
    rng = np.random.default_rng(5)
    period, t0 = 33_333, 10_000_000
    take = root / "20260102-030405-eventful-0a1b2c"
    take.mkdir(parents=True)
    cameras, report_cameras, centres = [], [], {}
    missing = ("node-7", "cam1")
    for n in range(nodes):
        node = f"node-{n}"
        (take / node).mkdir()
        for k in range(per_node):
            camera = f"cam{k}"
            index = n * per_node + k
            error = rng.normal(index * 4 - 30, 6, groups).round().astype(int)
            error[1500 + index * 20] += 400  # one spike each: the downsampled line must keep it
            dup = np.zeros(groups, dtype=bool)
            held = 0
            if index == 3:   # a frame-rate cap: one group in 2 is held on purpose
                dup[1::2] = True
                held = int(dup.sum())
            if index in (0, 5, 9):  # some frames lost
                dup[rng.choice(groups, 12 + index, replace=False)] = True
            dropped = int(dup.sum()) - held
            rows = ["frame,group,center_us,flags"]
            rows += [f"{g},{g},{t0 + g * period + error[g]},{'dup' if dup[g] else ''}" for g in range(groups)]
            if (node, camera) != missing:
                (take / node / f"{camera}.frames.csv").write_text("\n".join(rows) + "\n")
            centres[(node, camera)] = np.where(dup, np.nan, t0 + np.arange(groups) * period + error)
            cam = {"node": node, "camera": camera, "ordinal": index, "width": 320, "height": 240, "fps": 30,
                   "codec": "mjpeg", "frames": groups, "dropped": dropped, "held": held,
                   "clock": {"offset_us": 1000.0 * n, "drift_ppm": 3.0, "uncertainty_us": 2.0 + n, "bound_us": 40.0 + n},
                   "files": [{"path": f"{node}/{camera}.mkv", "bytes": 1, "sha256": "0" * 64}]}
            if index == 3:
                cam["record_every"] = 2
            if index == 12:
                cam["disabled"] = True
            cameras.append(cam)
            phase = np.abs(error[~dup])
            report_cameras.append({"node": node, "camera": camera, "frames": groups, "dropped": dropped,
                                   "phase_error_us": {"p50": int(np.percentile(phase, 50)), "p99": int(np.percentile(phase, 99)),
                                                      "max": int(phase.max())},
                                   "clock_uncertainty_us": 2.0 + n, **({"held": held} if held else {})})
    stack = np.array([centres[k] for k in centres if k != missing])
    valid = (~np.isnan(stack)).sum(axis=0) >= 2
    spread = (np.nanmax(stack, axis=0) - np.nanmin(stack, axis=0))[valid]

    def g(group):
        return t0 + group * period

    events = [
        {"t_us": g(0), "node": "", "camera": "", "kind": "start", "detail": "all 16 camera(s) start at group 0"},
        {"t_us": g(700), "node": "node-2", "camera": "", "kind": "pressure", "detail": "thermal pressure serious"},
        {"t_us": g(720), "node": "node-1", "camera": "cam1", "kind": "camera-slowed", "detail": "node-1/cam1 records one group in 2"},
        {"t_us": g(1800), "node": "node-6", "camera": "cam0", "kind": "camera-disabled", "detail": "node-6/cam0 disabled <to cool node-6>"},
        {"t_us": g(2600), "node": "node-4", "camera": "cam1", "kind": "camera-ended", "detail": "the camera stopped delivering frames"},
        {"t_us": g(groups), "node": "", "camera": "", "kind": "stop", "detail": f"all cameras stop after group {groups - 1}"},
        {"t_us": g(groups) + 500_000, "node": "node-7", "camera": "cam1", "kind": "file-missing",
         "detail": "node-7/cam1.frames.csv did not arrive"},
    ]
    track = [{"node": f"node-{n}", "t_us": t0 - 2_000_000 + s * 1_000_000, "offset_us": 0.0, "drift_ppm": 0.0,
              "uncertainty_us": round(6.0 / (1 + s) + n * 0.3, 1), "bound_us": 40.0 + n}
             for n in range(nodes) for s in range(groups * period // 1_000_000 + 2)]
    manifest = {"format": "coord.take/1", "take_id": take.name, "name": "eventful", "status": "partial",
                "t0_us": t0, "frame_period_us": period, "groups": groups, "start_wallclock": "2026-01-02T03:04:05.000000Z",
                "cameras": cameras, "events": events, "clock_track": track,
                "budget": {"cost": 0.86, "longest_take_s": 5400.0, "changes": ["node-3/cam1 capped to 15 fps"],
                           "nodes": [{"node": f"node-{n}", "cost": 0.86 if n == 2 else 0.4, "longest_take_s": None, "notes": [],
                                      "loads": [{"resource": "encoding", "demand": 3.4e8 if n == 2 else 1.5e8, "capacity": 4e8,
                                                 "unit": "pixels/s", "cost": 0.85 if n == 2 else 0.38}]}
                                     for n in range(nodes)]}}
    report = {"groups": groups, "groups_measured": int(valid.sum()),
              "spread_us": {"p50": int(np.percentile(spread, 50, method="inverted_cdf")),
                            "p99": int(np.percentile(spread, 99, method="inverted_cdf")), "max": int(spread.max())},
              "cameras": report_cameras}
    (take / "manifest.json").write_text(json.dumps(manifest, indent=1))
    (take / "sync-report.json").write_text(json.dumps(report, indent=1))
    return take


def test_eventful_take_draws_sixteen_distinguishable_cameras(tmp_path):
    take = write_eventful_take(tmp_path / "takes")
    if not os.access(COORD, os.X_OK):
        pytest.fail(f"the coord binary is missing at {COORD}; build it (swift build) or set COORD.")
    out = tmp_path / "eventful-report.html"
    proc = run_coord("report", str(take), "--html", str(out))
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    assert_self_contained(html)
    assert html.count("<svg") == 4
    assert "&lt;to cool node-6&gt;" in html, "event details are escaped"
    verdict = re.search(r'<p class="verdict bad">(.*?)</p>', html).group(1)
    assert verdict.startswith("Partial take: ") and "node-7/cam1.frames.csv did not arrive" in verdict
    assert 'class="hot"' in html, "a resource at cost 0.85 is highlighted"

    colors = camera_colors(html)
    assert len(colors) == 16 and len(set(colors.values())) == 16
    shot = screenshot(out, tmp_path / "eventful-report.png", height=3600)
    for camera, color in colors.items():
        n = pixels_of(shot, color)
        floor = 150 if camera == "node-7/cam1" else 500  # no frames.csv: only its legend, lane and chips
        assert n >= floor, f"{camera}'s colour {color} covers only {n} pixels of the screenshot"
