#!/usr/bin/env python3
"""Benchmark: how well a coord rig is really synchronized (issue 3 targets), truth from the SYNCSTRIPE.

    .venv/bin/python bench/sync.py [--only NAME[,NAME]] [--quick] [--coord PATH] [--out FILE] [--keep]
                                   [--work DIR=/tmp/coord-bench-sync] [--wait-quiet S=600]

Ground truth never comes from the nodes' own timestamps:
  * frame-centre sync: the true exposure-centre time painted into every frame's SYNCSTRIPE, decoded by
    scripts/check-take.py (imported, not copied), which also runs every contract check on the take;
  * clock alignment: the simulated clocks' truth (`coord demo --truth-file`, or the offsets and drifts this
    script drew itself and gave the lab's coord-node processes), against every clock mapping the
    coordinator sent a node (manifest `clock_track`). The error of a point is
    offset_us − (clock_offset_us + drift_ppm·1e-6·(t_us − R)); points whose t_us lies within the
    recording [t0_us, t0_us + groups·frame_period_us] are scored, all points are reported too.

Scenarios (run in this order, one take at a time; the machine has 2 cores):
  clock-loopback       demo 8×1, ±500 ms, ±100 ppm, 30 s            offset error p99 ≤ 20 µs
  clock-lab            the same, 8 nodes in netlab (0.2 ms, 0.5 ms)  offset error p99 ≤ 50 µs
  spread-loopback-4x1  demo 4×1, 30 fps, 60 s                        true p99 ≤ 50 µs, claim within
  spread-loopback-4x1-pi  the same 4×1 take with Pi-like sensors    true p99 ≤ 50 µs, claim within
                       (--sensor-delay-frames 3 --sensor-line-us 20: a duration applies 3 frames late, in 20 µs lines)
  spread-loopback-8x2  demo 8×2, 30 fps, 60 s (30 s if it cannot      max(20 µs, 25 %) of truth
                       keep up: dups or check-take failures)
  spread-lab-4x1       4×1 in netlab via start-take, 60 s            true p99 ≤ 100 µs, claim as above
  spread-lab-8x2       8×2 in netlab via start-take, 60 s (or 30 s)
  repeat-20            20 × `coord demo` (3 nodes, 5 s): check-take passes and ffprobe counts `groups`
                       frames in every file, every time

Prints one JSON document on stdout (progress on stderr) and writes it to --out
(default bench/results/sync.json). Take directories of passing runs are removed unless --keep;
failing ones are kept and named in the output. The lab needs root. The machine is shared: before each take
the benchmark waits (up to --wait-quiet s) until other processes use < 0.15 cores, and it records the CPU
other processes used during the take (`host_load`, `host_quiet`), since that load is part of any result.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import random
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


def _load_check_take():
    spec = importlib.util.spec_from_file_location("check_take", ROOT / "scripts" / "check-take.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


check_take = _load_check_take()
percentile = check_take.percentile

LAB_DELAY_MS, LAB_JITTER_MS = 0.2, 0.5
LAB_OFFSET_MS, LAB_DRIFT_PPM = 500.0, 100.0
NODE_PORT = 5710


def log(msg: str):
    print(f"sync: {msg}", file=sys.stderr, flush=True)


def stats(values) -> dict:
    values = list(values)
    return {"n": len(values), "p50": round(percentile(values, .5), 1), "p99": round(percentile(values, .99), 1),
            "max": round(max(values, default=0), 1)}


# ---------------------------------------------------------------- the host's other load

TICK = os.sysconf("SC_CLK_TCK")


def _proc_table() -> dict[int, tuple[int, str, int, int]]:
    """pid → (ppid, comm, own ticks utime+stime, ticks incl. reaped children)."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            raw = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        comm = raw[raw.index("(") + 1:raw.rindex(")")]
        f = raw[raw.rindex(")") + 2:].split()
        own = int(f[11]) + int(f[12])
        out[int(d)] = (int(f[1]), comm, own, own + int(f[13]) + int(f[14]))
    return out


def _busy_ticks() -> int:
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(f) - f[3] - f[4]          # everything but idle and iowait


