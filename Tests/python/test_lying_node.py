"""A lying node (issue 23): a proxy in front of a real `coord-node` changes one field of its replies, as a broken
or hostile node could. The coordinator checks every field a node sends at its edge, so each lie ends `coord
start-take`, `coord plan` or `coord collect` with a sentence naming the node and the field and a normal exit
code (never a signal); no file in the take fails its checksum; the lying node's real file is released only when
its copy verified; the honest node's files are still collected; and `coord console` outlives a lying clock.

The proxy is a plaintext ROUTER that gives each coordinator connection its own DEALER to the node, decodes every
Envelope that passes and lets a test's `reply` (and `request`) hook rewrite it."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import zmq

from test_budget_pressure import COORD, rig_file, run_coord, start_node

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1


class LyingProxy:
    """Relays a coordinator's requests to a real node and its replies back, through `request` and `reply` hooks
    (each takes the decoded Envelope and changes it in place; `reply` also gets the request it answers)."""

    def __init__(self, pb, node_endpoint: str):
        self.pb = pb
        self.node_endpoint = node_endpoint
        self.request = None
        self.reply = None
        # Rewrites a reply's raw second frame (a Chunk's bytes): takes the Envelope, the request and the bytes,
        # returns new bytes or None.
        self.payload = None
        self.rewrites = 0
        self._stop = False
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self._ready.wait(10), "the proxy did not bind"

    def _decode(self, data: bytes):
        env = self.pb.Envelope()
        try:
            env.ParseFromString(data)
        except Exception:
            return None
        return env

    def _run(self):
        ctx = zmq.Context()
        front = ctx.socket(zmq.ROUTER)
        front.setsockopt(zmq.LINGER, 0)
        port = front.bind_to_random_port("tcp://127.0.0.1")
        self.endpoint = f"tcp://127.0.0.1:{port}"
        self._ready.set()
        backs: dict[bytes, zmq.Socket] = {}
        owners: dict[zmq.Socket, bytes] = {}
        asked: dict[int, object] = {}  # request id → the request as the node got it
        poller = zmq.Poller()
        poller.register(front, zmq.POLLIN)
        while not self._stop:
            for sock, _ in poller.poll(50):
                if sock is front:
                    identity, *frames = front.recv_multipart()
                    if identity not in backs:
                        back = ctx.socket(zmq.DEALER)
                        back.setsockopt(zmq.LINGER, 0)
                        back.connect(self.node_endpoint)
                        backs[identity] = back
                        owners[back] = identity
                        poller.register(back, zmq.POLLIN)
                    env = self._decode(frames[0])
                    if env is not None:
                        if self.request is not None and self.request(env):
                            self.rewrites += 1
                            frames[0] = env.SerializeToString()
                        asked[env.request_id] = env
                    backs[identity].send_multipart(frames)
                else:
                    frames = sock.recv_multipart()
                    env = self._decode(frames[0])
                    req = asked.pop(env.request_id, None) if env is not None else None
                    if env is not None and self.reply is not None:
                        if self.reply(env, req):
                            self.rewrites += 1
                            frames[0] = env.SerializeToString()
                    if env is not None and self.payload is not None and len(frames) > 1:
                        changed = self.payload(env, req, frames[1])
                        if changed is not None:
                            self.rewrites += 1
                            frames[1] = changed
                    front.send_multipart([owners[sock], *frames])
        for s in [front, *backs.values()]:
            s.close(linger=0)
        ctx.term()

    def close(self):
        self._stop = True
        self._thread.join(5)


# ---- the lies: each changes one field and says whether it did ----

def clock_min(env, _):
    if env.WhichOneof("body") != "clock_probe_reply":
        return False
    env.clock_probe_reply.t2_us = INT64_MIN
    return True


def clock_max(env, _):
    if env.WhichOneof("body") != "clock_probe_reply":
        return False
    env.clock_probe_reply.t2_us = INT64_MAX
    env.clock_probe_reply.t3_us = INT64_MAX
    return True


def frame_period(env, _):
    if env.WhichOneof("body") != "hello_reply":
        return False
    env.hello_reply.cameras[0].formats[0].max_frame_period_us = UINT64_MAX
    return True


def empty_camera(env, _):
    if env.WhichOneof("body") != "hello_reply":
        return False
    env.hello_reply.cameras[1].name = ""
    return True


def repeated_camera(env, _):
    if env.WhichOneof("body") != "hello_reply":
        return False
    env.hello_reply.cameras[1].name = env.hello_reply.cameras[0].name
    return True


def huge_file(env, _):
    if env.WhichOneof("body") != "file_list":
        return False
    for f in env.file_list.files:
        if f.path == "liar/cam0.mkv":
            f.bytes = UINT64_MAX
    return True


FAKE = "liar/.cam0.mkv.part"


def part_request(env):
    """FetchChunk of the fake path reads the camera's frames table; the confirmation leaves the fake out."""
    body = env.WhichOneof("body")
    if body == "fetch_chunk" and env.fetch_chunk.path == FAKE:
        env.fetch_chunk.path = "liar/cam0.frames.csv"
        return True
    if body == "confirm_collected" and any(f.path == FAKE for f in env.confirm_collected.files):
        kept = [f for f in env.confirm_collected.files if f.path != FAKE]
        del env.confirm_collected.files[:]
        env.confirm_collected.files.extend(kept)
        return True
    return False


