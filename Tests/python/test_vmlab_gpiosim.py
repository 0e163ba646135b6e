"""The lab's gpio-sim figures (issue 38, CONTRACT §17), without a VM: an ftrace dump of gpio_value events read back
into rising edges, and edges placed on a take's grid through its clock_track — pulses counted per group, the ones
before the take (an aborted arm's) and after it apart, the error against the intended instant on the node's clock.
The lab itself (a real gpio-sim in real guests) is test_vmlab.py's trigger case."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from vmlab_lib import gpiosim  # noqa: E402

TRACE = """# tracer: nop
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
 -qos.overcommit-434     [000] .....   279.871796: gpio_value: 1022 set 0
   trigger-trig0-442     [000] .....   297.245654: gpio_value: 1022 set 1
   trigger-trig0-442     [000] .....   297.246700: gpio_value: 1022 set 0
   trigger-trig0-442     [000] .....   297.250000: gpio_value: 1023 set 1
   trigger-trig0-442     [000] .....   297.260000: gpio_value: 1022 get 1
"""


def test_rising_edges_are_the_set_1_events_of_the_line_in_kernel_microseconds():
    assert gpiosim.rising_edges(TRACE, 1022) == [297_245_654]
    assert gpiosim.rising_edges(TRACE, 1023) == [297_250_000]
    assert gpiosim.rising_edges("", 1022) == []


def manifest(offset: float, drift_ppm: float = 0.0) -> dict:
    # node clock = rig + offset (+ drift), one clock_track point at the grid's start
    return {"t0_us": 10_000_000_000, "frame_period_us": 33_333, "groups": 4, "cameras": [{"node": "vm1"}],
            "clock_track": [{"node": "vm1", "t_us": 10_000_000_000, "offset_us": offset, "drift_ppm": drift_ppm},
                            {"node": "vm2", "t_us": 10_000_000_000, "offset_us": 0.0, "drift_ppm": 0.0}]}


def test_edges_are_placed_on_the_grid_through_the_clock_track_and_counted_per_group():
    m = manifest(offset=-9_700_000_000.0, drift_ppm=200.0)
    local = lambda rig: rig - 9_700_000_000 + 200e-6 * (rig - 10_000_000_000)  # noqa: E731
    late = [120, 5_000, 16_000, 40]
    edges = [round(local(10_000_000_000 + g * 33_333)) + late[g] for g in range(4)]
    f = gpiosim.figures(m, "vm1", edges)
    assert f["pulses"] == 4 and f["groups"] == 4 and f["outside"] == {"before": 0, "after": 0}, f
    assert f["error_us"]["max"] == 16_000 and f["signed_us"]["min"] in (39, 40, 41), f
    assert abs(f["error_us"]["p50"] - 5_000) <= 1, f  # of 40, 120, 5000, 16000
    assert gpiosim.check([f]) is None


def test_a_missing_pulse_a_pulse_after_the_take_and_an_aborted_arms_are_told_apart():
    m = manifest(offset=0.0)
    grid = [10_000_000_000 + g * 33_333 for g in range(6)]
    # an aborted arm's pulses a second before, groups 0, 1 and 3 (2 missed), then one after the last group
    edges = [grid[0] - 1_000_000, grid[0] - 966_667, grid[0], grid[1] + 30, grid[3] + 10, grid[4]]
    f = gpiosim.figures(m, "vm1", edges)
    assert f["pulses"] == 3 and f["outside"] == {"before": 2, "after": 1}, f
    assert gpiosim.check([f]) == "vm1's output trig0 emitted 3 pulses for 4 groups."
    f = gpiosim.figures(m, "vm1", [grid[0], grid[1], grid[2], grid[3], grid[4] + 100])
    assert gpiosim.check([f]) == "vm1's output trig0 emitted 1 pulse after the take's last group."


def test_percentiles_are_of_magnitudes_as_the_node_states_them():
    assert gpiosim.percentiles([-300, 100, 200]) == {"p50": 200, "p99": 300, "max": 300}
    assert gpiosim.percentiles([]) == {"p50": 0, "p99": 0, "max": 0}
