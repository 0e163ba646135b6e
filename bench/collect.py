#!/usr/bin/env python3
"""Benchmark: `coord collect` against rsync, fetching one 4-node take of ≥ 2 GiB over the namespace lab.

    swift build -c release --scratch-path .build-bench
    .venv/bin/python bench/collect.py --build-dir .build-bench/release [--rounds 3] [--delay-ms 0.5]
        [--jitter-ms 0.1] [--grain 64] [--fps 15] [--target-gib 2.0] [--sweep auto|always|never] [--out FILE]

As root (the lab needs network namespaces). What it does:

  1. calibrates this machine once (`coord-node calibrate`, unless --calibration FILE or $COORD_CALIBRATION),
     so the coordinator's budget check passes;
  2. brings up `netlab.Lab(nodes=4, delay_ms, jitter_ms)` and one `coord-node` per node namespace
     (`--synthetic cam0 --synthetic-grain G`, its own staging directory, listening on the node's lab address);
     the rig file names them and says `collect: after_confirm: keep`, so the nodes keep every file and both
     tools can fetch the same files round after round;
  3. records a short probe take to measure the bytes per second the rig writes with this grain, sizes
     `--seconds` so the take reaches --target-gib (defaults: 1280x720 mjpeg at 15 fps, grain 64, about 33 MB/s,
     so about 70 s; at 30 fps four grained cameras drop frames on 2 cores), and records it once with
     `coord start-take --collect-later` (the files stay on the nodes; the take directory holds a pending
     manifest). The staging files are hashed once (SHA-256): the truth every copy is checked against;
  4. starts `rsync --daemon --no-detach` in every node namespace, serving that node's staging directory
     read-only (module `staging`);
  5. N rounds (--rounds), each timing both tools on the same links, in alternating order (odd rounds coord
     first, even rounds rsync first), each run starting from nothing:
       coord:  a fresh directory holding only the pending take's manifest.json, then
               `coord collect --rig R DIR`: wall time of the whole command (handshake, status, list, fetch
               checked by the node's xxh128 as the bytes arrive, fsync and rename per file, manifest and report, confirmation);
       rsync:  four `rsync -a rsync://<node>/staging/<take-id>/ DEST/` clients started together from the
               root namespace, one per node (as coord fetches every node in parallel): from the first start
               to the last exit.
     After each run: coord's manifest must say complete and its files' SHA-256 must be the staging truth;
     every file rsync brought must hash to the manifest's SHA-256. Before each timed run (not timed) every
     staging file is read once, so both tools find it in the page cache (this VM pages out memory left
     unused for about a minute; `staging_cached_before_warming` says how much was still cached), and
     `sync` flushes the previous run's dirty pages, so its writeback does not land in the next run. The page
     cache is NOT dropped: both tools read the nodes' files from memory, not from the disk; the copies are
     written through the page cache to the disk under --work (or --dest); coord fsyncs each file before its
     rename, rsync does not (that is part of coord's time; on this disk it costs < 0.1 s per run).
  6. ratio per round = rsync time / coord time (coord's throughput relative to rsync's); the median over the
     rounds is the result (targets: ≥ 0.9 × rsync on the lab; on loopback ≥ 1.2 × rsync + sync). For each
     run the CPU seconds of every party are recorded (the four lab delayers, the nodes, coord, the rsync
     clients and daemons) with the machine's busy fraction and the load of processes outside the benchmark, and the lab's NFQUEUE rule counters,
     to show where the time goes (`result.cpu_per_gb` has the medians);
  7. `--sweep auto` (default) runs, when the median ratio is below 0.9, one `coord collect` for each
     collect.window in 4/8/16 × collect.chunk_kib in 256/1024/4096, and window 8 × 512 KiB, with an rsync run
     before and after as the reference (`always` runs it regardless).

Prints one JSON document on stdout (progress on stderr) and writes it to --out
(default bench/results/collect.json). The lab, nodes and rsync daemons go down on exit and on Ctrl-C; the
work directory (default /tmp/coord-bench-collect) is removed unless --keep.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import json
import math
import os
import platform
import resource
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))

from netlab import Lab, _read_line  # noqa: E402
from sync import HostLoad, _busy_ticks, _proc_table, binary_identity, wait_quiet  # noqa: E402

NODES = 4
NODE_PORT = 5710
LOOPBACK_NODE_PORT = 5711
RSYNC_PORT = 873
TICK = os.sysconf("SC_CLK_TCK")
GIB = 1 << 30


def log(msg: str):
    print(f"collect: {msg}", file=sys.stderr, flush=True)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(4 << 20)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def tree_files(directory: Path) -> dict[str, Path]:
    """Every regular file under directory, by its path relative to it (dot files and the take's own
    manifest/report files left out)."""
    out = {}
    for p in sorted(directory.rglob("*")):
        rel = p.relative_to(directory)
        if p.is_file() and len(rel.parts) == 2 and not rel.name.startswith("."):
            out[str(rel)] = p
    return out


class CPUMeter:
    """CPU seconds of each party of one timed run: /proc/<pid>/stat of the lab's delayers, the nodes and the
    rsync daemons (with their reaped children: one forked child serves each rsync client), and this
    process's reaped children (coord, or the rsync clients) from getrusage; plus the machine's busy fraction
    and the load of processes outside this benchmark (other sessions on the shared machine)."""

    def __init__(self, groups: dict[str, list[int]]):
        self.groups = groups

    def _sample(self):
        table = _proc_table()
        per = {}
        for name, pids in self.groups.items():
            per[name] = sum(table[p][3] for p in pids if p in table)
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.monotonic(), _busy_ticks(), per, ru.ru_utime + ru.ru_stime

    def start(self):
        self.host = HostLoad()
        self.host.start()
        self.a = self._sample()

    def finish(self, client_name: str) -> dict:
        time.sleep(0.2)            # let rsync daemons reap their children
        b = self._sample()
        host = self.host.finish()
        (t0, busy0, per0, ch0), (t1, busy1, per1, ch1) = self.a, b
        dt = max(1e-3, t1 - t0)
        out = {name: round((per1[name] - per0[name]) / TICK, 2) for name in self.groups}
        out[client_name] = round(ch1 - ch0, 2)
        out["machine_busy_fraction"] = round((busy1 - busy0) / TICK / dt / (os.cpu_count() or 1), 3)
        out["other_processes_cores_mean"] = host["other_cores_mean"]
        out["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)  # others' builds share the machine
        if host["top_other_processes_cpu_s"]:
            out["other_processes_cpu_s"] = host["top_other_processes_cpu_s"]
        return out


class Loopback:
    """The lab's interface over plain loopback (no namespaces, no packet delayer): node i serves on 127.0.1.i,
    so each node and each rsync daemon has its own address on the one host."""
    prefix = "127.0.1.0/24"
    seed = None
    delayer_pids: list[int] = []

    def node_address(self, i: int) -> str:
        return f"127.0.1.{i}"

    def netns(self, i: int) -> str:
        return "host"

    def start_node(self, i: int, argv: list[str], **popen_kwargs) -> subprocess.Popen:
        return subprocess.Popen(argv, **popen_kwargs)


class Bench:
    def __init__(self, args):
        self.args = args
        self.build = Path(args.build_dir).resolve()
        self.coord = str(self.build / "coord")
        self.node = str(self.build / "coord-node")
        for b in (self.coord, self.node):
            if not os.access(b, os.X_OK):
                raise SystemExit(f"collect: {b} is missing; build first: swift build -c release "
                                 f"--scratch-path {self.build.parent}")
        self.rsync = shutil.which("rsync")
        if not self.rsync:
            raise SystemExit("collect: rsync is not installed (apt-get install rsync).")
        self.work = Path(args.work).resolve()
        if self.work.exists():
            shutil.rmtree(self.work)
        self.work.mkdir(parents=True)
        # Where each run's copy goes (a directory per run, removed after it unless --keep).
        self.dest_root = Path(args.dest).resolve() if args.dest else self.work
        self.dest_root.mkdir(parents=True, exist_ok=True)
        self.rsync_extra: list[str] = []
        self.node_procs: list[subprocess.Popen] = []
        self.rsyncd: list[subprocess.Popen] = []
        self.lab: Lab | None = None
        # --network both: the same take served a second time by nodes and rsync daemons on loopback.
        self.loop = Loopback()
        self.loop_node_procs: list[subprocess.Popen] = []
        self.loop_rsyncd: list[subprocess.Popen] = []

    # -- setup

    def calibration(self) -> str:
        if self.args.calibration:
            return str(Path(self.args.calibration).resolve())
        if os.environ.get("COORD_CALIBRATION") and Path(os.environ["COORD_CALIBRATION"]).is_file():
            return os.environ["COORD_CALIBRATION"]
        path = self.work / "calibration.json"
        log("calibrating this machine (coord-node calibrate --seconds 2)")
        out = subprocess.run([self.node, "calibrate", "--calibration", str(path), "--staging",
                              str(self.work / "cal-staging"), "--seconds", "2"], capture_output=True, text=True,
                             timeout=300)
        if out.returncode != 0:
            raise SystemExit(f"collect: calibrate failed: {out.stdout}{out.stderr}")
        shutil.rmtree(self.work / "cal-staging", ignore_errors=True)
        return str(path)

    def start_nodes(self, lab, calibration: str, loopback: bool = False):
        """One coord-node per node; with loopback=True a second set on 127.0.1.i serving the same staging
        directories (the lab's nodes stay up, idle)."""
        procs = self.loop_node_procs if loopback else self.node_procs
        port = LOOPBACK_NODE_PORT if loopback else NODE_PORT
        cmds = []
        for i in range(1, NODES + 1):
            name = f"node-{i}"
            staging = self.work / "staging" / name
            staging.mkdir(parents=True, exist_ok=True)
            argv = [self.node, "--name", name, "--endpoint", f"tcp://{lab.node_address(i)}:{port}",
                    "--staging", str(staging), "--synthetic", "cam0", "--synthetic-grain", str(self.args.grain),
                    "--calibration", calibration, "--seed", str(i), "--parent-pid", str(os.getpid()),
                    "--log-level", "warning"]
            argv += self.node_keys(name)
            cmds.append(f"[{lab.netns(i)}] " + shlex.join(argv))
            err = open(self.work / f"{name}{'-loopback' if loopback else ''}.stderr", "w")
            procs.append(lab.start_node(i, argv, stdout=subprocess.PIPE, stderr=err))
            err.close()
        for i, p in enumerate(procs, 1):
            line = _read_line(p, 15)
            if not line or not line.startswith("READY"):
                raise SystemExit(f"collect: node-{i} did not print READY (got {line!r}); "
                                 f"see {self.work / f'node-{i}.stderr'}")
        if loopback:
            self.loop_node_cmds = cmds
        else:
            self.node_cmds = cmds

    def node_keys(self, name: str) -> list[str]:
        """--secure: the node's own certificate (pyzmq's zmq.auth) serving only the coordinator's; else --insecure
        (the lab's addresses are private to this machine)."""
        if not self.args.secure:
            return ["--insecure"]
        import zmq.auth
        keys, authorized = self.work / "keys", self.work / "keys" / "authorized"
        if not authorized.exists():
            authorized.mkdir(parents=True)
            zmq.auth.create_certificates(str(keys), "coordinator")
            (authorized / "coordinator.key").write_bytes((keys / "coordinator.key").read_bytes())
        zmq.auth.create_certificates(str(keys), name)
        return ["--cert", str(keys / f"{name}.key_secret"), "--authorized", str(authorized)]

    def rig_file(self, path: Path, window: int | None = None, chunk_kib: int | None = None,
                 loopback: bool = False) -> Path:
        net, port = (self.loop, LOOPBACK_NODE_PORT) if loopback else (self.lab, NODE_PORT)
        lines = ["version: 1"]
        if self.args.secure:
            lines += ["security:", f"  cert: {self.work / 'keys' / 'coordinator.key_secret'}"]
        lines += ["nodes:"]
        for i in range(1, NODES + 1):
            lines += [f"  - name: node-{i}", f"    endpoint: tcp://{net.node_address(i)}:{port}"]
            if self.args.secure:
                lines += [f"    cert: {self.work / 'keys' / f'node-{i}.key'}"]
        a = self.args
        lines += ["take:", "  name: collectbench", f"  fps: {a.fps}", f"  size: {a.size}", f"  codec: {a.codec}",
                  "collect:", "  after_confirm: keep"]
        window = window if window is not None else a.window
        chunk_kib = chunk_kib if chunk_kib is not None else a.chunk_kib
        if window is not None:
            lines.append(f"  window: {window}")
        if chunk_kib is not None:
            lines.append(f"  chunk_kib: {chunk_kib}")
        path.write_text("\n".join(lines) + "\n")
        return path

    def start_rsyncd(self, lab, loopback: bool = False):
        daemons = self.loop_rsyncd if loopback else self.rsyncd
        cmds = []
        for i in range(1, NODES + 1):
            tag = f"node-{i}{'-loopback' if loopback else ''}"
            conf = self.work / f"rsyncd-{tag}.conf"
            conf.write_text("\n".join([
                "use chroot = no", "max connections = 16", f"log file = {self.work / f'rsyncd-{tag}.log'}",
                "[staging]", f"    path = {self.work / 'staging' / f'node-{i}'}", "    read only = yes",
                "    uid = root", "    gid = root"]) + "\n")
            argv = [self.rsync, "--daemon", "--no-detach", f"--config={conf}", f"--address={lab.node_address(i)}",
                    f"--port={RSYNC_PORT}"]
            cmds.append(f"[{lab.netns(i)}] " + shlex.join(argv))
            daemons.append(lab.start_node(i, argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        if loopback:
            self.loop_rsyncd_cmds = cmds
        else:
            self.rsyncd_cmds = cmds
        deadline = time.monotonic() + 10
        for i in range(1, NODES + 1):
            while True:
                try:
                    with socket.create_connection((lab.node_address(i), RSYNC_PORT), timeout=1):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"collect: the rsync daemon of node-{i} does not listen")
                    time.sleep(0.1)

    # -- recording

    def run_coord(self, argv: list[str], timeout: float, log_path: Path) -> tuple[int, float]:
        t = time.monotonic()
        with open(log_path, "w") as out:
            p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            try:
                rc = p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                raise SystemExit(f"collect: {shlex.join(argv)} did not finish in {timeout:.0f} s; see {log_path}")
        return rc, time.monotonic() - t

    def record(self, name: str, seconds: int, rig: Path) -> tuple[Path, dict, dict[str, Path]]:
        takes = self.work / f"takes-{name}"
        argv = [self.coord, "start-take", "--rig", str(rig), "--seconds", str(seconds), "--takes-dir", str(takes),
                "--collect-later", "--name", name]
        log(f"recording: {shlex.join(argv[1:])}")
        rc, wall = self.run_coord(argv, 120 + 3 * seconds, self.work / f"record-{name}.log")
        dirs = [d for d in takes.iterdir() if d.is_dir()] if takes.exists() else []
        if rc != 0 or len(dirs) != 1:
            raise SystemExit(f"collect: recording {name} failed (exit {rc}): "
                             f"{(self.work / f'record-{name}.log').read_text()[-2000:]}")
        take = dirs[0]
        m = json.loads((take / "manifest.json").read_text())
        if m.get("collection", {}).get("state") != "pending":
            raise SystemExit(f"collect: take {take} is not pending collection: {m.get('collection')}")
        staged: dict[str, Path] = {}
        for i in range(1, NODES + 1):
            staged.update(tree_files(self.work / "staging" / f"node-{i}" / m["take_id"]))
        self.record_argv = argv
        return take, m, staged

    # -- one timed run of each tool

    def zero_counters(self, loopback: bool = False):
        if loopback:
            return
        for i in range(1, NODES + 1):
            self.lab.exec(i, ["iptables", "-w", "5", "-Z"], check=True)

    def counters(self, loopback: bool = False) -> dict | None:
        """The NFQUEUE rules' packet and byte counters since zero_counters(), each direction summed over the
        nodes. A GSO super-packet (up to 64 KiB) counts once here; the kernel hands the delayer each of its
        MTU-sized segments, so the delayer handles about bytes / 1448 packets."""
        if loopback:
            return None
        out = {"to_nodes_packets": 0, "to_nodes_bytes": 0, "from_nodes_packets": 0, "from_nodes_bytes": 0}
        for i in range(1, NODES + 1):
            text = self.lab.exec(i, ["iptables-save", "-c"], check=True).stdout
            for line in text.splitlines():
                if "NFQUEUE" not in line or not line.startswith("["):
                    continue
                pk, by = line[1:line.index("]")].split(":")
                key = "to_nodes" if " -A INPUT " in line else "from_nodes"
                out[key + "_packets"] += int(pk)
                out[key + "_bytes"] += int(by)
        out["from_nodes_bytes_per_rule_hit"] = round(out["from_nodes_bytes"] / max(1, out["from_nodes_packets"]))
        return out

    def cpu_groups(self, with_rsyncd: bool, loopback: bool = False) -> dict[str, list[int]]:
        nodes, daemons = (self.loop_node_procs, self.loop_rsyncd) if loopback else (self.node_procs, self.rsyncd)
        g = {"delayers_cpu_s": [] if loopback else self.lab.delayer_pids, "nodes_cpu_s": [p.pid for p in nodes]}
        if with_rsyncd:
            g["rsync_daemons_cpu_s"] = [p.pid for p in daemons]
        return g

    def warm(self) -> float:
        """Reads every staging file of the take (not timed), so both tools find it in the page cache: this VM
        pages out memory left unused for a minute or so. Returns the fraction that was cached before."""
        cached = total = 0
        for p in self.staged.values():
            out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES,SIZE", str(p)],
                                 capture_output=True, text=True)
            with contextlib.suppress(ValueError, IndexError):
                res, size = out.stdout.split()[:2]
                cached += int(res)
                total += int(size)
            with open(p, "rb") as f:
                while f.read(8 << 20):
                    pass
        return round(cached / total, 3) if total else None

    def quiet(self):
        if self.args.wait_quiet > 0:
            q = wait_quiet(self.args.wait_quiet, window_s=2.0, limit_cores=0.2)
            if not q["quiet"]:
                log(f"the machine did not get quiet within {self.args.wait_quiet:g} s ({q.get('last')}); measuring anyway")
            return q
        return None

    def coord_run(self, label: str, rig: Path, pending: Path, take_id: str, truth: dict[str, str],
                  loopback: bool = False) -> dict:
        dest = self.dest_root / label / take_id
        dest.mkdir(parents=True)
        shutil.copy2(pending / "manifest.json", dest / "manifest.json")
        q = self.quiet()
        warm = self.warm()
        os.sync()
        argv = [self.coord, "collect", "--rig", str(rig), str(dest)]
        node_perf = None
        if self.args.perf:
            # A profile of this run: coord under `perf record -g`, its nodes attached (times are then not figures).
            out = Path(self.args.perf)
            out.mkdir(parents=True, exist_ok=True)
            nodes = self.loop_node_procs if loopback else self.node_procs
            node_perf = subprocess.Popen(["perf", "record", "-g", "-o", str(out / f"{label}-nodes.data"),
                                          "-p", ",".join(str(p.pid) for p in nodes)],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)  # perf attaches before the run starts (not a measurement)
            argv = ["perf", "record", "-g", "-o", str(out / f"{label}-coord.data"), "--", *argv]
        self.zero_counters(loopback)
        cpu = CPUMeter(self.cpu_groups(False, loopback))
        cpu.start()
        rc, wall = self.run_coord(argv, 1800, self.work / f"{label}.log")
        usage = cpu.finish("coord_cpu_s")
        if node_perf is not None:
            node_perf.send_signal(signal.SIGINT)
            node_perf.wait(timeout=60)
        res = {"tool": "coord", "seconds": round(wall, 3), "rc": rc, "cpu": usage,
               "lab_rule_counters": self.counters(loopback),
               "staging_cached_before_warming": warm}
        if q is not None:
            res["waited_for_quiet"] = q
        m = json.loads((dest / "manifest.json").read_text())
        run = m.get("collection", {}).get("runs", [{}])[-1]
        res.update({"status": m.get("status"), "collection_state": m.get("collection", {}).get("state"),
                    "collector_seconds": run.get("seconds"), "fetched_bytes": run.get("fetched_bytes")})
        problems = []
        if rc != 0 or m.get("status") != "complete" or m.get("collection", {}).get("state") != "complete":
            problems.append(f"coord collect exit {rc}, status {m.get('status')}: "
                            f"{(self.work / f'{label}.log').read_text()[-1500:]}")
        listed = {f["path"]: f["sha256"] for c in m.get("cameras", []) for f in c.get("files", [])}
        if listed != truth:
            problems.append(f"the manifest's files differ from the staging truth: {sorted(set(listed) ^ set(truth))}")
        here = tree_files(dest)
        for path, sha in truth.items():
            if path not in here:
                problems.append(f"coord did not bring {path}")
            elif sha256_file(here[path]) != sha:
                problems.append(f"coord's copy of {path} does not match its SHA-256")
        res["verified"] = not problems
        if problems:
            res["problems"] = problems
        res["manifest_sha256"] = listed
        res["cameras"] = [{"node": c.get("node"), "camera": c.get("camera"), "frames": c.get("frames"),
                           "dropped": c.get("dropped")} for c in m.get("cameras", [])]
        return res

    def rsync_run(self, label: str, take_id: str, truth: dict[str, str], loopback: bool = False,
                  then_sync: bool = False) -> dict:
        """then_sync: `sync` right after the last client exits, inside the timed span: the same durability as
        coord's fsync of every file."""
        net = self.loop if loopback else self.lab
        dest = self.dest_root / label / take_id
        dest.mkdir(parents=True)
        q = self.quiet()
        warm = self.warm()
        os.sync()
        cmds = [[self.rsync, "-a", *self.rsync_extra, f"rsync://{net.node_address(i)}/staging/{take_id}/", f"{dest}/"]
                for i in range(1, NODES + 1)]
        self.zero_counters(loopback)
        cpu = CPUMeter(self.cpu_groups(True, loopback))
        cpu.start()
        t = time.monotonic()
        procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  text=True) for c in cmds]
        outs = []
        for p in procs:
            out, _ = p.communicate(timeout=1800)
            outs.append((p.returncode, out))
        if then_sync:
            os.sync()
        wall = time.monotonic() - t
        usage = cpu.finish("rsync_clients_cpu_s")
        res = {"tool": "rsync+sync" if then_sync else "rsync", "seconds": round(wall, 3), "rc": [rc for rc, _ in outs],
               "cpu": usage, "lab_rule_counters": self.counters(loopback), "staging_cached_before_warming": warm,
               "command": shlex.join(cmds[0]).replace(net.node_address(1), "<node>") + ("; sync" if then_sync else "")}
        if q is not None:
            res["waited_for_quiet"] = q
        problems = [f"rsync from node-{i} exited {rc}: {out.strip()[-500:]}"
                    for i, (rc, out) in enumerate(outs, 1) if rc != 0]
        here = tree_files(dest)
        res["fetched_bytes"] = sum(p.stat().st_size for p in here.values())
        for path, sha in truth.items():
            if path not in here:
                problems.append(f"rsync did not bring {path}")
            elif sha256_file(here[path]) != sha:
                problems.append(f"rsync's copy of {path} does not match the manifest's SHA-256")
        if set(here) - set(truth):
            problems.append(f"rsync brought files the manifest does not list: {sorted(set(here) - set(truth))}")
        res["verified"] = not problems
        if problems:
            res["problems"] = problems
        return res

    def drop(self, label: str):
        if not self.args.keep:
            shutil.rmtree(self.dest_root / label, ignore_errors=True)