class HostLoad(threading.Thread):
    """Samples, once a second, the CPU the host spends outside this benchmark's own process tree (other
    sessions' builds, tests, takes): total busy time from /proc/stat minus this process tree's time
    (reaped children included through cutime/cstime), and which foreign processes used it. A shared 2-core
    machine makes that load part of any timing result, so every take records it."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop_event = threading.Event()
        self.samples: list[float] = []            # foreign cores per 1 s interval
        self.by_comm: dict[str, float] = {}       # foreign CPU seconds by process name

    @staticmethod
    def snapshot():
        table = _proc_table()
        me = os.getpid()
        children: dict[int, list[int]] = {}
        for pid, (ppid, *_rest) in table.items():
            children.setdefault(ppid, []).append(pid)
        tree, todo = set(), [me]
        while todo:
            p = todo.pop()
            if p in tree:
                continue
            tree.add(p)
            todo += children.get(p, [])
        mine = sum(table[p][3] for p in tree if p in table)
        foreign = {p: (v[1], v[2]) for p, v in table.items() if p not in tree}
        return time.monotonic(), _busy_ticks(), mine, foreign

    def interval(self, a, b) -> tuple[float, dict[str, float]]:
        (t0, busy0, mine0, f0), (t1, busy1, mine1, f1) = a, b
        dt = max(1e-3, t1 - t0)
        cores = max(0.0, ((busy1 - busy0) - (mine1 - mine0)) / TICK / dt)
        comms: dict[str, float] = {}
        for pid, (comm, ticks) in f1.items():
            d = ticks - f0.get(pid, (comm, ticks if pid in f0 else 0))[1]
            if d > 0:
                comms[comm] = comms.get(comm, 0) + d / TICK
        return cores, comms

    def run(self):
        prev = self.snapshot()
        while not self.stop_event.wait(1.0):
            cur = self.snapshot()
            cores, comms = self.interval(prev, cur)
            self.samples.append(cores)
            for c, v in comms.items():
                self.by_comm[c] = self.by_comm.get(c, 0) + v
            prev = cur

    def finish(self) -> dict:
        self.stop_event.set()
        self.join(timeout=5)
        top = sorted(self.by_comm.items(), key=lambda kv: -kv[1])[:6]
        mean = sum(self.samples) / len(self.samples) if self.samples else 0.0
        return {"other_cores_mean": round(mean, 2), "other_cores_max_1s": round(max(self.samples, default=0), 2),
                "seconds_over_0.5_core": sum(1 for x in self.samples if x > 0.5),
                "other_cpu_s": round(sum(self.samples), 1),
                "top_other_processes_cpu_s": {c: round(v, 1) for c, v in top if v >= 0.1},
                "quiet": mean <= 0.1 and sum(1 for x in self.samples if x > 0.5) == 0}


def wait_quiet(max_wait_s: float, window_s: float = 3.0, limit_cores: float = 0.15) -> dict:
    """Waits (at most max_wait_s) until two consecutive windows of foreign load are under limit_cores."""
    t = time.monotonic()
    good, last = 0, None
    while True:
        a = HostLoad.snapshot()
        time.sleep(window_s)
        cores, comms = HostLoad().interval(a, HostLoad.snapshot())
        last = {"cores": round(cores, 2), "top": sorted(comms, key=lambda c: -comms[c])[:3]}
        good = good + 1 if cores <= limit_cores else 0
        waited = time.monotonic() - t
        if good >= 2:
            return {"waited_s": round(waited, 1), "quiet": True}
        if waited >= max_wait_s:
            return {"waited_s": round(waited, 1), "quiet": False, "last": last}
        if good == 0 and int(waited) % 30 < window_s:
            log(f"waiting for the machine to be quiet: other processes use {cores:.2f} cores ({', '.join(last['top'])})")


# ---------------------------------------------------------------- scoring one take

def clock_figures(take: Path, truth: dict) -> dict:
    """Clock-offset error of every clock_track point against the simulated clocks' truth."""
    m = json.loads((take / "manifest.json").read_text())
    ref = truth["clock_reference_us"]
    nodes = {n["name"]: n for n in truth["nodes"]}
    t0, t_end = m["t0_us"], m["t0_us"] + m["groups"] * m["frame_period_us"]
    points = []
    for p in m.get("clock_track", []):
        n = nodes[p["node"]]
        true_offset = n["clock_offset_us"] + n["drift_ppm"] * 1e-6 * (p["t_us"] - ref)
        err = p["offset_us"] - true_offset
        points.append({"node": p["node"], "t_us": p["t_us"], "err": err, "unc": p["uncertainty_us"],
                       "bound": p["bound_us"], "in_take": t0 <= p["t_us"] <= t_end,
                       "drift_err_ppm": p["drift_ppm"] - n["drift_ppm"]})

    def summary(pts):
        errs = [abs(p["err"]) for p in pts]
        return {**{k: v for k, v in stats(errs).items()},
                "within_3_uncertainty": round(sum(abs(p["err"]) <= 3 * p["unc"] for p in pts) / len(pts), 4) if pts else None,
                "within_bound": round(sum(abs(p["err"]) <= p["bound"] for p in pts) / len(pts), 4) if pts else None,
                "uncertainty_us_p50": round(percentile([p["unc"] for p in pts], .5), 1),
                "bound_us_p50": round(percentile([p["bound"] for p in pts], .5), 1),
                "drift_error_ppm_max": round(max((abs(p["drift_err_ppm"]) for p in pts), default=0), 3)}

    in_take = [p for p in points if p["in_take"]]
    per_node = {}
    for name in sorted(nodes):
        mine = [abs(p["err"]) for p in in_take if p["node"] == name]
        per_node[name] = {"n": len(mine), "p99": round(percentile(mine, .99), 1),
                          "max": round(max(mine, default=0), 1),
                          "mean_signed": round(sum(p["err"] for p in in_take if p["node"] == name) / len(mine), 1)
                          if mine else None}
    # the per-camera figure the manifest carries (the mapping at group 0) against the truth at t0
    cams = []
    for c in m["cameras"]:
        n = nodes[c["node"]]
        true_offset = n["clock_offset_us"] + n["drift_ppm"] * 1e-6 * (t0 - ref)
        cams.append({"node": c["node"], "camera": c["camera"],
                     "offset_error_us": round(c["clock"]["offset_us"] - true_offset, 1),
                     "drift_error_ppm": round(c["clock"]["drift_ppm"] - n["drift_ppm"], 3),
                     "uncertainty_us": c["clock"]["uncertainty_us"], "bound_us": c["clock"].get("bound_us")})
    worst = sorted(in_take, key=lambda p: -abs(p["err"]))[:3]
    worst = [{"node": p["node"], "t_minus_t0_ms": round((p["t_us"] - t0) / 1000, 1), "error_us": round(p["err"], 1),
              "drift_error_ppm": round(p["drift_err_ppm"], 2), "uncertainty_us": p["unc"], "bound_us": p["bound"]}
             for p in worst]
    return {"offset_error_us_in_take": summary(in_take), "offset_error_us_all": summary(points),
            "worst_in_take": worst,
            "per_node_in_take": per_node, "manifest_cameras_at_t0": cams}


