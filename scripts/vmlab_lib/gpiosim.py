"""Trigger outputs on a real GPIO chip in the lab (issue 38, CONTRACT §17): the kernel's GPIO simulator, gpio-sim,
built out of tree from Debian's linux-source-6.1 (Debian's kernel has neither GPIO_SIM nor the IRQ_SIM it needs, so
kernel/irq/irq_sim.c is linked into the module), one bank per guest made through configfs, and the kernel's own
timestamp of every edge the node drives: the `gpio_value` tracepoint read back with ftrace's `mono` clock, which is
the guest's CLOCK_MONOTONIC, the clock the node follows. Test infrastructure only: nothing here ships.

Why ftrace and not an edge-event request on a second line: gpio-sim's lines are not wired to each other, so a
"loop" from the output to an input would be a program in the guest copying one line's value into the other's
`pull` after it noticed the change: its lag, not the node's, would be measured. The tracepoint fires inside the
node's own GPIO_V2_LINE_SET_VALUES ioctl, at the moment the chip's value is set.
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

from . import kmod
from .image import LAB, LabError

SOURCES = ("drivers/gpio/gpio-sim.c", "drivers/gpio/gpiolib.h", "kernel/irq/irq_sim.c")
# irq_to_desc is not exported to modules; generic_handle_irq does the same lookup and handling and is.
IRQ_SIM_FIX = ("handle_simple_irq(irq_to_desc(irqnum));", "generic_handle_irq(irqnum);")
KBUILD = "obj-m := gpio-sim.o\ngpio-sim-y := gpio-sim-main.o irq_sim.o\n"
# A --trigger take's rate. Under TCG on the loaded 2-core machine a guest's timer wake-up is late by more than half a
# 30 fps period for many pulses (docs/vmlab.md), and the generator skips a pulse that late rather than expose the
# wrong frame; at 10 fps half a period is 50 ms.
LAB_FPS = 10
OUTPUT = "trig0"  # the node file's trigger output in each VM: line 0 of the sim chip
WIDTH_US = 1000


def module(release: str, lab: Path = LAB) -> Path:
    """gpio-sim.ko (with irq_sim linked in) for kernel `release` (6.1.0-N-amd64), built once per recipe and kernel."""
    recipe = "\n".join(SOURCES + IRQ_SIM_FIX + (KBUILD, release))
    out = lab / "modules" / f"gpio-sim-{release}-{hashlib.sha256(recipe.encode()).hexdigest()[:12]}.ko"

    def prepare(src: Path, build: Path) -> None:
        shutil.copy2(src / SOURCES[0], build / "gpio-sim-main.c")  # the module is gpio-sim.ko: its parts named apart
        shutil.copy2(src / SOURCES[1], build / "gpiolib.h")
        irq_sim = (src / SOURCES[2]).read_text()
        if IRQ_SIM_FIX[0] not in irq_sim:
            raise LabError(f"linux-source's irq_sim.c no longer calls {IRQ_SIM_FIX[0]!r}: update gpiosim.IRQ_SIM_FIX.")
        (build / "irq_sim.c").write_text(irq_sim.replace(*IRQ_SIM_FIX))

    return kmod.build(release, lab, out, what="gpio-sim", sources=SOURCES, kbuild=KBUILD, prepare=prepare)


def share(share_dir: Path, release: str) -> None:
    shutil.copy2(module(release), share_dir / "gpio-sim.ko")


# In the guest: load gpio-sim, make one bank of two named lines live, give its chip to the gpio group (as Raspberry
# Pi OS's udev rule does; Debian's has none) with the node's user in it, and start ftrace on gpio_value with the
# mono clock. Prints the chip's device path and its first line's global GPIO number (what gpio_value names).
SETUP = r"""set -e
mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
[ -d /sys/kernel/config/gpio-sim ] || insmod /mnt/host/gpio-sim.ko
groupadd -f gpio
id coord-node >/dev/null 2>&1 && usermod -aG gpio coord-node
echo 'SUBSYSTEM=="gpio", KERNEL=="gpiochip*", GROUP="gpio", MODE="0660"' > /etc/udev/rules.d/60-vmlab-gpio.rules
udevadm control --reload
D=/sys/kernel/config/gpio-sim/vmlab
if [ ! -d $D ]; then
  mkdir $D $D/bank0 $D/bank0/line0 $D/bank0/line1
  echo vmlab-trigger > $D/bank0/label
  echo 2 > $D/bank0/num_lines
  echo trig0 > $D/bank0/line0/name
  echo spare > $D/bank0/line1/name
  echo 1 > $D/live
