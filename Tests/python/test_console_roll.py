"""Rolling from the console (issue 27 item 2): a take started from a console that follows the rig's clocks takes
the followed estimates instead of aligning every clock again, and the take is as well synchronized: the demo's
simulated node clocks (offsets of up to ±250 ms, drifts of up to ±50 ppm) are what the followed estimates must
carry, and scripts/check-take.py decodes every frame's true centre from its stripe. How much faster Start → group 0
gets is measured by bench/roll.py, not here."""
from __future__ import annotations

import json
import time

from test_console import ConsoleDemo, check_take, ws_messages


def test_a_take_from_a_console_that_follows_the_clocks_uses_them_and_stays_in_sync(tmp_path):
    demo = ConsoleDemo(tmp_path)
    try:
        # Every node reached and its clock known: the console follows it.
        deadline = time.monotonic() + 60
        while True:
            nodes = demo.get("/api/rig")["nodes"]
            if nodes and all(n["reachable"] and n["clock_uncertainty_us"] is not None and n["clock_uncertainty_us"] <= 10
                             for n in nodes):
                break
            assert time.monotonic() < deadline, f"clocks not followed: {nodes}"
            time.sleep(0.1)
        messages = ws_messages(demo.base, demo.token)
        next(messages)  # subscribed: what the take says from now on arrives here
        status, take = demo.send("POST", "/api/takes", {"name": "followed", "seconds": 2})
        assert status == 202, take
        aligned = next(m["text"] for m in messages if m.get("type") == "event" and m.get("kind") == "take"
                       and m["text"].startswith("clocks aligned in"))
        assert aligned.endswith("(3 of 3 already followed)"), aligned
        done = demo.wait_take({"done", "partial", "failed"})
        assert done["state"] == "done", done
        take_dir = demo.takes / done["take_id"]
        failures, _ = check_take.check(take_dir)
        assert not failures, failures
        assert json.loads((take_dir / "manifest.json").read_text())["status"] == "complete"
    finally:
        demo.close()