def runs_of(groups: list[int]) -> list[str]:
    """[3, 4, 5, 9] → ["3-5", "9"]."""
    out, start, prev = [], None, None
    for g in groups + [None]:
        if start is not None and (g is None or g != prev + 1):
            out.append(f"{start}-{prev}" if prev != start else f"{start}")
            start = None
        if g is not None and start is None:
            start = g
        prev = g
    return out


def spread_figures(take: Path, target_us: float | None = None) -> dict:
    """check-take's checks and true spread, beside the report's claim and bound."""
    failures, fig = check_take.check(take, per_group=True)
    by_group = fig.pop("true_spread_by_group")
    m = json.loads((take / "manifest.json").read_text())
    rep = json.loads((take / "sync-report.json").read_text())
    true, claim = fig["true_spread_us"], rep["spread_us"]
    bound = rep.get("spread_bound_us", {})
    est = [c["estimate_error_us"]["p99"] for c in fig["cameras"]]
    return {
        "status": m["status"], "groups": m["groups"], "cameras": len(m["cameras"]),
        "dups": sum(c["dropped"] for c in m["cameras"]),
        "check_take_passed": not failures, "check_take_failures": failures[:20],
        "true_spread_us": true, "claimed_spread_us": claim, "spread_bound_us": bound,
        "claim_minus_truth_p99_us": claim["p99"] - true["p99"],
        "bound_minus_truth_p99_us": (bound["p99"] - true["p99"]) if bound else None,
        "center_estimate_error_us_p99_worst_camera": max(est, default=0),
        **({"groups_over_target": len(over := [g for g, v in by_group.items() if v > target_us]),
            "groups_over_target_runs": runs_of(over)[:20]} if target_us is not None else {}),
        "per_camera": fig["cameras"],
    }