def mbps(nbytes: int, seconds: float) -> float:
    return round(nbytes / seconds / 1e6, 1)


def cpu_summary(rounds: list[dict], total: int) -> dict:
    """Median CPU seconds per GB moved, by party, for each tool; and how many cores the lab's delayers
    (SCHED_FIFO, so served first) held while each tool ran."""
    gb = total / 1e9
    out = {}
    alternatives = [(t, ["coord_cpu_s", "nodes_cpu_s"]) for t, v in rounds[0].items() if t.startswith("coord-c") and isinstance(v, dict)]
    for tool, own in (("coord", ["coord_cpu_s", "nodes_cpu_s"]), ("rsync", ["rsync_clients_cpu_s", "rsync_daemons_cpu_s"]),
                      ("rsync+sync", ["rsync_clients_cpu_s", "rsync_daemons_cpu_s"]), *alternatives):
        if tool not in rounds[0]:
            continue
        runs = [rd[tool] for rd in rounds]
        med = lambda xs: round(statistics.median(xs), 3)
        out[tool] = {
            "tool_cpu_s_per_gb": med([sum(r["cpu"].get(k, 0) for k in own) / gb for r in runs]),
            **{k.replace("_cpu_s", "") + "_cpu_s_per_gb": med([r["cpu"].get(k, 0) / gb for r in runs]) for k in own},
            "delayers_cpu_s_per_gb": med([r["cpu"]["delayers_cpu_s"] / gb for r in runs]),
            "delayers_cores": med([r["cpu"]["delayers_cpu_s"] / r["seconds"] for r in runs]),
            "machine_busy_fraction": med([r["cpu"]["machine_busy_fraction"] for r in runs]),
        }
    return out