def part_reply(env, _):
    """A file list holding `liar/.cam0.mkv.part` (the frames table's bytes) beside `liar/cam0.mkv`."""
    if env.WhichOneof("body") != "file_list":
        return False
    csv = next(f for f in env.file_list.files if f.path == "liar/cam0.frames.csv")
    env.file_list.files.add(path=FAKE, bytes=csv.bytes, sha256=csv.sha256)
    return True


# ---- helpers ----

def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def staged(node, take_id: str) -> dict[str, str]:
    d = node.staging / take_id
    return {p.relative_to(d).as_posix(): sha256(p) for p in d.rglob("*") if p.is_file() and not p.name.startswith(".")} \
        if d.exists() else {}


def sentence(stderr: str) -> str:
    lines = [l for l in stderr.splitlines() if l.startswith("coord:")]
    assert lines, f"no sentence on stderr: {stderr[-2000:]}"
    return lines[-1]


def assert_every_file_verifies(take: Path):
    m = json.loads((take / "manifest.json").read_text())
    for c in m["cameras"]:
        for f in c["files"]:
            assert sha256(take / f["path"]) == f["sha256"] and (take / f["path"]).stat().st_size == f["bytes"], f
    return m


@pytest.fixture
def rig(tmp_path, pb):
    liar = start_node(tmp_path, "liar", "cam0,cam1")
    honest = start_node(tmp_path, "honest", "cam0")
    proxy = LyingProxy(pb, liar.endpoint)
    path = rig_file(tmp_path / "rig.yaml", [("liar", proxy, ""), ("honest", honest, "")])
    yield path, proxy, liar, honest
    proxy.close()
    liar.kill()
    honest.kill()


# ---- before recording: the handshake and the clock ----

@pytest.mark.parametrize("lie,field", [
    (frame_period, "HelloReply.cameras[0].formats[0].max_frame_period_us"),
    (empty_camera, "HelloReply.cameras[1].name"),
    (repeated_camera, "HelloReply.cameras[1].name"),
], ids=["frame-period-2^64-1", "empty-camera-name", "repeated-camera-name"])
def test_a_lying_handshake_is_refused_naming_node_and_field(tmp_path, rig, lie, field):
    path, proxy, liar, honest = rig
    proxy.reply = lie
    for args in (["plan", "--rig", path], ["start-take", "--rig", path, "--seconds", 1, "--takes-dir", tmp_path / "takes"]):
        r = run_coord(*args)
        assert r.returncode in (1, 2), (args, r.returncode, r.stderr)
        said = sentence(r.stderr)
        assert "liar" in said and field in said, said
    assert proxy.rewrites >= 2
    # Nothing was recorded: no take directory holds files that could be called complete.
    assert not (tmp_path / "takes").exists() or not list((tmp_path / "takes").rglob("*.mkv"))
    assert liar.proc.poll() is None and honest.proc.poll() is None