def claim_ok(claim_p99, true_p99) -> bool:
    return abs(claim_p99 - true_p99) <= max(20.0, 0.25 * true_p99)


# ---------------------------------------------------------------- running takes

class Bench:
    def __init__(self, args):
        self.args = args
        self.coord = str(Path(args.coord).resolve())
        self.node = str(Path(args.coord_node).resolve())
        self.work = Path(args.work).resolve()
        self.work.mkdir(parents=True, exist_ok=True)

    def fresh_dir(self, name: str) -> Path:
        d = self.work / name
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        return d

    def run_coord(self, argv: list[str], workdir: Path, seconds: float) -> dict:
        """Runs one coord command to completion with a generous timeout; returns rc, wall time, take dir."""
        takes = workdir / "takes"
        takes.mkdir(exist_ok=True)
        before = set(takes.iterdir())
        err_path = workdir / "coord.stderr"
        out_path = workdir / "coord.stdout"
        timeout = 180 + 6 * seconds
        quiet = wait_quiet(self.args.wait_quiet) if self.args.wait_quiet > 0 else None
        load = HostLoad()
        load.start()
        t = time.monotonic()
        with open(err_path, "w") as err, open(out_path, "w") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=workdir,
                                    start_new_session=True)
            try:
                rc = proc.wait(timeout=timeout)
                hung = False
            except subprocess.TimeoutExpired:
                hung = True
                os.killpg(proc.pid, signal.SIGINT)          # one Ctrl-C: stop and collect
                try:
                    rc = proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    rc = proc.wait()
        wall = time.monotonic() - t
        host = load.finish()
        if quiet is not None:
            host["waited_for_quiet"] = quiet
        if not host["quiet"]:
            log(f"note: other processes used {host['other_cores_mean']} cores on average during this take "
                f"(max {host['other_cores_max_1s']}): {host['top_other_processes_cpu_s']}")
        new = sorted(set(takes.iterdir()) - before)
        take = new[0] if len(new) == 1 else None
        stderr_lines = err_path.read_text(errors="replace").splitlines()
        res = {"command": shlex.join(argv), "rc": rc, "wall_s": round(wall, 1), "take_dir": str(take) if take else None,
               "stderr_path": str(err_path), "host_load": host}
        if hung:
            res["hung"] = f"no exit within {timeout:.0f} s; sent SIGINT"
        if rc != 0 or take is None:
            res["stderr_tail"] = stderr_lines[-25:]
            res["stdout_tail"] = out_path.read_text(errors="replace").splitlines()[-25:]
        return res

    def demo(self, name: str, *, nodes: int, cams: int, seconds: float, seed: int, fps: int = 30,
             offset_ms: float | None = None, drift_ppm: float | None = None, extra: tuple[str, ...] = ()) -> dict:
        wd = self.fresh_dir(name)
        truth_path = wd / "truth.json"
        argv = [self.coord, "demo", "--nodes", str(nodes), "--cameras-per-node", str(cams), "--seconds", f"{seconds:g}",
                "--fps", str(fps), "--seed", str(seed), "--takes-dir", str(wd / "takes"), "--truth-file", str(truth_path)]
        if offset_ms is not None:
            argv += ["--clock-offset-ms", f"{offset_ms:g}"]
        if drift_ppm is not None:
            argv += ["--drift-ppm", f"{drift_ppm:g}"]
        if self.args.secure:
            argv += ["--secure"]
        argv += list(extra)
        log(f"{name}: {shlex.join(argv[1:])}")
        res = self.run_coord(argv, wd, seconds)
        res.update({"workdir": str(wd), "seed": seed, "nodes": nodes, "cameras_per_node": cams,
                    "seconds": seconds, "fps": fps})
        if truth_path.is_file():
            res["truth"] = json.loads(truth_path.read_text())
        return res

    def lab_take(self, name: str, *, nodes: int, cams: int, seconds: float, seed: int, fps: int = 30) -> dict:
        from netlab import Lab, _read_line
        wd = self.fresh_dir(name)
        rng = random.Random(seed)
        res = {"workdir": str(wd), "seed": seed, "nodes": nodes, "cameras_per_node": cams, "seconds": seconds,
               "fps": fps, "lab": {"delay_ms": LAB_DELAY_MS, "jitter_ms": LAB_JITTER_MS, "seed": seed},
               "clock_draws": {"offset_ms": LAB_OFFSET_MS, "drift_ppm": LAB_DRIFT_PPM}}
        with Lab(nodes=nodes, delay_ms=LAB_DELAY_MS, jitter_ms=LAB_JITTER_MS, seed=seed, tag=f"sync-{name}") as lab:
            ref = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
            truth = {"clock_reference_us": ref, "nodes": []}
            procs, node_cmds, rig = [], [], ["version: 1", "nodes:"]
            if self.args.secure:
                import zmq.auth
                (wd / "authorized").mkdir()
                zmq.auth.create_certificates(str(wd), "coordinator")
                (wd / "authorized" / "coordinator.key").write_bytes((wd / "coordinator.key").read_bytes())
                rig[1:1] = ["security:", f"  cert: {wd / 'coordinator.key_secret'}"]
            camlist = ",".join(f"cam{k}" for k in range(cams))
            for i in range(1, nodes + 1):
                nm = f"node-{i}"
                off = round(rng.uniform(-LAB_OFFSET_MS, LAB_OFFSET_MS) * 1000)
                drift = rng.uniform(-LAB_DRIFT_PPM, LAB_DRIFT_PPM)
                truth["nodes"].append({"name": nm, "clock_offset_us": off, "drift_ppm": drift})
                staging = wd / "staging" / nm
                staging.mkdir(parents=True)
                endpoint = f"tcp://{lab.node_address(i)}:{NODE_PORT}"
                argv = [self.node, "--name", nm, "--endpoint", endpoint, "--staging", str(staging),
                        "--synthetic", camlist, f"--clock-offset-us={off}", f"--clock-drift-ppm={drift!r}",
                        f"--clock-reference-us={ref}", "--timestamp-jitter-us=30", "--seed", str(seed * 100 + i),
                        "--parent-pid", str(os.getpid())]
                if self.args.secure:
                    import zmq.auth
                    zmq.auth.create_certificates(str(wd), nm)
                    argv += ["--cert", str(wd / f"{nm}.key_secret"), "--authorized", str(wd / "authorized")]
                else:
                    argv += ["--insecure"]
                node_cmds.append(f"[{lab.netns(i)}] " + shlex.join(argv))
                err = open(wd / f"{nm}.stderr", "w")
                procs.append((nm, lab.start_node(i, argv, stdout=subprocess.PIPE, stderr=err)))
                err.close()
                rig += [f"  - name: {nm}", f"    endpoint: {endpoint}"]
                if self.args.secure:
                    rig += [f"    cert: {wd / (nm + '.key')}"]
            for nm, p in procs:
                line = _read_line(p, 15)
                if not line or not line.startswith("READY"):
                    raise RuntimeError(f"{nm} did not print READY (got {line!r}); see {wd / (nm + '.stderr')}")
            (wd / "truth.json").write_text(json.dumps(truth, indent=1))
            (wd / "rig.yaml").write_text("\n".join(rig) + "\n")
            argv = [self.coord, "start-take", "--rig", str(wd / "rig.yaml"), "--seconds", f"{seconds:g}",
                    "--takes-dir", str(wd / "takes"), "--fps", str(fps), "--name", name]
            log(f"{name}: lab {lab.prefix} up ({nodes} nodes); {shlex.join(argv[1:])}")
            res.update(self.run_coord(argv, wd, seconds))
            res["node_commands"] = node_cmds
            res["truth"] = truth
            alive = [nm for nm, p in procs if p.poll() is None]
            if len(alive) != nodes:
                res["nodes_exited_early"] = [(nm, p.returncode) for nm, p in procs if p.poll() is not None]
        res["lab"]["delayer_stats"] = {str(k): v for k, v in lab.delayer_stats.items()}
        return res

    def score(self, res: dict, target_us: float | None = None) -> dict:
        """check-take figures for every take, clock-track figures wherever the truth is known."""
        take = Path(res["take_dir"]) if res.get("take_dir") else None
        if take is None or not (take / "manifest.json").is_file():
            res["error"] = "no take directory with a manifest"
            return res
        try:
            res["sync"] = spread_figures(take, target_us)
        except Exception as e:      # a damaged take: report, do not hide
            res["error"] = f"check-take raised {type(e).__name__}: {e}"
            return res
        if res.get("truth"):
            res["clock"] = clock_figures(take, res["truth"])
        return res

    def cleanup(self, res: dict):
        if res.get("passed") and not self.args.keep and res.get("workdir"):
            shutil.rmtree(res["workdir"], ignore_errors=True)
            res["take_dir_removed"] = True


