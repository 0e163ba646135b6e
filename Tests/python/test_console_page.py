"""The console's page in a real browser (Debian's chromium through chromium-driver and Selenium): six live tiles,
controls and takes driven by clicking the page, as the operator would. Checked against ground truth where it
exists (tile brightness from the JPEGs, the take's manifest and scripts/check-take.py)."""
from __future__ import annotations

import io
import json
import shutil
import time

import numpy as np
import pytest
from PIL import Image

from test_console import ConsoleDemo, brightness_now, check_take

selenium = pytest.importorskip("selenium")
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason="chromium and chromium-driver are not installed (scripts/setup.sh installs them)")


@pytest.fixture
def demo(tmp_path):
    d = ConsoleDemo(tmp_path)
    yield d
    d.close()


def chromium():
    """A headless chromium through chromium-driver, as every console page test drives it (the caller quits it)."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    return driver


@pytest.fixture
def browser():
    driver = chromium()
    yield driver
    driver.quit()


def wait(browser, predicate, timeout=30.0, what="the page"):
    return WebDriverWait(browser, timeout, poll_frequency=0.1).until(lambda d: predicate(d), message=f"{what} within {timeout} s")


def live_tiles(browser) -> int:
    return browser.execute_script(
        "return [...document.querySelectorAll('#tiles .tile')].filter(t => !t.classList.contains('missing') "
        "&& t.querySelector('img').naturalWidth > 0).length")


def test_the_page_shows_six_live_distinct_tiles_and_a_click_makes_the_hero(demo, browser):
    demo.wait_multiview()
    browser.get(demo.url)
    wait(browser, lambda d: live_tiles(d) == 6, what="6 live tiles")
    assert browser.find_element(By.ID, "connection").text == "live"
    shot = Image.open(io.BytesIO(browser.get_screenshot_as_png())).convert("RGB")
    scale = shot.width / browser.execute_script("return window.innerWidth")
    means = []
    for tile in browser.find_elements(By.CSS_SELECTOR, "#tiles .tile"):
        r = tile.rect
        box = tuple(int(v * scale) for v in (r["x"], r["y"], r["x"] + r["width"], r["y"] + r["height"] * 0.7))
        means.append(np.asarray(shot.crop(box)).reshape(-1, 3).mean(axis=0))
    assert len(means) == 6
    # Each camera has its own tint: no two tiles look alike.
    for i in range(6):
        for j in range(i + 1, 6):
            assert np.abs(means[i] - means[j]).max() > 8, f"tiles {i} and {j} look the same: {means[i]} {means[j]}"
    names = [t.get_attribute("data-node") + "/" + t.get_attribute("data-camera") for t in browser.find_elements(By.CSS_SELECTOR, "#tiles .tile")]
    assert sorted(names) == sorted(f"node-{n}/cam{c}" for n in (1, 2, 3) for c in (0, 1))
    # Every tile shows the same group.
    # Read in one script: a set is drawn in one JavaScript task, so this sees one set, never half of two.
    groups = set(browser.execute_script("return [...document.querySelectorAll('#tiles .tile')].map(t => t.dataset.group)"))
    assert len(groups) == 1 and "" not in groups, groups
    target = browser.find_element(By.CSS_SELECTOR, '#tiles .tile[data-node="node-3"][data-camera="cam1"]')
    target.click()
    wait(browser, lambda d: "hero" in target.get_attribute("class") and "pip" in d.find_element(By.ID, "tiles").get_attribute("class"),
         what="the clicked tile as the hero")
    assert target.size["width"] > 2 * browser.find_element(By.CSS_SELECTOR, '#tiles .tile[data-node="node-1"][data-camera="cam0"]').size["width"]


def set_inputs(browser, values: dict):
    for key in ("exposure_us", "gain_db", "white_balance_k", "focus"):
        field = browser.find_element(By.ID, f"control-{key}")
        field.clear()
        if key in values:
            field.send_keys(str(values[key]))


def in_force_from(browser) -> int:
    """The preview group from which the page says the last applied controls show in the pictures."""
    return int(browser.find_element(By.ID, "control-message").get_attribute("data-in-force-from-group"))


def test_controls_and_a_take_from_the_page(demo, browser):
    demo.wait_multiview()
    widths = {(c["node"], c["camera"]): c["width"] for c in demo.get("/api/rig")["cameras"]}
    browser.get(demo.url)
    wait(browser, lambda d: live_tiles(d) == 6, what="6 live tiles")
    before = brightness_now(demo, widths)

    Select(browser.find_element(By.ID, "control-camera")).select_by_value("node-1/cam1")
    # Exposure from half the frame period (16.7 ms) to 30 ms: that camera's picture brightens, no other's.
    set_inputs(browser, {"exposure_us": 30000})
    browser.find_element(By.ID, "control-apply").click()
    wait(browser, lambda d: "node-1/cam1" in d.find_element(By.ID, "control-message").text, what="the applied controls")
    after = brightness_now(demo, widths, from_group=in_force_from(browser))
    assert after[("node-1", "cam1")] > before[("node-1", "cam1")] * 1.2, (before, after)
    for key in widths:
        if key != ("node-1", "cam1"):
            assert abs(after[key] - before[key]) < before[key] * 0.05, (key, before[key], after[key])

    # Out of range from the page: the sentence is shown beside the controls.
    set_inputs(browser, {"exposure_us": 999999})
    browser.find_element(By.ID, "control-apply").click()
    wait(browser, lambda d: "exposure_us" in d.find_element(By.ID, "control-message").text, what="the refusal")
    message = browser.find_element(By.ID, "control-message")
    assert "node-1/cam1" in message.text and "range" in message.text and "error" in message.get_attribute("class")

    set_inputs(browser, {"exposure_us": 8000})
    browser.find_element(By.ID, "control-apply-all").click()
    wait(browser, lambda d: "applied to 6" in d.find_element(By.ID, "control-message").text, what="apply to all")
    dimmed = brightness_now(demo, widths, from_group=in_force_from(browser))
    for key in widths:
        assert dimmed[key] < after[key] * 0.85, (key, after[key], dimmed[key])

    browser.find_element(By.ID, "take-name").send_keys("frompage")
    browser.find_element(By.ID, "take-start").click()
    stop = browser.find_element(By.ID, "take-stop")
    wait(browser, lambda d: stop.is_enabled(), timeout=60, what="recording (Stop enabled)")
    time.sleep(1.5)
    stop.click()
    wait(browser, lambda d: ": done" in d.find_element(By.ID, "take-state").text, timeout=90, what="the take done")
    done = demo.get("/api/takes")["current"]
    take_dir = demo.takes / done["take_id"]
    manifest = json.loads((take_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    recorded = {(c["node"], c["camera"]): c["controls"] for c in manifest["cameras"]}
    assert all(c["exposure_us"] == 8000 for c in recorded.values()), recorded
    failures, _ = check_take.check(take_dir)
    assert not failures, failures
    rows = {len(t.read_text().splitlines()) for t in take_dir.glob("*/*.frames.csv")}
    assert len(rows) == 1, f"the stop did not end every file on one group: {rows}"
    # The take is listed with its report link.
    wait(browser, lambda d: any(a.text == done["take_id"] for a in d.find_elements(By.CSS_SELECTOR, "#takes a")), what="the take listed")
