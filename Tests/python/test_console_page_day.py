"""The console's page through a shoot day (issue 35), in a real browser (Debian's chromium through chromium-driver
and Selenium, as test_console_page.py): on a phone, the take's controls on screen; the arming lead said as such; an
error from a console that did not answer said in a sentence and gone once it answers; no Save where there is no rig
file; disk free per node; a lost node's last values greyed with their age. One demo and one browser for all of it,
the node killed last."""
from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from test_console import ConsoleDemo
from test_console_follow import node_pid
from test_console_page import CHROMEDRIVER, CHROMIUM, chromium, wait

selenium = pytest.importorskip("selenium")
from selenium.webdriver.common.by import By  # noqa: E402

pytestmark = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason="chromium and chromium-driver are not installed (scripts/setup.sh installs them)")


@pytest.fixture(scope="module")
def day(tmp_path_factory):
    demo = ConsoleDemo(tmp_path_factory.mktemp("day"), nodes=2, cameras=2)
    browser = chromium()
    try:
        demo.wait_multiview()
        browser.get(demo.url)
        wait(browser, lambda d: d.find_element(By.ID, "connection").text == "live", what="the page live")
        yield demo, browser
    finally:
        browser.quit()
        demo.close()


def text(browser, id_: str) -> str:
    return browser.find_element(By.ID, id_).text


def in_viewport(browser, id_: str) -> dict:
    return browser.execute_script(
        "const r = document.getElementById(arguments[0]).getBoundingClientRect();"
        "return {left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: innerWidth, height: innerHeight,"
        " page: document.documentElement.scrollWidth}", id_)


def test_on_a_phone_start_and_stop_are_on_screen_and_nothing_scrolls_sideways(day):
    _, browser = day
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
    try:
        wait(browser, lambda d: d.execute_script("return innerWidth") == 390, what="the 390 px viewport")
        browser.execute_script("window.scrollTo(0, 0)")
        for id_ in ("take-start", "take-stop", "take-name", "take-seconds"):
            box = in_viewport(browser, id_)
            assert 0 <= box["left"] and box["right"] <= box["width"] and 0 <= box["top"] and box["bottom"] <= box["height"], (id_, box)
            assert browser.find_element(By.ID, id_).is_displayed(), id_
        box = in_viewport(browser, "take-start")
        assert box["page"] <= box["width"], f"the page is {box['page']} px wide in a {box['width']} px window"
        # The controls stack under the tiles.
        tiles = in_viewport(browser, "tiles")
        assert tiles["bottom"] <= box["top"], (tiles, box)
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_no_save_without_a_rig_file_and_disk_free_per_node(day):
    demo, browser = day
    assert "rig_file" not in demo.get("/api/rig")
    assert not browser.find_element(By.ID, "rig-save").is_displayed()
    assert browser.find_element(By.ID, "rig-file").is_displayed()
    assert "none to save into" in text(browser, "rig-file-note")
    # Each node's staging disk, and the rig's least.
    wait(browser, lambda d: all(" GB" in c.text for c in d.find_elements(By.CSS_SELECTOR, "#nodes td.disk")), what="disk free per node")
    assert "least disk free" in text(browser, "rig-disk")


def test_an_unanswered_request_is_said_in_a_sentence_and_goes_once_the_console_answers(day):
    _, browser = day
    # The network fails once (as a console restarting does): the page says so, in a sentence, beside the controls.
    browser.execute_script("window.realFetch = window.fetch; window.fetch = () => Promise.reject(new TypeError('Failed to fetch'));")
    browser.find_element(By.ID, "control-apply-all").click()
    wait(browser, lambda d: "did not answer" in text(d, "control-message"), what="the unanswered request said")
    message = text(browser, "control-message")
    assert message.startswith("The console did not answer: Failed to fetch"), message
    assert "error" in browser.find_element(By.ID, "control-message").get_attribute("class")
    # The console answers the next request (another one, elsewhere on the page): the stale error goes.
    browser.execute_script("window.fetch = window.realFetch;")
    browser.execute_script("api('GET', '/api/rig')")
    wait(browser, lambda d: text(d, "control-message") == "", what="the stale error cleared")