# ---------------------------------------------------------------- scenarios

def _compact(res: dict) -> dict:
    """Drops the per-camera bulk from a run record (kept for failing runs)."""
    out = dict(res)
    if "sync" in out and out.get("passed"):
        out["sync"] = {k: v for k, v in out["sync"].items() if k != "per_camera"}
    return out


def clock_scenario(b: Bench, name: str, lab: bool, target_us: float) -> dict:
    seconds = 5 if b.args.quick else 30
    seed = 31 if not lab else 32
    t = time.monotonic()
    if lab:
        res = b.lab_take(name, nodes=8, cams=1, seconds=seconds, seed=seed)
    else:
        res = b.demo(name, nodes=8, cams=1, seconds=seconds, seed=seed, offset_ms=500, drift_ppm=100)
    b.score(res)
    c = res.get("clock", {}).get("offset_error_us_in_take")
    ok = bool(c and c["n"] > 0 and res["rc"] == 0 and c["p99"] <= target_us)
    res["passed"] = ok and res.get("sync", {}).get("check_take_passed", False)
    res["target"] = f"in-take clock offset error p99 <= {target_us:g} us"
    res["target_met"] = ok
    res["scenario_wall_s"] = round(time.monotonic() - t, 1)
    if c:
        log(f"{name}: offset error p50/p99/max {c['p50']}/{c['p99']}/{c['max']} µs over {c['n']} points, "
            f"≤3σ {c['within_3_uncertainty']}, ≤bound {c['within_bound']}; worst {res['clock']['worst_in_take'][:1]} → "
            f"{'PASS' if ok else 'FAIL'}")
    else:
        log(f"{name}: FAILED: {res.get('error') or res.get('stderr_tail')}")
    b.cleanup(res)
    return _compact(res)


