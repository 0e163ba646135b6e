"""One QEMU virtual machine of the lab: TCG (never KVM: the paravirtual /dev/kvm here kills unmodified guests), a
copy-on-write qcow2 overlay over the cached root image, user-mode networking with the node's port forwarded to
127.0.0.1, a 9p share of the host's run directory at /mnt/host, the guest agent on a virtio-serial port, and the clock truth's responder on another (clocktruth.py)."""
from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from . import image
from .image import Artefacts, LabError, run

NODE_PORT = 5710
# What the guest's virtio-serial bus holds (its ports): part of a saved state's key, since QEMU restores a state only
# into the same devices. vmlab.clock is the clock truth's (clocktruth.py), beside the agent's.
PORTS = "vmlab.agent vmlab.clock"
# COORD_VMLAB_SNAPSHOT=0 boots every VM from scratch (the bench's baseline); otherwise each VM restores the state
# the lab saved the first time it booted (QMP migrate to a file, QEMU's -incoming).
SNAPSHOTS = os.environ.get("COORD_VMLAB_SNAPSHOT", "1") != "0"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Agent:
    """The host's end of the guest agent: JSON lines over QEMU's unix socket."""

    def __init__(self, path: Path):
        self.path = path
        self.sock: socket.socket | None = None
        self.buf = b""
        self.next_id = int(time.time() * 1000) % 10**9  # ids from another invocation never collide

    def _connect(self) -> None:
        if self.sock is None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(str(self.path))

    def _send(self, request: dict) -> None:
        self._connect()
        self.sock.settimeout(30)  # _receive's short timeouts must not cut a write short
        self.sock.sendall((json.dumps(request) + "\n").encode())

    def _receive(self, want_id: int, deadline: float) -> dict | None:
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                try:
                    reply = json.loads(line)
                except ValueError:
                    continue
                if reply.get("id") == want_id:
                    return reply
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return None
            if not chunk:
                self.close()
                raise LabError(f"the guest agent's socket {self.path} closed (did the VM stop?).")
            self.buf += chunk

    def run(self, cmd: str, timeout: float = 120) -> dict:
        self.next_id += 1
        request = {"id": self.next_id, "cmd": cmd, "timeout": timeout}
        self._send(request)
        reply = self._receive(request["id"], time.monotonic() + timeout + 15)
        if reply is None:
            raise LabError(f"the guest agent did not answer `{cmd[:60]}` within {timeout + 15:.0f} s.")
        return reply

    def wait_ready(self, timeout: float) -> float:
        """Pings until the agent answers; returns the seconds it took. QEMU holds what the host writes until the
        guest opens its port, so one ping waits in line; another goes out only every 30 s, never a pile."""
        start = time.monotonic()
        deadline = start + timeout
        while time.monotonic() < deadline:
            try:
                self.next_id += 1
                self._send({"id": self.next_id, "cmd": "true", "timeout": 5})
                if self._receive(self.next_id, min(deadline, time.monotonic() + 30.0)) is not None:
                    return time.monotonic() - start
            except (ConnectionRefusedError, FileNotFoundError):
                self.close()
                time.sleep(0.2)
        raise LabError(f"the VM's guest agent did not answer within {timeout:.0f} s (see its console.log).")

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        self.buf = b""


class QMP:
    """QEMU's machine protocol on the VM's unix socket: one connection per command, events skipped."""

    def __init__(self, path: Path):
        self.path = path

    def command(self, name: str, **arguments) -> dict:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(60)
            s.connect(str(self.path))
            f = s.makefile("rwb")
            f.readline()  # the greeting
            for request in ({"execute": "qmp_capabilities"}, {"execute": name, "arguments": arguments}):
                f.write((json.dumps(request) + "\n").encode())
                f.flush()
                while True:
                    reply = json.loads(f.readline() or b"{}")
                    if "error" in reply:
                        raise LabError(f"QEMU refused {name}: {reply['error'].get('desc', reply['error'])}")
                    if "return" in reply or not reply:
                        break
            return reply.get("return", {})