fi
chip=$(cat $D/bank0/chip_name)
udevadm settle
chgrp gpio /dev/$chip && chmod 0660 /dev/$chip
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
base=$(sed -n "s/^$chip: GPIOs \([0-9]*\)-.*/\1/p" /sys/kernel/debug/gpio)
T=/sys/kernel/tracing
mountpoint -q $T || mount -t tracefs nodev $T
echo 0 > $T/tracing_on
echo mono > $T/trace_clock
echo 1 > $T/events/gpio/gpio_value/enable
echo > $T/trace
echo 1 > $T/tracing_on
echo /dev/$chip $base
"""


def setup(vm) -> tuple[str, int]:
    """Makes vm's simulated chip and starts tracing its values; returns (/dev/gpiochipN, global number of line 0)."""
    out = vm.sh(SETUP, timeout=120).split()
    if len(out) < 2 or not out[-1].isdigit() or not out[-2].startswith("/dev/gpiochip"):
        raise LabError(f"{vm.name}: gpio-sim made no chip (setup printed {' '.join(out)[-300:]!r}).")
    return out[-2], int(out[-1])


def node_file_lines(chip: str) -> str:
    """The node file's trigger output on the sim chip's line 0 (CONTRACT §17)."""
    return (f"triggers:\n  - {{name: {OUTPUT}, gpio: {{chip: {chip}, line: 0}}, width_us: {WIDTH_US}, "
            "active: high}\n")


# vivid cannot be triggered: it free-runs on its own timer. The lab binds it anyway so the node runs its whole
# trigger path (it opens an output only for a bound camera); its frames' centres in such a take are the pulses'.
CAMERA_BINDING = {"trigger": {"output": OUTPUT, "source": "Line0", "activation": "RisingEdge", "delay_us": 0}}

NODE_FILE = "/etc/coord-node/node.yaml"


def triggered_node_file(text: str, chip: str, extra_cameras: tuple[dict, ...] = ()) -> str:
    """The lab's node file with the trigger output on `chip` and cam0 bound to it (unless it has them already),
    and `extra_cameras` after cam0."""
    lines, out = text.splitlines(), []
    triggered = any(line.startswith("triggers:") for line in lines)
    for line in lines:
        if line.startswith("keys:") and not triggered:
            out += node_file_lines(chip).splitlines()
        if line.startswith("  - {\"name\": \"cam0\""):
            out.append(line if triggered else "  - " + json.dumps(json.loads(line[4:]) | CAMERA_BINDING))
            out += ["  - " + json.dumps(c) for c in extra_cameras]
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def use_trigger(vm, extra_cameras: tuple[dict, ...] = ()) -> tuple[str, int]:
    """In a running lab: vm's chip made and traced (`setup`), its node file given the trigger output (the file as
    it was kept beside it), the node restarted; returns setup's (chip, gpio)."""
    chip, gpio = setup(vm)
    vm.sh(f"cp -n {NODE_FILE} {NODE_FILE}.untriggered")
    text = triggered_node_file(vm.sh(f"cat {NODE_FILE}.untriggered"), chip, extra_cameras)
    vm.sh(f"cat > {NODE_FILE} <<'EOF'\n{text}EOF\nsystemctl restart coord-node", timeout=240)
    return chip, gpio


def drop_trigger(vm) -> None:
    """Puts back the node file `use_trigger` kept, restarts the node and stops tracing (the chip stays, unused)."""
    vm.sh(f"[ -e {NODE_FILE}.untriggered ] && mv {NODE_FILE}.untriggered {NODE_FILE} && systemctl restart coord-node; "
          "echo 0 > /sys/kernel/tracing/tracing_on; true", timeout=240)


TRACE_LINE = re.compile(r"\s(\d+)\.(\d{6}): gpio_value: (\d+) +set (\d)")


