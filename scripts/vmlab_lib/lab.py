"""A lab of N VMs, each running the packaged coord-node under systemd with a vivid camera and an ALSA microphone,
and the host's coord recording them (CONTRACT §11). A lab's state is RUN_DIR/lab.json, so `vmlab run` and
`vmlab down` in another process find its VMs."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import clocktruth, gpiosim, image, truth, usb
from .image import Artefacts, LabError, log, run
from .vm import SNAPSHOTS, VM

REPO = Path(__file__).resolve().parents[2]
GUEST = Path(__file__).resolve().parent / "guest"
TAKE_ID = re.compile(r"^\d{8}-\d{6}-.+-[0-9a-f]{6}$")
# snd-dummy's capture: silence on the card's own timer. snd-aloop's capture side (hw:Loopback,1,0) with nothing
# played into it failed with EIO under TCG's lag in one VM of two, so it is loaded for tests that play into it.
MIC_CARD = "Dummy"
MIC_DEVICE = "hw:Dummy,0,0"
# A take that nothing recorded because a node did not answer arming within the lead coord gave it (or armed past the
# start instant) is recorded again this many times: on the loaded 2-core machine a TCG guest sometimes takes longer
# than the lead to open its camera (seen in bench runs 1 and 3 and the VM tier); each retry is counted in
# Lab.arming_retries and logged.
ARMING_RETRIES = 2
SYSTEMD_FIELDS = ("Type", "ActiveState", "WatchdogUSec", "RestartUSec", "NRestarts", "MainPID")


def find_debs(explicit: str | None) -> dict[str, Path]:
    """coord and coord-node .debs: --debs DIR, else $COORD_VMLAB_DEBS, else the lab's cache (made by
    scripts/package.sh once when empty)."""
    folder = Path(explicit or os.environ.get("COORD_VMLAB_DEBS") or image.LAB / "debs")
    def newest(program: str) -> Path | None:
        found = sorted(folder.glob(f"{program}_*.deb"), key=lambda p: p.stat().st_mtime)
        return found[-1] if found else None
    if newest("coord-node") is None and not explicit and not os.environ.get("COORD_VMLAB_DEBS"):
        log(f"no packages in {folder}: running scripts/package.sh {folder} (a release build; long)")
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(["nice", "-n", "19", str(REPO / "scripts/package.sh"), str(folder)], check=True)
    debs = {p: newest(p) for p in ("coord", "coord-node")}
    missing = [p for p, d in debs.items() if d is None]
    if missing:
        raise LabError(f"{folder} holds no {missing[0]}_*.deb (make them with scripts/package.sh {folder}).")
    return debs


class Lab:
    def __init__(self, run_dir: Path, vms: list[VM], art: Artefacts):
        self.dir = run_dir
        self.vms = vms
        self.art = art
        self.boot_seconds: dict[str, float] = {}
        self.restored: dict[str, bool] = {}
        self.public_keys: dict[str, str] = {}
        self.arming_retries = 0
        self.kinds = {"camera": "vivid", "mic": "dummy"}
        # --trigger: each VM's gpio-sim chip and its line 0's global GPIO number (gpiosim.setup).
        self.trigger_chips: dict[str, tuple[str, int]] = {}
        self.trigger = False

    # --- making one -------------------------------------------------------------------------------------------
    @classmethod
    def up(cls, run_dir: Path, count: int, debs: dict[str, Path], *, clocksource: str | None = None,
           camera: dict | None = None, start_nodes: bool = True, camera_kind: str = "vivid",
           mic_kind: str = "dummy", trigger: bool = False) -> "Lab":
        """camera_kind vivid|uvc and mic_kind dummy|aloop|uac2 (CONTRACT §16): uvc and uac2 are gadgets on the lab's
        own dummy_hcd (usb.py), bound in the same guest by uvcvideo and snd-usb-audio."""
        usb.check_kinds(camera_kind, mic_kind)
        art = image.build()
        run_dir.mkdir(parents=True, exist_ok=True)
        share = run_dir / "share"
        (share / "debs").mkdir(parents=True, exist_ok=True)
        for deb in debs.values():
            shutil.copy2(deb, share / "debs" / deb.name)
        host = run_dir / "host"
        if not (host / "usr/bin/coord").exists():
            run(["dpkg-deb", "-x", debs["coord"], host])
        keys = run_dir / "keys"
        if not (keys / "coordinator.key_secret").exists():
            keys.mkdir(exist_ok=True)
            run([host / "usr/bin/coord", "keys", "new", "coordinator", "--dir", keys])
        shutil.copy2(keys / "coordinator.key", share / "coordinator.key")
        shutil.copy2(GUEST / "clock_responder.py", share / "clock_responder.py")
        if camera_kind in ("uvc", "libcamera") or mic_kind == "uac2":
            usb.share_usb(share, art.release)
        if trigger:
            gpiosim.share(share, art.release)
        vms = [VM(f"vm{i + 1}", run_dir, art, clocksource=clocksource) for i in range(count)]
        lab = cls(run_dir, vms, art)
        lab.kinds = {"camera": camera_kind, "mic": mic_kind}
        lab.trigger = trigger
        try:
            for vm in vms:
                vm.start()
            lab.save()
            # The VMs boot and install side by side: each has its own agent, and TCG makes every step slow.
            def prepare(vm: VM) -> None:
                lab.boot_seconds[vm.name] = vm.wait_booted()
                vm.after_boot()
                how = "restored" if vm.restored else "booted"
                log(f"{vm.name} {how}; answers after {lab.boot_seconds[vm.name]:.1f} s (port {vm.node_port})")
                lab.restored[vm.name] = vm.restored
                if SNAPSHOTS and not vm.restored:
                    log(f"{vm.name}: state saved for the next lab in {vm.save_snapshot():.1f} s")
                lab.install(vm, camera=camera, camera_kind=camera_kind, mic_kind=mic_kind)
                lab.start_clock_responder(vm)
                if start_nodes:
                    lab.start_node(vm)
            with ThreadPoolExecutor(max_workers=len(vms)) as pool:
                for future in [pool.submit(prepare, vm) for vm in vms]:
                    future.result()
            lab.save()
            lab.write_rig()
        except BaseException:
            lab.down(keep_disks=True)  # kept for a look at what went wrong
            raise
        return lab

    def install(self, vm: VM, camera: dict | None = None, camera_kind: str = "vivid", mic_kind: str = "dummy") -> None:
        """dpkg -i the packages, load vivid (or start the USB gadgets), snd-dummy and snd-aloop, write the node file
        and enrol the keys."""
        vm.sh("mkdir -p /mnt/host && (mountpoint -q /mnt/host || "
              "mount -t 9p -o trans=virtio,version=9p2000.L,ro host /mnt/host)")
        # xz under TCG: 3-6 minutes on the loaded machine.
        vm.sh("dpkg -i /mnt/host/debs/coord-node_*.deb /mnt/host/debs/coord_*.deb", timeout=900)
        # One capture node only (node_types=1): no output, radio or SDR devices beside it.
        vivid = "modprobe vivid n_devs=1 node_types=0x1 && " if camera_kind == "vivid" else ""
        vm.sh(vivid + "modprobe snd-dummy && modprobe snd-aloop && udevadm settle")
        usb_camera, usb_mic = usb.start_gadgets(vm, camera_kind, mic_kind)
        cam = (usb_camera or {"name": "cam0", "v4l2": "/dev/video0"}) | (camera or {})
        mic = usb_mic or MIC_DEVICE
        if mic_kind == "aloop":  # the click train into snd-aloop's playback side, recorded from its other side
            self.play_clicks(vm)
            mic = "hw:Loopback,1,0"
        node_file = (
            "version: 1\n"
            f"name: {vm.name}\n"
            "endpoint: tcp://0.0.0.0:5710\n"
            "staging: /var/lib/coord-node\n"
            f"cameras:\n  - {json.dumps(cam)}\n"
            f"audio:\n  - {{name: mic0, alsa: \"{mic}\"}}\n"
            "keys:\n  cert: /etc/coord-node/node.key_secret\n  authorized: /etc/coord-node/authorized\n"
        )
        if self.trigger:  # a trigger output on the VM's gpio-sim chip, cam0 bound to it (gpiosim.py says why)
            self.trigger_chips[vm.name] = gpiosim.setup(vm)
            node_file = gpiosim.triggered_node_file(node_file, self.trigger_chips[vm.name][0])
        vm.sh(f"cat > /etc/coord-node/node.yaml <<'EOF'\n{node_file}EOF\n"
              "mkdir -p /etc/coord-node/authorized && cp /mnt/host/coordinator.key /etc/coord-node/authorized/")
        key = vm.sh("sed -n 's/^ *public-key *= *\"\\(.*\\)\"/\\1/p' /etc/coord-node/node.key").strip()
        if len(key) != 40:
            raise LabError(f"{vm.name}: /etc/coord-node/node.key holds no 40-character public key.")
        self.public_keys[vm.name] = key

    def start_clock_responder(self, vm: VM) -> None:
        """The clock truth's guest end (guest/clock_responder.py) as a real-time unit: it sleeps in read() between
        bursts, so it takes no CPU from the node during a take, and when a request comes it wakes first."""
        vm.sh("systemctl stop vmlab-clock 2>/dev/null; systemctl reset-failed vmlab-clock 2>/dev/null; "
              "systemd-run --unit=vmlab-clock --collect -p CPUSchedulingPolicy=fifo -p CPUSchedulingPriority=60 "
              "python3 /mnt/host/clock_responder.py")

    def start_node(self, vm: VM) -> None:
        vm.sh("systemctl enable --now coord-node", timeout=240)

    def write_rig(self, *, fps: int = 30, size: str = "320x180", audio: str = "required",
                  takes_dir: Path | None = None, pressure_none: bool = False) -> Path:
        lines = ["version: 1", f"security: {{cert: {self.dir / 'keys/coordinator.key_secret'}}}", "nodes:"]
        for vm in self.vms:
            lines += [f"  - name: {vm.name}", f"    endpoint: tcp://127.0.0.1:{vm.node_port}",
                      f"    public_key: \"{self.public_keys[vm.name]}\""]
        lines += ["take:", "  name: vmlab", f"  fps: {fps}", f"  size: {size}", "  codec: mjpeg",
                  f"  takes_dir: {takes_dir or self.dir / 'takes'}", f"  audio: {audio}"]
        if pressure_none:  # what the camera delivers, unmixed with the pressure policy's slow-downs
            lines += ["pressure:", "  serious: none", "  critical: none"]
        rig = self.dir / "rig.yaml"
        rig.write_text("\n".join(lines) + "\n")
        return rig

    # --- using one --------------------------------------------------------------------------------------------
    @property
    def coord(self) -> Path:
        return self.dir / "host/usr/bin/coord"

    def vm(self, name: str) -> VM:
        for vm in self.vms:
            if vm.name == name:
                return vm
        raise LabError(f"this lab has no VM {name} (it has {', '.join(v.name for v in self.vms)}).")

    def start_take(self, takes_dir: Path, seconds: float, extra: list[str] | None = None,
                   timeout: float = 600, on_line=None) -> tuple[int, Path | None, str]:
        """Runs the host's coord start-take; returns its exit code, the new take directory and its stderr
        (`on_line`: given each stderr line as it comes, as usb.plug_puller)."""
        takes_dir.mkdir(parents=True, exist_ok=True)
        cmd = [str(self.coord), "start-take", "--rig", str(self.dir / "rig.yaml"), "--seconds", str(seconds),
               "--takes-dir", str(takes_dir)] + (extra or [])
        log_text = ""
        for attempt in range(1 + ARMING_RETRIES):
            before = set(takes_dir.iterdir())
            try:
                result = (subprocess.run(cmd, capture_output=True, text=True, timeout=timeout) if on_line is None
                          else usb.run_watching(cmd, on_line, timeout))
            except subprocess.TimeoutExpired as e:
                # The guests' side of a take that never ended goes with the VMs: keep it with the failure.
                said = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
                journals = self.journals()
                (self.dir / "start-take.log").write_text(log_text + said + "\n" + journals)
                raise LabError(f"coord start-take did not end within {timeout:.0f} s; it said: {said[-1500:]}\n"
                               f"{journals[-6000:]}") from None
            new = [p for p in set(takes_dir.iterdir()) - before if p.is_dir() and TAKE_ID.match(p.name)]
            log_text += result.stdout + result.stderr
            (self.dir / "start-take.log").write_text(log_text)
            late = "did not answer arming" in result.stderr or "to arm, past the start instant" in result.stderr
            if new or not late or attempt == ARMING_RETRIES:
                break
            self.arming_retries += 1
            log("a node did not arm in time (the emulated CPU under load); recording again")
            # an aborted arm's trigger pulses (--trigger) are no take's: the kernel's trace starts again with the retry
            for vm in self.vms:
                vm.sh("[ \"$(cat /sys/kernel/tracing/tracing_on 2>/dev/null)\" = 1 ] && echo > /sys/kernel/tracing/trace;"
                      " true")
        return result.returncode, (new[0] if len(new) == 1 else None), result.stderr

    def journals(self, lines: int = 60) -> str:
        """The end of every guest's coord-node journal (what a hung or failed take looked like from the nodes)."""
        parts = []
        for vm in self.vms:
            try:
                text = vm.sh(f"journalctl -u coord-node -n {lines} --no-pager -o short-monotonic 2>&1; true", timeout=60)
            except Exception as e:   # noqa: BLE001 - a guest that no longer answers is named, not raised past the failure
                text = f"(its journal could not be read: {e})"
            parts.append(f"--- {vm.name}: coord-node's journal, last {lines} lines\n{text}")
        return "\n".join(parts)

    def systemd(self, vm: VM) -> dict:
        out = vm.sh("systemctl show coord-node -p " + ",".join(SYSTEMD_FIELDS))
        fields = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        usec = fields.get("WatchdogUSec", "0")
        return {"Type": fields.get("Type"), "ActiveState": fields.get("ActiveState"),
                "WatchdogUSec": _usec(usec), "RestartUSec": _usec(fields.get("RestartUSec", "0")),
                "NRestarts": int(fields.get("NRestarts", "0") or 0),
                "MainPID": int(fields.get("MainPID", "0") or 0)}

    def watchdog_restart(self, vm: VM) -> float:
        """SIGSTOPs vm's coord-node; seconds until systemd runs a new main process that is active again."""
        out = vm.sh(WATCHDOG_PROBE, timeout=150).strip().splitlines()
        if not out or out[-1] == "timeout":
            raise LabError(f"{vm.name}: coord-node was not restarted within 120 s of SIGSTOP.")
        return float(out[-1])

    def report(self) -> dict:
        return {"vms": [{"name": vm.name, "kernel": vm.sh("uname -r").strip(), "systemd": self.systemd(vm),
                         "boot_s": round(self.boot_seconds.get(vm.name, 0.0), 2),
                         "restored": self.restored.get(vm.name, False), "camera": self.kinds["camera"],
                         "mic": self.kinds["mic"], "gadgets": usb.gadget_reports(vm)} for vm in self.vms]}

    # --- a real card's click train and a kernel's own clock rate (issue 26 items 3 and 5) ------------------------
    def play_clicks(self, vm: VM, device: str = "hw:Loopback,0,0") -> None:
        """Starts SYNCCLICK v1 on whole seconds of vm's CLOCK_MONOTONIC into `device` (guest/clicks.py), as a
        systemd unit, so the node can record it from the loopback's other side. Not a real-time one: at FIFO
        priority it slowed the node's camera opening past the arming deadline on the emulated CPU."""
        shutil.copy2(GUEST / "clicks.py", self.dir / "share/clicks.py")
        vm.sh("systemctl stop vmlab-clicks 2>/dev/null; systemctl reset-failed vmlab-clicks 2>/dev/null; "
              "systemd-run --unit=vmlab-clicks --collect -p Nice=-15 "
              f"python3 /mnt/host/clicks.py --device {device} --report /run/vmlab-clicks.json")

    def clicks_report(self, vm: VM, timeout: float = 60) -> dict:
        """The player's own figures (xruns, how late its position readings were), once it has written them."""
        out = vm.sh("for i in $(seq %d); do [ -s /run/vmlab-clicks.json ] && break; sleep 0.5; done; "
                    "cat /run/vmlab-clicks.json 2>/dev/null || systemctl status vmlab-clicks --no-pager -n 20"
                    % int(timeout * 2), timeout=timeout + 30)
        try:
            return json.loads(out)
        except ValueError:
            raise LabError(f"{vm.name}: the click player wrote no report: {out.strip()[-600:]}") from None

    def stop_clicks(self, vm: VM) -> None:
        vm.sh("systemctl stop vmlab-clicks 2>/dev/null; rm -f /run/vmlab-clicks.json; true")

    def use_microphone(self, vm: VM, device: str) -> None:
        """Points the node file's microphone at `device` and restarts the node (returns once it sent READY=1)."""
        vm.sh(f"sed -i 's|alsa: \"[^\"]*\"|alsa: \"{device}\"|' /etc/coord-node/node.yaml && "
              "systemctl restart coord-node", timeout=240)

    def use_camera(self, vm: VM, device: str, restart: bool = True) -> None:
        """Points the node file's camera at the V4L2 node `device` (and restarts the node unless told not to)."""
        vm.sh(f"sed -i 's|\"v4l2\": \"[^\"]*\"|\"v4l2\": \"{device}\"|' /etc/coord-node/node.yaml"
              + (" && systemctl restart coord-node" if restart else ""), timeout=240)

    def set_clock_rate(self, vm: VM, ppm: float) -> float:
        """Sets the guest kernel's frequency offset (adjtimex ADJ_FREQUENCY, as `adjtimex --frequency`): its
        CLOCK_MONOTONIC then runs `ppm` fast against the host's. Returns the kernel's value read back."""
        return float(vm.sh(ADJTIMEX % ppm).strip())

    def clocksource(self, vm: VM, name: str | None = None) -> str:
        """The guest's clock source, switched to `name` first when given (hpet: the host's time through QEMU's
        emulated HPET; tsc: the host's TSC over the guest kernel's own calibration of its rate)."""
        path = "/sys/devices/system/clocksource/clocksource0/current_clocksource"
        if name:
            vm.sh(f"echo {name} > {path}")
        return vm.sh(f"cat {path}").strip()

    # --- state across processes ----------------------------------------------------------------------------
    def save(self) -> None:
        state = {"vms": [{"name": v.name, "node_port": v.node_port, "clocksource": v.clocksource,
                          "pid": int(v.pidfile.read_text()) if v.pidfile.exists() and v.pidfile.read_text().strip()
                          else (v.proc.pid if v.proc else None)} for v in self.vms],
                 "public_keys": self.public_keys, "boot_seconds": self.boot_seconds, "restored": self.restored,
                 "kinds": self.kinds}
        (self.dir / "lab.json").write_text(json.dumps(state, indent=2) + "\n")

    @classmethod
    def load(cls, run_dir: Path) -> "Lab":
        path = run_dir / "lab.json"
        if not path.exists():
            raise LabError(f"{run_dir} holds no lab (no lab.json): start one with `vmlab up {run_dir}`.")
        state = json.loads(path.read_text())
        art = Artefacts()
        vms = [VM(v["name"], run_dir, art, node_port=v["node_port"], clocksource=v.get("clocksource"))
               for v in state["vms"]]
        lab = cls(run_dir, vms, art)
        lab.public_keys = state.get("public_keys", {})
        lab.boot_seconds = state.get("boot_seconds", {})
        lab.restored = state.get("restored", {})
        lab.kinds = state.get("kinds", lab.kinds)
        return lab

    def down(self, keep_disks: bool = False) -> None:
        for vm in self.vms:
            vm.stop()
            if not keep_disks:
                (vm.dir / "disk.qcow2").unlink(missing_ok=True)  # a VM's writes: hundreds of MB