@pytest.mark.parametrize("lie,field", [(clock_min, "ClockProbeReply.t2_us"), (clock_max, "ClockProbeReply.t2_us")],
                         ids=["t2=-2^63", "t2=t3=2^63-1"])
def test_a_lying_clock_ends_start_take_with_a_sentence(tmp_path, rig, lie, field):
    path, proxy, _, _ = rig
    proxy.reply = lie
    r = run_coord("start-take", "--rig", path, "--seconds", 1, "--takes-dir", tmp_path / "takes")
    assert r.returncode == 1, (r.returncode, r.stderr)
    said = sentence(r.stderr)
    assert "liar" in said and "clock" in said and field in said, said


def test_a_console_outlives_a_lying_clock(tmp_path, rig):
    path, proxy, _, _ = rig
    proxy.reply = clock_min
    console = subprocess.Popen([str(COORD), "console", "--rig", str(path), "--listen", "127.0.0.1:0",
                                "--takes-dir", str(tmp_path / "takes")],
                               stdout=subprocess.PIPE, stderr=open(tmp_path / "console.err", "w"), text=True)
    try:
        # CONTRACT §6b: one line `CONSOLE http://HOST:PORT/?token=TOKEN`, and the token on every request.
        line = console.stdout.readline()
        found = re.match(r"CONSOLE (http://[\d.:]+)/\?token=(\S+)$", line.strip())
        assert found, f"the console printed {line!r}"
        base, token = found.group(1), found.group(2)
        started = time.monotonic()
        answers = 0
        # The property is time itself: a console that trapped on the lie died about 10 s after start.
        while time.monotonic() - started < 16:
            assert console.poll() is None, f"the console died ({console.returncode}): {(tmp_path / 'console.err').read_text()[-2000:]}"
            request = urllib.request.Request(base + "/api/rig", headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(request, timeout=10) as r:
                nodes = {n["name"]: n for n in json.loads(r.read())["nodes"]}
            assert set(nodes) == {"liar", "honest"}
            answers += 1
            time.sleep(0.5)
        assert proxy.rewrites > 0 and answers > 10
        assert console.poll() is None
    finally:
        console.terminate()
        console.wait(15)
    assert console.returncode is not None and console.returncode >= 0, console.returncode


# ---- after recording: collection ----

def record_then_lie(tmp_path, rig, request=None, reply=None, payload=None):
    path, proxy, liar, honest = rig
    takes = tmp_path / "takes"
    r = run_coord("start-take", "--rig", path, "--seconds", 1, "--takes-dir", takes, "--collect-later")
    assert r.returncode == 0, r.stderr
    take = next(d for d in takes.iterdir() if d.is_dir())
    take_id = take.name
    real = staged(liar, take_id)
    assert "liar/cam0.mkv" in real and len(staged(honest, take_id)) == 2
    proxy.request, proxy.reply, proxy.payload = request, reply, payload
    r = run_coord("collect", "--rig", path, take)
    assert r.returncode >= 0, r.returncode
    return r, take, take_id, real


def test_a_file_of_2_64_bytes_leaves_the_take_partial_and_the_honest_node_collected(tmp_path, rig):
    _, proxy, liar, honest = rig
    r, take, take_id, real = record_then_lie(tmp_path, rig, reply=huge_file)
    assert r.returncode == 4, r.stderr
    assert "liar" in r.stderr and "FileList.files[" in r.stderr and "].bytes 18446744073709551615" in r.stderr, r.stderr
    m = assert_every_file_verifies(take)
    assert m["status"] == "partial"
    # The honest node's files arrived, verified, and were released; the liar keeps every file of its own.
    assert {f["path"] for c in m["cameras"] if c["node"] == "honest" for f in c["files"]} == \
        {"honest/cam0.mkv", "honest/cam0.frames.csv"}
    assert staged(honest, take_id) == {}
    assert staged(liar, take_id) == real
    # The same `coord collect` once the node stops lying finishes the take.
    proxy.reply = None
    r = run_coord("collect", "--rig", rig[0], take)
    assert r.returncode == 0, r.stderr
    assert assert_every_file_verifies(take)["status"] == "complete"


def test_a_part_name_beside_a_real_file_cannot_replace_its_copy(tmp_path, rig):
    _, proxy, liar, _ = rig
    fakes: set[int] = set()

    def request(env):
        if env.WhichOneof("body") == "fetch_chunk" and env.fetch_chunk.path == FAKE:
            fakes.add(env.request_id)
        return part_request(env)

    def reply(env, asked):
        if env.WhichOneof("body") == "chunk" and env.request_id in fakes:
            env.chunk.path = FAKE
            return True
        return part_reply(env, asked)

    r, take, take_id, real = record_then_lie(tmp_path, rig, request=request, reply=reply)
    assert r.returncode in (0, 4), r.stderr
    assert fakes, "the coordinator never fetched the fake file"
    m = assert_every_file_verifies(take)
    # The camera's copy holds the node's real bytes, whatever the fake file's name.
    assert sha256(take / "liar" / "cam0.mkv") == real["liar/cam0.mkv"]
    after = staged(liar, take_id)
    for path, digest in real.items():
        if path not in after:  # released: only after its copy here verified
            assert (take / path).exists() and sha256(take / path) == digest, path
    assert "liar/cam0.mkv" not in after and m["status"] == "complete"
    assert not list(take.glob("liar/*.part.part"))


def flip_in_flight(times: int):
    """Flips one byte in the middle of the first chunk of liar/cam0.mkv, the first `times` times it passes."""
    flips = []

    def payload(env, asked, data):
        if len(flips) >= times or env.WhichOneof("body") != "chunk" or env.chunk.path != "liar/cam0.mkv" \
                or env.chunk.offset != 0 or len(data) == 0:
            return None
        flips.append(env.request_id)
        b = bytearray(data)
        b[len(b) // 2] ^= 0x01
        return bytes(b)
    return payload, flips


def test_a_byte_flipped_in_flight_is_caught_by_xxh128_and_fetched_again(tmp_path, rig):
    _, proxy, liar, _ = rig
    payload, flips = flip_in_flight(1)
    r, take, take_id, real = record_then_lie(tmp_path, rig, payload=payload)
    assert r.returncode == 0, r.stderr
    assert len(flips) == 1
    assert "liar/cam0.mkv does not match node liar's checksum (got xxh128" in r.stderr and "fetching it again" in r.stderr, r.stderr
    m = assert_every_file_verifies(take)
    assert m["status"] == "complete"
    run = next(f for f in m["collection"]["runs"][-1]["files"] if f["path"] == "liar/cam0.mkv")
    assert run["attempts"] == 2 and run["verified"]
    assert sha256(take / "liar" / "cam0.mkv") == real["liar/cam0.mkv"]
    # The manifest carries the node's xxh128 of every file, and it is the bytes' own.
    import xxhash
    for c in m["cameras"]:
        for f in c["files"]:
            assert f["xxh128"] == xxhash.xxh128((take / f["path"]).read_bytes()).hexdigest(), f
    assert staged(liar, take_id) == {}


def test_a_byte_flipped_in_flight_every_time_fails_that_file_and_the_node_keeps_it(tmp_path, rig):
    _, proxy, liar, _ = rig
    payload, flips = flip_in_flight(1000)
    r, take, take_id, real = record_then_lie(tmp_path, rig, payload=payload)
    assert r.returncode == 4, r.stderr
    assert len(flips) == 2
    assert "liar/cam0.mkv" in sentence(r.stderr) and "checksum" in sentence(r.stderr), r.stderr
    m = assert_every_file_verifies(take)
    assert m["status"] == "partial" and [x["path"] for x in m["collection"]["missing"]] == ["liar/cam0.mkv"]
    # No bad copy is kept, and the node keeps its own.
    assert not (take / "liar" / "cam0.mkv").exists() and not list(take.rglob(".*.part"))
    assert staged(liar, take_id) == {"liar/cam0.mkv": real["liar/cam0.mkv"]}