def test_the_arming_lead_is_starting_with_group_0_counting_down_then_recording(day):
    demo, browser = day
    browser.find_element(By.ID, "take-seconds").send_keys("1")
    browser.find_element(By.ID, "take-start").click()
    # Sampled from the page itself, 10 times a second, until it records.
    browser.set_script_timeout(60)
    seen = browser.execute_async_script(
        "const done = arguments[0], seen = [];"
        "const t = setInterval(() => { const s = $('take-state').textContent; if (seen[seen.length - 1] !== s) seen.push(s);"
        " if (/: (recording|done|failed|partial)/.test(s)) { clearInterval(t); done(seen); } }, 50);")
    leads = [s for s in seen if "starting · group 0 in" in s]
    assert leads, seen
    counted = [float(s.split("group 0 in ")[1].split(" s")[0]) for s in leads]
    assert counted == sorted(counted, reverse=True) and counted[0] > counted[-1], counted
    assert not any(": recording" in s for s in seen[:seen.index(leads[-1])]), seen
    assert ": recording" in seen[-1], seen
    wait(browser, lambda d: ": done" in text(d, "take-state"), timeout=90, what="the take done")


def node_cells(browser, name: str) -> list[dict]:
    """The node's row, read in one script (the rows are drawn afresh at every update)."""
    return browser.execute_script(
        "const r = document.querySelector('#nodes tr[data-node=\"' + arguments[0] + '\"]');"
        "return r ? [...r.children].map(c => ({text: c.textContent, cls: c.className, title: c.title, color: getComputedStyle(c).color})) : []",
        name)


def test_a_lost_node_greys_its_last_values_with_their_age_and_restarted_the_same_way_is_followed_again(day):
    demo, browser = day
    # Its last values must exist before it goes: its clock is followed (a number, not "—") once aligned.
    wait(browser, lambda d: len(node_cells(d, "node-2")) > 3 and node_cells(d, "node-2")[3]["text"] != "—",
         timeout=60, what="node-2's clock followed")
    pid = node_pid(demo, "node-2")
    args = [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]]
    os.kill(pid, signal.SIGKILL)
    wait(browser, lambda d: "last heard" in node_cells(d, "node-2")[1]["text"], timeout=20, what="node-2 unreachable, last heard some seconds ago")
    wait(browser, lambda d: int(node_cells(d, "node-2")[1]["text"].split("last heard ")[1].split(" s")[0]) >= 3,
         timeout=20, what="the age growing")
    cells = node_cells(browser, "node-2")
    assert cells[1]["text"].startswith("unreachable · last heard "), cells[1]
    for cell in cells[2:4]:
        assert "stale" in cell["cls"] and "as last heard" in cell["title"], cell
        # Greyed, not the red of the row's live cells.
        assert cell["color"] != cells[0]["color"], (cell, cells[0])
    # Its last values, not blanks.
    assert cells[2]["text"] in {"nominal", "fair", "serious", "critical", "shutdown"} and cells[3]["text"] != "—", cells

    # The demo gave it a fixed port: started again with the very same arguments, it is followed again.
    endpoint = args[args.index("--endpoint") + 1]
    assert not endpoint.endswith(":*"), endpoint
    restarted = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert restarted.stdout.readline().strip() == f"READY {endpoint}"
        wait(browser, lambda d: node_cells(d, "node-2")[1]["text"] == "idle", timeout=30, what="node-2 followed again")
        assert "stale" not in node_cells(browser, "node-2")[2]["cls"]
    finally:
        restarted.kill()
        restarted.wait(timeout=10)


def test_a_meter_with_no_sound_yet_is_an_empty_outline_saying_no_signal(day):
    _, browser = day
    shown = browser.execute_script(
        "const c = soundCell([{mic: 'a', level_dbfs: -100}, {mic: 'b', level_dbfs: -6}]); document.body.appendChild(c);"
        "const m = [...c.querySelectorAll('meter')];"
        "const out = {text: c.textContent, classes: m.map(x => x.className), values: m.map(x => x.value),"
        " bar: getComputedStyle(m[0], '::-webkit-meter-bar').backgroundColor}; c.remove(); return out")
    assert shown["classes"] == ["mic-level empty", "mic-level"] and shown["values"] == [-60, -6], shown
    assert "a  no signal" in shown["text"] and "b  -6 dB" in shown["text"], shown
    # Not a full grey bar: the track is see-through, only its outline drawn.
    assert shown["bar"] in ("rgba(0, 0, 0, 0)", "transparent"), shown