def git(*args) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True).stdout.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default=str(ROOT / ".build/release"), help="where coord and coord-node are")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--delay-ms", type=float, default=0.5, help="lab delay, each packet, each direction")
    ap.add_argument("--jitter-ms", type=float, default=0.1, help="lab jitter, uniform [0, J) on top of the delay")
    ap.add_argument("--grain", type=int, default=64, help="coord-node --synthetic-grain (0-64)")
    ap.add_argument("--size", default="1280x720")
    ap.add_argument("--fps", type=int, default=15, help="15: four grained 1280x720 cameras keep up on 2 cores (30 drops frames)")
    ap.add_argument("--codec", default="mjpeg")
    ap.add_argument("--target-gib", type=float, default=2.0, help="the take's total size at least this")
    ap.add_argument("--probe-seconds", type=int, default=4, help="length of the take that measures the rate")
    ap.add_argument("--seconds", type=int, default=None, help="record this long instead of sizing from the probe")
    ap.add_argument("--calibration", help="a coord-node calibration file (default: $COORD_CALIBRATION, else measure)")
    ap.add_argument("--sweep", choices=["auto", "always", "never"], default="auto",
                    help="window 4/8/16 × chunk_kib 256/1024/4096 (and 8 × 512) sweep of coord collect: when the "
                         "median ratio is below 0.9 (auto), always, never")
    ap.add_argument("--perf", metavar="DIR", help="profile each coord run with perf record -g (coord and its nodes) "
                    "into DIR; the times of such a run are not figures")
    ap.add_argument("--window", type=int, help="collect.window in the rounds' rig files (default: coord's)")
    ap.add_argument("--chunk-kib", type=int, help="collect.chunk_kib in the rounds' rig files (default: coord's)")
    ap.add_argument("--also-chunk-kib", type=int, action="append", default=[], metavar="KIB",
                    help="loopback: in every round also run coord collect with this collect.chunk_kib (tool "
                         "coord-c<KIB>); may be given more than once")
    ap.add_argument("--wait-quiet", type=float, default=60, metavar="S",
                    help="before each timed run wait up to S s for other processes to use < 0.2 cores (0: never)")
    ap.add_argument("--work", default="/tmp/coord-bench-collect")
    ap.add_argument("--dest", help="where the copies go (default: the work directory, on disk)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (take, copies, logs)")
    ap.add_argument("--secure", action="store_true", help="CURVE on every coord link (each node keyed; rsync stays plain)")
    ap.add_argument("--network", choices=["lab", "loopback", "both"], default="both",
                    help="lab: the namespace lab with packet delayers; loopback: nodes and rsync daemons on "
                         "127.0.1.x, no delayer (rsync + sync timed too); both (default): the same take, both, "
                         "in every round")
    ap.add_argument("--out", default=str(ROOT / "bench/results/collect.json"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("collect: the namespace lab needs root.")
    if not 0 <= args.grain <= 64:
        raise SystemExit("collect: --grain must be between 0 and 64.")

    b = Bench(args)
    t_start = time.monotonic()
    doc = {"benchmark": "collect", "command": shlex.join([".venv/bin/python", "bench/collect.py", *sys.argv[1:]]),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "git_commit": git("rev-parse", "HEAD"), "git_tree_at_run": git("describe", "--always", "--dirty"),
           "machine": {"cpus": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version(),
                       "rsync": subprocess.run([b.rsync, "--version"], capture_output=True, text=True)
                       .stdout.splitlines()[0]},
           "coord": binary_identity(b.coord), "coord_node": binary_identity(b.node),
           "lab": {"nodes": NODES, "delay_ms": args.delay_ms, "jitter_ms": args.jitter_ms},
           "secure": args.secure,
           "page_cache": "not dropped: both tools read the staging files from the page cache; `sync` before each "
                         "timed run (not timed)"}
    doc["load_average_at_start"] = [round(x, 2) for x in os.getloadavg()]
    calibration = b.calibration()
    doc["calibration"] = json.loads(Path(calibration).read_text()) if Path(calibration).is_file() else calibration
    try:
        with Lab(nodes=NODES, delay_ms=args.delay_ms, jitter_ms=args.jitter_ms, tag="bench-collect") as lab:
            b.lab = lab
            doc["lab"]["prefix"] = lab.prefix
            doc["lab"]["seed"] = lab.seed
            b.start_nodes(lab, calibration)
            doc["node_commands"] = b.node_cmds
            rig = b.rig_file(b.work / "rig.yaml")
            doc["rig_file"] = rig.read_text()

            # -- size the take from a probe
            seconds = args.seconds
            if seconds is None:
                ptake, pm, pfiles = b.record("probe", args.probe_seconds, rig)
                pbytes = sum(p.stat().st_size for p in pfiles.values())
                per_group = pbytes / max(1, pm["groups"])
                rate = per_group * args.fps
                seconds = math.ceil(args.target_gib * GIB / rate * 1.04) + 1
                doc["probe"] = {"seconds": args.probe_seconds, "groups": pm["groups"], "bytes": pbytes,
                                "bytes_per_second": round(rate)}
                log(f"probe: {pbytes / 1e6:.1f} MB in {pm['groups']} groups: {rate / 1e6:.1f} MB/s; "
                    f"recording {seconds} s for {args.target_gib:g} GiB")
                for i in range(1, NODES + 1):
                    shutil.rmtree(b.work / "staging" / f"node-{i}" / pm["take_id"], ignore_errors=True)
                shutil.rmtree(ptake.parent, ignore_errors=True)

            # -- the take
            pending, m, staged = b.record("collectbench", seconds, rig)
            take_id = m["take_id"]
            b.staged = staged
            total = sum(p.stat().st_size for p in staged.values())
            log(f"take {take_id}: {len(staged)} files, {total} bytes ({total / GIB:.2f} GiB); hashing the staging copies")
            truth = {path: sha256_file(p) for path, p in staged.items()}
            doc["take"] = {"take_id": take_id, "record_command": shlex.join(b.record_argv).replace(str(b.work), "$WORK"),
                           "seconds": seconds, "groups": m["groups"], "size": args.size, "fps": args.fps,
                           "codec": args.codec, "grain": args.grain, "files": len(staged), "bytes": total,
                           "gib": round(total / GIB, 3),
                           "bytes_per_file": {k: p.stat().st_size for k, p in staged.items()}}
            print(f"take {take_id}: {total} bytes ({total / GIB:.2f} GiB) in {len(staged)} files", flush=True)
            if total < args.target_gib * GIB:
                log(f"warning: the take is {total / GIB:.2f} GiB, under the {args.target_gib:g} GiB target")

            nets = ["lab", "loopback"] if args.network == "both" else [args.network]
            if "lab" in nets:
                b.start_rsyncd(lab)
                doc["rsync_daemon_commands"] = b.rsyncd_cmds
            loop_rig, alt_rigs = None, {}
            if "loopback" in nets:
                b.start_nodes(b.loop, calibration, loopback=True)
                b.start_rsyncd(b.loop, loopback=True)
                loop_rig = b.rig_file(b.work / "rig-loopback.yaml", loopback=True)
                alt_rigs = {f"coord-c{k}": b.rig_file(b.work / f"rig-loopback-c{k}.yaml", chunk_kib=k, loopback=True)
                            for k in args.also_chunk_kib}
                doc["loopback"] = {"node_commands": b.loop_node_cmds, "rsync_daemon_commands": b.loop_rsyncd_cmds,
                                   "rig_file": loop_rig.read_text(),
                                   "what": "the same take's staging directories served a second time by coord-node "
                                           "and rsync --daemon on 127.0.1.1-4: no namespace, no packet delayer"}

            # -- rounds: in each, every tool once on each network, the order alternating round to round
            rounds = []
            for r in range(1, args.rounds + 1):
                rd = {"round": r}
                for net in nets:
                    tools = ["coord", "rsync"] if net == "lab" else ["coord", "rsync", "rsync+sync", *alt_rigs]
                    order = tools if r % 2 == 1 else list(reversed(tools))
                    part = {"order": order}
                    for tool in order:
                        label = f"round{r}-{net}-{tool.replace('+', '-')}"
                        log(f"round {r}, {net}: {tool}")
                        loopback = net == "loopback"
                        if tool == "coord":
                            res = b.coord_run(label, loop_rig if loopback else rig, pending, take_id, truth, loopback)
                        elif tool.startswith("coord-c"):
                            res = b.coord_run(label, alt_rigs[tool], pending, take_id, truth, loopback)
                        else:
                            res = b.rsync_run(label, take_id, truth, loopback, then_sync=tool == "rsync+sync")
                        res.pop("manifest_sha256", None)
                        if tool.startswith("coord") and "cameras" not in doc["take"]:
                            doc["take"]["cameras"] = res["cameras"]
                        res.pop("cameras", None)
                        res["mb_per_s"] = mbps(total, res["seconds"])
                        part[tool] = res
                        log(f"round {r}, {net}: {tool} {res['seconds']:.2f} s, {res['mb_per_s']} MB/s, "
                            f"verified {res['verified']}; cpu {res['cpu']}")
                        b.drop(label)
                    part["ratio"] = round(part["rsync"]["seconds"] / part["coord"]["seconds"], 3)
                    if "rsync+sync" in part:
                        part["ratio_to_rsync_sync"] = round(part["rsync+sync"]["seconds"] / part["coord"]["seconds"], 3)
                        for alt in alt_rigs:
                            part[f"{alt}_ratio_to_rsync_sync"] = round(part["rsync+sync"]["seconds"] / part[alt]["seconds"], 3)
                    log(f"round {r}, {net}: ratio (rsync time / coord time) {part['ratio']}"
                        + (f", to rsync+sync {part['ratio_to_rsync_sync']}" if "ratio_to_rsync_sync" in part else ""))
                    rd[net] = part
                rounds.append(rd)
            doc["rounds"] = rounds
            med = lambda xs: round(statistics.median(xs), 3)
            result = {"take_bytes": total, "every_copy_verified": True, "passed": True}
            for net in nets:
                parts = [rd[net] for rd in rounds]
                tools = [t for t in parts[0]["order"]]
                verified = all(p[t]["verified"] for p in parts for t in tools)
                r_net = {f"{t}_seconds": [p[t]["seconds"] for p in parts] for t in tools}
                r_net.update({f"{t}_mb_per_s": [p[t]["mb_per_s"] for p in parts] for t in tools})
                r_net["ratios"] = [p["ratio"] for p in parts]
                r_net["median_ratio"] = med(r_net["ratios"])
                r_net["cpu_per_gb"] = cpu_summary(parts, total)
                r_net["every_copy_verified"] = verified
                if net == "lab":
                    r_net["target"] = "coord ≥ 0.9 × rsync's throughput"
                    r_net["passed"] = verified and r_net["median_ratio"] >= 0.9
                else:
                    r_net["ratios_to_rsync_sync"] = [p["ratio_to_rsync_sync"] for p in parts]
                    r_net["median_ratio_to_rsync_sync"] = med(r_net["ratios_to_rsync_sync"])
                    for alt in alt_rigs:
                        r_net[f"{alt}_median_ratio_to_rsync_sync"] = med([p[f"{alt}_ratio_to_rsync_sync"] for p in parts])
                    # Issue 25: with xxh128 checked as the bytes arrive (no SHA-256 on the coordinator), 1.2×.
                    r_net["target"] = "coord ≥ 1.2 × rsync + sync (same durability); the ratio to plain rsync reported"
                    r_net["passed"] = verified and r_net["median_ratio_to_rsync_sync"] >= 1.2
                result[net] = r_net
                result["every_copy_verified"] &= verified
                result["passed"] &= r_net["passed"]
                log(f"{net}: median ratio {r_net['median_ratio']}"
                    + (f", to rsync+sync {r_net['median_ratio_to_rsync_sync']}" if net == "loopback" else "")
                    + f"; every copy verified: {verified}")
            # The sweep below reads the lab's median ratio when the lab ran.
            result["median_ratio"] = result.get("lab", result.get("loopback"))["median_ratio"]
            doc["result"] = result

            # -- sweep
            if "lab" in nets and (args.sweep == "always" or (args.sweep == "auto" and doc["result"]["median_ratio"] < 0.9)):
                sweep = {"rsync_before": None, "runs": [], "rsync_after": None}
                log("sweep: rsync reference")
                res = b.rsync_run("sweep-rsync-before", take_id, truth)
                b.drop("sweep-rsync-before")
                sweep["rsync_before"] = {"seconds": res["seconds"], "mb_per_s": mbps(total, res["seconds"]),
                                         "verified": res["verified"], "cpu": res["cpu"]}
                for window, chunk in [(w, c) for w in (4, 8, 16) for c in (256, 1024, 4096)] + [(8, 512)]:
                    label = f"sweep-w{window}-c{chunk}"
                    srig = b.rig_file(b.work / f"rig-{label}.yaml", window=window, chunk_kib=chunk)
                    log(f"sweep: coord collect, window {window}, chunk_kib {chunk}")
                    res = b.coord_run(label, srig, pending, take_id, truth)
                    res.pop("manifest_sha256", None)
                    res.pop("cameras", None)
                    b.drop(label)
                    sweep["runs"].append({"window": window, "chunk_kib": chunk, "seconds": res["seconds"],
                                          "mb_per_s": mbps(total, res["seconds"]),
                                          "collector_seconds": res.get("collector_seconds"),
                                          "verified": res["verified"], "cpu": res["cpu"]})
                    log(f"sweep: window {window}, chunk {chunk}: {res['seconds']:.2f} s ({mbps(total, res['seconds'])} MB/s)")
                res = b.rsync_run("sweep-rsync-after", take_id, truth)
                b.drop("sweep-rsync-after")
                sweep["rsync_after"] = {"seconds": res["seconds"], "mb_per_s": mbps(total, res["seconds"]),
                                        "verified": res["verified"], "cpu": res["cpu"]}
                doc["sweep"] = sweep
        doc["lab"]["delayer_stats"] = {str(k): v for k, v in lab.delayer_stats.items()}
    finally:
        for p in b.loop_node_procs + b.loop_rsyncd:
            with contextlib.suppress(Exception):
                p.terminate()
                p.wait(timeout=10)
        if not args.keep:
            shutil.rmtree(b.work, ignore_errors=True)
    doc["wall_s"] = round(time.monotonic() - t_start, 1)
    doc["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    text = json.dumps(doc, indent=1)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    print(text)
    return 0 if doc["result"]["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