def spread_scenario(b: Bench, name: str, lab: bool, nodes: int, cams: int, target_us: float, seed: int,
                    fallback: bool, extra: tuple[str, ...] = ()) -> dict:
    seconds = 5 if b.args.quick else 60
    t = time.monotonic()
    attempts = []
    while True:
        if lab:
            res = b.lab_take(name, nodes=nodes, cams=cams, seconds=seconds, seed=seed)
        else:
            res = b.demo(name, nodes=nodes, cams=cams, seconds=seconds, seed=seed, extra=extra)
        b.score(res, target_us)
        s = res.get("sync")
        kept_up = bool(s and res["rc"] == 0 and s["dups"] == 0 and s["check_take_passed"])
        if fallback and not kept_up and seconds == 60 and not res.get("hung") and s is not None:
            # the machine could not keep up at 60 s: record it and retry at 30 s (kept for inspection)
            res["could_not_keep_up"] = (f"{s['dups']} dup(s), check-take {'passed' if s['check_take_passed'] else 'failed'}, "
                                        f"rc {res['rc']} at {seconds} s; retried at 30 s")
            log(f"{name}: {res['could_not_keep_up']}")
            keep = b.work / f"{name}-60s"
            if keep.exists():
                shutil.rmtree(keep)
            shutil.move(res["workdir"], keep)
            res["workdir"] = str(keep)
            if res.get("take_dir"):
                res["take_dir"] = res["take_dir"].replace(str(b.work / name), str(keep), 1)
            attempts.append(_compact(res))
            seconds = 30
            continue
        break
    if s:
        tp, cp = s["true_spread_us"]["p99"], s["claimed_spread_us"]["p99"]
        true_ok = tp <= target_us
        c_ok = claim_ok(cp, tp)
        res["target"] = f"true spread p99 <= {target_us:g} us; claimed p99 within max(20 us, 25%) of true p99"
        res["target_met"] = {"true_p99": true_ok, "claim_vs_truth": c_ok}
        res["passed"] = true_ok and c_ok and s["check_take_passed"] and res["rc"] == 0
        log(f"{name}: {s['groups']} groups × {s['cameras']} cams, dups {s['dups']}, check-take "
            f"{'ok' if s['check_take_passed'] else 'FAILED'}; true p50/p99/max {s['true_spread_us']['p50']}/{tp}/"
            f"{s['true_spread_us']['max']} µs, claim p99 {cp}, bound p99 {s['spread_bound_us'].get('p99')}; "
            f"{s['groups_over_target']} group(s) over {target_us:g} µs {' '.join(s['groups_over_target_runs'][:5])} → "
            f"{'PASS' if res['passed'] else 'FAIL'}")
    else:
        res["passed"] = False
        res["target_met"] = False
        log(f"{name}: FAILED: {res.get('error')} {res.get('stderr_tail')}")
    res["scenario_wall_s"] = round(time.monotonic() - t, 1)
    if attempts:
        res["earlier_attempts"] = attempts
    b.cleanup(res)
    return _compact(res)