class VM:
    def __init__(self, name: str, run_dir: Path, art: Artefacts, *, node_port: int | None = None,
                 memory_mb: int = 768, clocksource: str | None = None):
        self.name = name
        self.dir = run_dir / name
        self.art = art
        self.node_port = node_port or free_port()
        self.memory_mb = memory_mb
        self.clocksource = clocksource
        self.agent = Agent(self.dir / "agent.sock")
        self.proc: subprocess.Popen | None = None
        self.share = run_dir / "share"
        self.restored = False

    @property
    def pidfile(self) -> Path:
        return self.dir / "qemu.pid"

    def append(self) -> str:
        append = f"console=ttyS0 root=/dev/vda rw quiet systemd.hostname={self.name} systemd.show_status=0"
        if self.clocksource:
            append += f" clocksource={self.clocksource}"
        return append

    @property
    def snapshot(self) -> Path:
        """Where this VM's booted state is cached: per name (its hostname and machine id stay its own) and per
        everything the guest saw at boot (kernel command line, memory, image recipe, kernel, the image itself)."""
        seen = [self.append(), str(self.memory_mb), image.RECIPE, self.art.release, PORTS,
                str(self.art.image.stat().st_mtime_ns), str(self.art.initrd.stat().st_mtime_ns)]
        key = hashlib.sha256("\n".join(seen).encode()).hexdigest()[:12]
        return self.art.lab / "snapshots" / f"{self.name}-{key}"

    def command(self) -> list[str]:
        append = self.append()
        return [
            "nice", "-n", "19", "qemu-system-x86_64", "-accel", "tcg", "-machine", "q35", "-cpu", "max",
            "-smp", "1", "-m", str(self.memory_mb), "-nodefaults", "-no-user-config", "-display", "none",
            "-kernel", str(self.art.kernel), "-initrd", str(self.art.initrd), "-append", append,
            "-drive", f"file={self.dir / 'disk.qcow2'},if=virtio,format=qcow2,cache=unsafe",
            "-netdev", f"user,id=net0,hostfwd=tcp:127.0.0.1:{self.node_port}-:{NODE_PORT}",
            "-device", "virtio-net-pci,netdev=net0",
            "-device", "virtio-serial-pci",
            "-chardev", f"socket,id=agent,path={self.dir / 'agent.sock'},server=on,wait=off",
            "-device", "virtserialport,chardev=agent,name=vmlab.agent",
            "-chardev", f"socket,id=clock,path={self.dir / 'clock.sock'},server=on,wait=off",
            "-device", "virtserialport,chardev=clock,name=vmlab.clock",
            "-virtfs", f"local,path={self.share},mount_tag=host,security_model=none,readonly=on",
            "-qmp", f"unix:{self.dir / 'qmp.sock'},server=on,wait=off",
            "-serial", f"file:{self.dir / 'console.log'}",
            "-pidfile", str(self.pidfile),
        ]

    def start(self, restore: bool | None = None) -> None:
        """Starts QEMU: restoring the cached state when there is one (and `restore` is not False), else booting."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.share.mkdir(parents=True, exist_ok=True)
        disk = self.dir / "disk.qcow2"
        disk.unlink(missing_ok=True)
        snap = self.snapshot
        wanted = SNAPSHOTS if restore is None else restore
        self.restored = wanted and (snap / "state").exists() and (snap / "disk.qcow2").exists()
        command = self.command()
        if self.restored:
            # The disk as it was when the memory was saved (its backing file is the cached root image).
            shutil.copyfile(snap / "disk.qcow2", disk)
            command += ["-incoming", f"exec:cat {shlex.quote(str(snap / 'state'))}"]
        else:
            run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", self.art.image, "-F", "raw", disk])
        log = open(self.dir / "qemu.log", "w")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def after_boot(self) -> None:
        """A restored guest's wall clock still reads the moment it was saved: set it to the host's."""
        if self.restored:
            self.sh(f"date -u -s @{time.time():.6f} >/dev/null")

    def save_snapshot(self, timeout: float = 600) -> float:
        """Saves this freshly booted VM (nothing mounted from the host yet: a mounted 9p share blocks migration)
        for later labs, then lets it run on. Returns the seconds it took."""
        start = time.monotonic()
        snap = self.snapshot
        tmp = snap.with_name(f"{snap.name}.{os.getpid()}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            self.sh("sync")
            qmp = QMP(self.dir / "qmp.sock")
            qmp.command("migrate-set-parameters", **{"max-bandwidth": 4 << 30})  # QEMU's default is 32 MiB/s
            qmp.command("migrate", uri=f"exec:cat > {shlex.quote(str(tmp / 'state'))}")
            deadline = time.monotonic() + timeout
            while (status := qmp.command("query-migrate").get("status")) not in ("completed", "failed", "cancelled"):
                if time.monotonic() > deadline:
                    qmp.command("migrate_cancel")
                    raise LabError(f"{self.name}: saving its state took over {timeout:.0f} s.")
                time.sleep(0.2)  # QEMU's migration status, polled
            if status != "completed":
                raise LabError(f"{self.name}: saving its state {status}.")
            # Paused now (post-migrate), its disk flushed: the overlay matches the saved memory.
            shutil.copyfile(self.dir / "disk.qcow2", tmp / "disk.qcow2")
            qmp.command("cont")
            try:
                tmp.rename(snap)
            except OSError:  # another lab saved it first
                pass
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return time.monotonic() - start

    def wait_booted(self, timeout: float = 240) -> float:
        """Seconds from QEMU's start until the guest agent (a multi-user systemd unit) answers."""
        deadline = time.monotonic() + timeout
        while not (self.dir / "agent.sock").exists():
            if self.proc is not None and self.proc.poll() is not None:
                raise LabError(f"QEMU for {self.name} exited {self.proc.returncode}: "
                               f"{(self.dir / 'qemu.log').read_text()[-500:]}")
            if time.monotonic() > deadline:
                raise LabError(f"QEMU for {self.name} made no agent socket within {timeout:.0f} s.")
            time.sleep(0.1)
        self.agent.wait_ready(deadline - time.monotonic())
        return time.monotonic() - self.started

    def sh(self, cmd: str, timeout: float = 120, check: bool = True) -> str:
        reply = self.agent.run(cmd, timeout)
        if check and reply["rc"] != 0:
            raise LabError(f"{self.name}: `{cmd[:80]}` failed (exit {reply['rc']}): "
                           f"{(reply['err'] or reply['out']).strip()[-800:]}")
        return reply["out"]

    def stop(self) -> None:
        self.agent.close()
        pid = None
        if self.proc is not None:
            pid = self.proc.pid
        elif self.pidfile.exists():
            pid = int(self.pidfile.read_text().strip() or 0) or None
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