def rising_edges(trace: str, gpio: int) -> list[int]:
    """The kernel's timestamps (µs, trace_clock mono) of every `set 1` of global GPIO `gpio` in an ftrace dump."""
    out = []
    for m in TRACE_LINE.finditer(trace):
        if int(m.group(3)) == gpio and m.group(4) == "1":
            out.append(int(m.group(1)) * 1_000_000 + int(m.group(2)))
    return out


def read_edges(vm, gpio: int) -> list[int]:
    """vm's rising edges of `gpio` in the trace so far; an overrun buffer (edges lost) is refused."""
    lost = vm.sh("cat /sys/kernel/tracing/per_cpu/cpu*/stats | awk '/^overrun/ {s += $2} END {print s + 0}'").strip()
    if lost != "0":
        raise LabError(f"{vm.name}: the kernel's trace buffer overran ({lost} events lost): "
                       "its edges cannot be counted.")
    return rising_edges(vm.sh("cat /sys/kernel/tracing/trace", timeout=120), gpio)


def restart_trace(vm) -> None:
    vm.sh("echo > /sys/kernel/tracing/trace")


def percentiles(values: list[int]) -> dict:
    """p50, p99 and max of the magnitudes, as the node's TriggerTiming states them (µs)."""
    s = sorted(abs(v) for v in values)
    if not s:
        return {"p50": 0, "p99": 0, "max": 0}
    at = lambda p: s[min(len(s) - 1, int(round(p * (len(s) - 1))))]  # noqa: E731
    return {"p50": at(0.5), "p99": at(0.99), "max": s[-1]}


def figures(manifest: dict, node: str, edges: list[int]) -> dict:
    """One output's figures: each kernel edge (guest CLOCK_MONOTONIC µs) against its group's intended edge (the
    grid instant minus the camera's delay and half its exposure) mapped to the node's clock through the take's
    clock_track. `pulses` counts the edges within the take's groups (two on one group count twice); `outside`
    the edges before group 0 (an arm the coordinator aborted and recorded again, `arming_retries`) and after the
    take's last group (which no take may have)."""
    from .truth import node_clock
    track = sorted((p for p in manifest["clock_track"] if p["node"] == node), key=lambda p: p["t_us"])
    if not track:
        raise LabError(f"the manifest has no clock_track for {node}: its edges cannot be placed on the grid.")
    t0, period, groups = manifest["t0_us"], manifest["frame_period_us"], manifest["groups"]
    cam = next((c for c in manifest["cameras"] if c["node"] == node), {})
    lead = CAMERA_BINDING["trigger"]["delay_us"] + ((cam.get("controls") or {}).get("exposure_us") or 0) // 2
    errors, before, after = [], 0, 0
    for edge in edges:
        rig = edge - track[-1]["offset_us"]  # node clock → rig: the offset first, then the track's own correction
        for _ in range(3):
            rig -= node_clock(track, rig) - edge
        group = round((rig + lead - t0) / period)
        if group < 0:
            before += 1
        elif group >= groups:
            after += 1
        else:
            errors.append(round(edge - node_clock(track, t0 + group * period - lead)))
    return {"vm": node, "output": OUTPUT, "pulses": len(errors), "groups": groups, "error_us": percentiles(errors),
            "signed_us": {"min": min(errors, default=0), "max": max(errors, default=0)},
            "outside": {"before": before, "after": after}}


def trigger_report(lab, manifest: dict, chips: dict[str, tuple[str, int]]) -> list[dict]:
    out = []
    for vm in lab.vms:
        out.append(figures(manifest, vm.name, read_edges(vm, chips[vm.name][1])))
    return out


def check(entries: list[dict]) -> str | None:
    """Why the lab's trigger outputs failed the take (one sentence), or None when each emitted exactly `groups`."""
    for e in entries:
        if e["pulses"] != e["groups"]:
            return f"{e['vm']}'s output {e['output']} emitted {_pulses(e['pulses'])} for {e['groups']} groups."
        if e["outside"]["after"]:
            return (f"{e['vm']}'s output {e['output']} emitted {_pulses(e['outside']['after'])} after the take's "
                    "last group.")
    return None


def _pulses(n: int) -> str:
    return f"{n} pulse" + ("" if n == 1 else "s")