def repeat_scenario(b: Bench, name: str) -> dict:
    n = 3 if b.args.quick else 20
    t = time.monotonic()
    runs = []
    for k in range(n):
        res = b.demo(f"{name}/{k:02d}", nodes=3, cams=1, seconds=5, seed=1000 + k)
        b.score(res)
        s = res.get("sync")
        counts = {}
        if res.get("take_dir"):
            m = json.loads((Path(res["take_dir"]) / "manifest.json").read_text())
            for c in m["cameras"]:
                mkv = Path(res["take_dir"]) / c["node"] / f"{c['camera']}.mkv"
                try:
                    counts[f"{c['node']}/{c['camera']}"] = check_take.ffprobe_frames(mkv)
                except Exception as e:
                    counts[f"{c['node']}/{c['camera']}"] = str(e)
        frames_ok = bool(s) and len(counts) == s["cameras"] and all(v == s["groups"] for v in counts.values())
        ok = bool(s) and res["rc"] == 0 and s["check_take_passed"] and frames_ok
        res["ffprobe_frames"] = counts
        res["passed"] = ok
        log(f"{name} {k + 1}/{n}: rc {res['rc']}, " + (
            f"check-take {'ok' if s['check_take_passed'] else 'FAILED'}, frames {sorted(set(counts.values()))} of "
            f"{s['groups']}, dups {s['dups']}, true p99 {s['true_spread_us']['p99']} µs, claim p99 "
            f"{s['claimed_spread_us']['p99']} µs" if s else f"no take: {res.get('error')}"))
        b.cleanup(res)
        r = {"index": k, "seed": res["seed"], "rc": res["rc"], "passed": ok, "wall_s": res["wall_s"],
             "command": res["command"], "take_dir": res.get("take_dir"),
             "take_dir_removed": res.get("take_dir_removed", False), "host_load": res.get("host_load")}
        if s:
            r.update({"groups": s["groups"], "dups": s["dups"], "check_take_passed": s["check_take_passed"],
                      "ffprobe_frames_all_equal_groups": frames_ok,
                      "true_spread_p99_us": s["true_spread_us"]["p99"],
                      "claimed_spread_p99_us": s["claimed_spread_us"]["p99"],
                      "spread_bound_p99_us": s["spread_bound_us"].get("p99"),
                      "clock_offset_error_p99_us": res.get("clock", {}).get("offset_error_us_in_take", {}).get("p99")})
        if not ok:
            r["detail"] = {k2: res.get(k2) for k2 in ("stderr_tail", "error", "hung", "ffprobe_frames")}
            if s:
                r["detail"]["check_take_failures"] = s["check_take_failures"]
        runs.append(r)
    passed = sum(r["passed"] for r in runs)
    trues = [r["true_spread_p99_us"] for r in runs if "true_spread_p99_us" in r]
    shutil.rmtree(b.work / name, ignore_errors=True) if passed == n and not b.args.keep else None
    return {"target": f"all {n} takes pass check-take with exactly `groups` frames per file",
            "passed": passed == n, "passed_count": passed, "of": n,
            "true_spread_p99_us": {"each": trues, "p50": percentile(trues, .5), "max": max(trues, default=0)},
            "claimed_spread_p99_us_each": [r.get("claimed_spread_p99_us") for r in runs],
            "dups_total": sum(r.get("dups", 0) for r in runs),
            "scenario_wall_s": round(time.monotonic() - t, 1), "runs": runs}