# Runs in the guest, so the agent's round trips do not count: SIGSTOP the node, then time until systemd has a
# new main process that is active again (killed by the watchdog, RestartSec=, READY=1).
WATCHDOG_PROBE = r"""python3 - <<'EOF'
import subprocess, time
def show(p):
    return subprocess.run(["systemctl", "show", "-p", p, "--value", "coord-node"], capture_output=True,
                          text=True).stdout.strip()
pid = show("MainPID")
start = time.monotonic()
subprocess.run(["kill", "-STOP", pid], check=True)
while time.monotonic() - start < 120:
    now = show("MainPID")
    if now not in (pid, "0") and show("ActiveState") == "active":
        print(time.monotonic() - start)
        break
    time.sleep(0.1)  # polling systemd's state, not standing in for an event
else:
    print("timeout")
EOF
"""


# adjtimex(2) with ADJ_FREQUENCY (struct timex on x86-64: int modes at 0, long freq at 16, in 2^-16 ppm); prints the
# frequency the kernel holds afterwards, in ppm.
ADJTIMEX = r"""python3 -c '
import ctypes, struct
buf = ctypes.create_string_buffer(256)
struct.pack_into("i", buf, 0, 2)
struct.pack_into("l", buf, 16, round(%r * 65536))
if ctypes.CDLL(None, use_errno=True).adjtimex(buf) < 0:
    raise SystemExit("adjtimex failed: errno %%d" %% ctypes.get_errno())
print(struct.unpack_from("l", buf, 16)[0] / 65536)
'"""