SCENARIOS = {
    "clock-loopback": lambda b: clock_scenario(b, "clock-loopback", False, 20),
    "clock-lab": lambda b: clock_scenario(b, "clock-lab", True, 50),
    "spread-loopback-4x1": lambda b: spread_scenario(b, "spread-loopback-4x1", False, 4, 1, 50, 41, False),
    # Issue 37: the same take with sensors that apply a duration 3 frames late in 20 µs lines (a Pi under libcamera).
    "spread-loopback-4x1-pi": lambda b: spread_scenario(b, "spread-loopback-4x1-pi", False, 4, 1, 50, 41, False,
                                                        ("--sensor-delay-frames", "3", "--sensor-line-us", "20")),
    "spread-loopback-8x2": lambda b: spread_scenario(b, "spread-loopback-8x2", False, 8, 2, 50, 42, True),
    "spread-lab-4x1": lambda b: spread_scenario(b, "spread-lab-4x1", True, 4, 1, 100, 43, False),
    "spread-lab-8x2": lambda b: spread_scenario(b, "spread-lab-8x2", True, 8, 2, 100, 44, True),
    "repeat-20": lambda b: repeat_scenario(b, "repeat-20"),
}


def binary_identity(path: str) -> dict:
    """Which build was measured: the git tree can move on while .build/release stays as it was."""
    import datetime
    import hashlib
    p = Path(path)
    if not p.is_file():
        return {"path": path, "missing": True}
    return {"path": path, "mtime": datetime.datetime.fromtimestamp(p.stat().st_mtime, datetime.timezone.utc)
            .isoformat(timespec="seconds"), "sha256_16": hashlib.sha256(p.read_bytes()).hexdigest()[:16]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", help="comma-separated scenario names: " + ", ".join(SCENARIOS))
    ap.add_argument("--quick", action="store_true", help="short versions (5 s takes, 3 repeats) for a smoke test")
    ap.add_argument("--coord", default=str(ROOT / ".build/release/coord"))
    ap.add_argument("--coord-node", default=None, help="default: coord-node beside --coord")
    ap.add_argument("--out", default=str(ROOT / "bench/results/sync.json"))
    ap.add_argument("--work", default="/tmp/coord-bench-sync", help="where take directories go")
    ap.add_argument("--keep", action="store_true", help="keep the take directories of passing runs too")
    ap.add_argument("--secure", action="store_true", help="CURVE on every link (coord demo --secure; keyed lab nodes)")
    ap.add_argument("--wait-quiet", type=float, default=600, metavar="S",
                    help="before each take, wait up to S s for other processes to use < 0.15 cores (0: do not wait)")
    args = ap.parse_args()
    if args.coord_node is None:
        args.coord_node = str(Path(args.coord).resolve().parent / "coord-node")
    names = list(SCENARIOS) if not args.only else [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        ap.error(f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(SCENARIOS)}")
    b = Bench(args)
    doc = {"benchmark": "sync", "command": shlex.join([Path(sys.executable).name, *sys.argv]),
           "quick": args.quick, "secure": args.secure, "machine": {"cpus": os.cpu_count(), "kernel": platform.release(),
                                           "python": platform.python_version()},
           "coord": binary_identity(args.coord), "coord_node": binary_identity(args.coord_node),
           "git_tree_at_run": subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                                 text=True).stdout.strip(),
           "truth": "SYNCSTRIPE decoded by scripts/check-take.py; clocks from --truth-file / the lab's own draws",
           "scenarios": {}}
    t = time.monotonic()
    for n in names:
        try:
            doc["scenarios"][n] = SCENARIOS[n](b)
        except Exception as e:
            log(f"{n}: raised {type(e).__name__}: {e}")
            doc["scenarios"][n] = {"passed": False, "error": f"{type(e).__name__}: {e}"}
    doc["wall_s"] = round(time.monotonic() - t, 1)
    doc["summary"] = {n: s.get("passed") for n, s in doc["scenarios"].items()}
    doc["host_quiet"] = {n: (s.get("host_load") or {}).get("quiet") if "runs" not in s else
                         all((r.get("host_load") or {}).get("quiet", False) for r in s["runs"])
                         for n, s in doc["scenarios"].items()}
    text = json.dumps(doc, indent=1)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    print(text)
    return 0 if all(doc["summary"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