def _usec(text: str) -> int:
    """systemctl show's WatchdogUSec or RestartUSec: a number of µs, or a span like 10s / 1min 30s / infinity / 0."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    if text in ("", "infinity"):
        return 0
    units = {"us": 1, "ms": 1000, "s": 10**6, "min": 60 * 10**6, "h": 3600 * 10**6}
    total = 0
    for number, unit in re.findall(r"([\d.]+)\s*([a-z]+)", text):
        total += int(float(number) * units.get(unit, 0))
    return total


def take(out_dir: Path, count: int, seconds: float, debs: dict[str, Path], *, keep: bool = False,
         clocksource: str | None = None, camera: str = "vivid", mic: str = "dummy",
         unplug: tuple[str, float] | None = None,
         trigger: bool = False) -> int:
    """CONTRACT §11's `take`: prints the take directory as its last stdout line; exit 0 only when complete.
    `unplug` (vm, seconds): that VM's webcam gadget is unbound so many seconds into the recording."""
    out_dir.mkdir(parents=True, exist_ok=True)
    run_dir = out_dir / ".vmlab"
    t0 = time.monotonic()
    lab = Lab.up(run_dir, count, debs, clocksource=clocksource, camera_kind=camera, mic_kind=mic, trigger=trigger)
    try:
        lab.write_rig(takes_dir=out_dir, **({"fps": gpiosim.LAB_FPS} if trigger else {}))
        log(f"{count} node(s) ready after {time.monotonic() - t0:.1f} s; recording {seconds:g} s")
        on_line = None
        if unplug:
            on_line = usb.plug_puller(usb.arm_unplug(lab.vm(unplug[0]), run_dir / "share"), unplug[1])
        before = clocktruth.bursts(lab.vms)  # the clock truth (clocktruth.py): a burst before and one after
        code, take_dir, stderr = lab.start_take(out_dir, seconds, on_line=on_line)
        truths = clocktruth.truths(before, clocktruth.bursts(lab.vms))
        report = lab.report()
        report["take"] = {"exit": code, "dir": str(take_dir) if take_dir else None,
                          "arming_retries": lab.arming_retries}
        # --trigger (CONTRACT §17): each output's pulses from the kernel's edge timestamps against the grid.
        trigger_problem = None
        manifest = (json.loads((take_dir / "manifest.json").read_text())
                    if take_dir is not None and (take_dir / "manifest.json").exists() else None)
        report["clock_truth"] = clocktruth.report(truths, manifest)
        if trigger and manifest is not None:
            edges = {vm.name: gpiosim.read_edges(vm, lab.trigger_chips[vm.name][1]) for vm in lab.vms}
            report["trigger"] = [gpiosim.figures(manifest, vm.name, edges[vm.name]) for vm in lab.vms]
            report["trigger_skew_us"] = truth.trigger_truth(report["trigger"], edges, manifest, truths)
            trigger_problem = gpiosim.check(report["trigger"])
        if camera == "uvc" and manifest is not None:
            report["uvc_truth"] = truth.uvc_truth(manifest, take_dir, truths)
        if unplug:
            report["take"]["unplug"] = {"vm": unplug[0], "at_s": unplug[1]}
        (out_dir / "vmlab.json").write_text(json.dumps(report, indent=2) + "\n")
    finally:
        if not keep:
            lab.down()
            for bulky in ("share", "host"):  # the packages and the unpacked coord: ~300 MB the take does not need
                shutil.rmtree(run_dir / bulky, ignore_errors=True)
    if stderr.strip():
        print(stderr.strip(), file=__import__("sys").stderr)
    if take_dir is None:
        raise LabError(f"coord start-take (exit {code}) left no take directory in {out_dir}.")
    if trigger_problem:
        print(f"vmlab: {trigger_problem}", file=__import__("sys").stderr)
    print(take_dir)
    return code or (1 if trigger_problem else 0)
