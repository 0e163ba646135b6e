"""The protocol from C (clients/c): coord-status, built with make against Debian's libprotobuf-c and libzmq,
prints a real coord-node's status (plain and CURVE), and reports every kind of bad reply from a fake node — a
Python ROUTER that answers with garbage, a wrong request id, an Error, a truncated Envelope, nothing at all —
as one sentence on stderr and a non-zero exit: never a signal, never a hang. The checked-in protobuf-c code
must be what scripts/generate-c-client.sh makes from proto/."""

from __future__ import annotations

import os
import queue
import random
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
import zmq
import zmq.auth

from conftest import CAMERAS, NODE_NAME, Node, new_take_id, record_take

ROOT = Path(__file__).resolve().parents[2]
CLIENT_DIR = ROOT / "clients" / "c"
GENERATOR = ROOT / "scripts" / "generate-c-client.sh"
RUN_TIMEOUT_S = 20.0   # coord-status's own timeouts are far shorter: hitting this one is a hang
FAKE_TIMEOUT_MS = 500  # what coord-status waits for the fake node


# ---- building the client ----

def missing_toolchain() -> str | None:
    for tool in ("gcc", "make", "pkg-config"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian: apt-get install gcc make pkg-config)"
    for package, debian in (("libprotobuf-c", "libprotobuf-c-dev"), ("libzmq", "libzmq3-dev")):
        if subprocess.run(["pkg-config", "--exists", package], timeout=30).returncode != 0:
            return f"pkg-config finds no {package} (Debian: apt-get install {debian})"
    return None


def build(build_dir: Path, extra: list[str] | None = None) -> Path:
    reason = missing_toolchain()
    if reason is not None:
        pytest.skip(f"cannot build the C client: {reason}")
    result = subprocess.run(["make", "-C", str(CLIENT_DIR), f"BUILD={build_dir}", *(extra or [])],
                            capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        pytest.fail(f"make -C clients/c failed:\n{result.stdout}\n{result.stderr}")
    binary = build_dir / "coord-status"
    assert binary.is_file(), f"make succeeded but {binary} is missing"
    return binary


@pytest.fixture(scope="module")
def coord_status(tmp_path_factory) -> Path:
    """Built out of the tree, so the test leaves clients/c as it found it."""
    return build(tmp_path_factory.mktemp("c-client"))


@pytest.fixture(scope="module")
def coord_status_sanitized(tmp_path_factory) -> Path:
    """The same client under AddressSanitizer and UBSan: a bad read the fuzz cases provoke fails loudly."""
    sanitize = "-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
    return build(tmp_path_factory.mktemp("c-client-asan"), [f"CFLAGS=-O1 -g {sanitize}", f"LDFLAGS={sanitize}"])


class Run:
    def __init__(self, result: subprocess.CompletedProcess):
        self.code = result.returncode
        self.stdout = result.stdout
        self.stderr = result.stderr

    def __repr__(self):
        return f"exit {self.code}, stdout {self.stdout!r}, stderr {self.stderr!r}"


def run(binary: Path, *args: str, env: dict | None = None) -> Run:
    try:
        result = subprocess.run([str(binary), *args], capture_output=True, text=True, errors="replace",
                                timeout=RUN_TIMEOUT_S, stdin=subprocess.DEVNULL, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"coord-status {' '.join(args)} hung: no exit within {RUN_TIMEOUT_S:.0f} s")
    return Run(result)


def assert_one_sentence(r: Run, code: int = 1, *expected: str):
    """Failed cleanly: the exit status, nothing on stdout, one stderr line naming what is wrong."""
    assert r.code >= 0, f"coord-status died of signal {-r.code}: {r!r}"
    assert r.code == code, f"expected exit {code}: {r!r}"
    assert r.stdout == "", f"a failed run printed a status: {r!r}"
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("coord-status: "), f"expected one sentence on stderr: {r!r}"
    for text in expected:
        assert text in lines[0], f"stderr does not say {text!r}: {r!r}"


# ---- against a real node ----

def assert_status_of_idle_node(r: Run, endpoint: str):
    assert r.code == 0, f"coord-status failed against a real node: {r!r}"
    assert r.stderr == ""
    lines = r.stdout.splitlines()
    assert lines[0] == f"node {NODE_NAME} at {endpoint}", r.stdout
    assert any(line.split() == ["state", "idle"] for line in lines), r.stdout
    for camera in CAMERAS:
        assert any(line.strip().startswith(f"{camera}  synthetic") for line in lines), f"{camera} missing:\n{r.stdout}"


def test_prints_a_real_nodes_status(coord_status, node):
    r = run(coord_status, node.endpoint)
    assert_status_of_idle_node(r, node.endpoint)
    assert "cameras (2)" in r.stdout


def test_prints_the_figures_of_a_recorded_take(coord_status, node, client):
    take_id = new_take_id("cclient")
    record_take(client, take_id, groups=15, camera="cam1")
    r = run(coord_status, "--timeout-ms", "5000", node.endpoint)
    assert r.code == 0, repr(r)
    lines = r.stdout.splitlines()
    assert any(line.split() == ["state", "finished"] for line in lines), r.stdout
    assert any(line.split() == ["take", take_id] for line in lines), r.stdout
    cam1 = next(line for line in lines if line.strip().startswith("cam1 "))
    assert "frames 15, dropped 0" in cam1 and "finished" in cam1, r.stdout
    cam0 = next(line for line in lines if line.strip().startswith("cam0 "))
    assert "not in a take" in cam0, r.stdout


def test_a_closed_port_is_one_sentence_not_a_hang(coord_status):
    with zmq.Context() as ctx, ctx.socket(zmq.ROUTER) as probe:
        port = probe.bind_to_random_port("tcp://127.0.0.1")
    probe_endpoint = f"tcp://127.0.0.1:{port}"  # bound and closed again: nothing listens there now
    r = run(coord_status, "--timeout-ms", str(FAKE_TIMEOUT_MS), probe_endpoint)
    assert_one_sentence(r, 1, probe_endpoint, f"no connection within {FAKE_TIMEOUT_MS} ms")


# ---- CURVE, against a keyed node ----

@pytest.fixture
def keyed(tmp_path):
    """A node serving CURVE only to the 'coordinator' key (as test_security.py starts one)."""
    for directory in ("node-keys", "client-keys", "stranger-keys"):
        (tmp_path / directory).mkdir()
    node_public, node_secret = zmq.auth.create_certificates(str(tmp_path / "node-keys"), NODE_NAME)
    client_public, client_secret = zmq.auth.create_certificates(str(tmp_path / "client-keys"), "coordinator")
    stranger_public, stranger_secret = zmq.auth.create_certificates(str(tmp_path / "stranger-keys"), "stranger")
    authorized = tmp_path / "authorized"
    authorized.mkdir()
    shutil.copy(client_public, authorized / "coordinator.key")
    n = Node(tmp_path / "node", extra_args=["--cert", node_secret, "--authorized", str(authorized)])
    yield {"node": n, "node_public": node_public, "client_secret": client_secret, "stranger_secret": stranger_secret}
    n.cleanup()


def test_curve_with_certificate_files(coord_status, keyed):
    n = keyed["node"]
    r = run(coord_status, "--cert", keyed["client_secret"], "--server-cert", keyed["node_public"], n.endpoint)
    assert_status_of_idle_node(r, n.endpoint)


def test_curve_with_z85_keys(coord_status, keyed):
    n = keyed["node"]
    server, _ = zmq.auth.load_certificate(keyed["node_public"])
    public, secret = zmq.auth.load_certificate(keyed["client_secret"])
    r = run(coord_status, "--curve-server-key", server.decode(), "--curve-public-key", public.decode(),
            "--curve-secret-key", secret.decode(), n.endpoint)
    assert_status_of_idle_node(r, n.endpoint)


def test_curve_strangers_get_one_sentence(coord_status, keyed):
    n = keyed["node"]
    timeout = ["--timeout-ms", "1500"]
    unlisted = run(coord_status, *timeout, "--cert", keyed["stranger_secret"], "--server-cert", keyed["node_public"],
                   n.endpoint)
    assert_one_sentence(unlisted, 1, n.endpoint)
    plain = run(coord_status, *timeout, n.endpoint)
    assert_one_sentence(plain, 1, n.endpoint)


def test_bad_keys_and_arguments_are_usage_errors(coord_status, keyed, tmp_path):
    n = keyed["node"]
    assert_one_sentence(run(coord_status), 2, "ENDPOINT")
    assert_one_sentence(run(coord_status, "--timeout-ms", "soon", n.endpoint), 2, "--timeout-ms", "soon")
    assert_one_sentence(run(coord_status, "--frobnicate", n.endpoint), 2, "--frobnicate")
    assert_one_sentence(run(coord_status, "--cert", keyed["client_secret"], n.endpoint), 2, "node's public key")
    # A public certificate where the pair is needed, a file that is not a certificate, a short key.
    assert_one_sentence(run(coord_status, "--cert", keyed["node_public"], "--server-cert", keyed["node_public"],
                            n.endpoint), 2, keyed["node_public"], "only a public key")
    junk = tmp_path / "junk.key"
    junk.write_bytes(b"\x00\xff not a certificate\n")
    assert_one_sentence(run(coord_status, "--cert", keyed["client_secret"], "--server-cert", str(junk), n.endpoint),
                        2, str(junk), "no public-key line")
    assert_one_sentence(run(coord_status, "--curve-server-key", "abc", "--curve-secret-key", "x" * 40, n.endpoint),
                        2, "--curve-server-key", "40 Z85 characters")
    # A pair whose public key is not the secret key's.
    _, secret = zmq.auth.load_certificate(keyed["client_secret"])
    other, _ = zmq.auth.load_certificate(keyed["node_public"])
    assert_one_sentence(run(coord_status, "--curve-server-key", other.decode(), "--curve-public-key", other.decode(),
                            "--curve-secret-key", secret.decode(), n.endpoint), 2, "does not belong")


# ---- against a fake node that answers badly ----

class FakeNode:
    """A ROUTER on loopback whose answers a function decides: answer(index, request Envelope) returns the frames
    to send back (bytes or a list of bytes), or None for no answer. The socket lives in its own thread."""

    def __init__(self, pb, answer):
        self.pb = pb
        self.answer = answer
        self.requests: list = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        ready: "queue.Queue[str]" = queue.Queue()
        self._thread = threading.Thread(target=self._serve, args=(ready,), daemon=True)
        self._thread.start()
        self.endpoint = ready.get(timeout=10)

    def _serve(self, ready):
        ctx = zmq.Context()
        sock = ctx.socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, 0)
        port = sock.bind_to_random_port("tcp://127.0.0.1")
        ready.put(f"tcp://127.0.0.1:{port}")
        try:
            while not self._stop.is_set():
                if not sock.poll(50):
                    continue
                identity, *frames = sock.recv_multipart()
                env = self.pb.Envelope()
                try:
                    env.ParseFromString(frames[0])
                except Exception as e:
                    self.errors.append(f"coord-status sent bytes that are not an Envelope: {e}")
                    continue
                self.requests.append(env)
                try:
                    reply = self.answer(len(self.requests) - 1, env)
                except Exception as e:  # a broken test, reported by run_fake rather than lost in this thread
                    self.errors.append(f"the fake node's answer raised {e!r}")
                    continue
                if reply is not None:
                    sock.send_multipart([identity, *([reply] if isinstance(reply, bytes) else reply)])
        finally:
            sock.close(linger=0)
            ctx.term()

    def close(self):
        self._stop.set()
        self._thread.join(timeout=10)


@pytest.fixture
def fake(pb):
    made: list[FakeNode] = []

    def start(answer):
        f = FakeNode(pb, answer)
        made.append(f)
        return f
    yield start
    for f in made:
        f.close()


def hello_reply(pb, request, **fields):
    env = pb.Envelope(protocol_version=1, request_id=request.request_id)
    env.hello_reply.CopyFrom(pb.HelloReply(node="fake", agent_version="0", cameras=[pb.CameraInfo(name="cam0")]))
    for key, value in fields.items():
        setattr(env, key, value)
    return env


def status_reply(pb, request):
    env = pb.Envelope(protocol_version=1, request_id=request.request_id)
    env.status.CopyFrom(pb.Status(
        node="fake", state=pb.Status.RECORDING, take_id="20250101-000000-x-abcdef", pressure=pb.FAIR,
        pressure_cause="CPU load is 90 %.", t0_us=1000, frame_period_us=33333, rig_now_us=2000, stop_group=0,
        cameras=[pb.CameraStatus(camera="cam0", frames=10, dropped=1, last_group=9, record_every=1, error="x")],
        events=[pb.NodeEvent(t_us=5, camera="cam0", kind="drop", detail="a dropped frame")],
        resources=pb.NodeResources(cpu_count=2, cpu_load=0.5, free_disk_bytes=10**9, disk_total_bytes=10**10)))
    return env


def handshake_then(pb, status_answer):
    """A fake that answers the Hello well and the StatusRequest with status_answer(request)."""
    def answer(index, request):
        if request.WhichOneof("body") == "hello":
            return hello_reply(pb, request).SerializeToString()
        return status_answer(request)
    return answer


def run_fake(binary: Path, f: FakeNode) -> Run:
    r = run(binary, "--timeout-ms", str(FAKE_TIMEOUT_MS), f.endpoint)
    assert not f.errors, f.errors
    return r


def test_the_handshake_and_status_request_are_well_formed(coord_status, fake, pb):
    f = fake(handshake_then(pb, lambda request: status_reply(pb, request).SerializeToString()))
    r = run_fake(coord_status, f)
    assert r.code == 0, repr(r)
    hello, status = f.requests
    assert (hello.protocol_version, hello.WhichOneof("body")) == (1, "hello")
    assert hello.hello.coordinator, "the Hello names no coordinator host"
    assert (status.protocol_version, status.WhichOneof("body")) == (1, "status_request")
    assert hello.request_id != status.request_id
    for text in ["node fake at", "recording", "20250101-000000-x-abcdef", "fair: CPU load is 90 %.",
                 "period 33333 µs", "no stop set", "frames 10, dropped 1", "error: x", "drop: a dropped frame"]:
        assert text in r.stdout, f"{text!r} missing:\n{r.stdout}"


GARBAGE = b"\xff" * 37  # a field tag whose varint never ends


@pytest.mark.parametrize("case, answer, expected", [
    ("garbage", lambda pb, rq: GARBAGE,
     ["the reply to the Hello is not a coord Envelope (37 bytes that protobuf-c cannot unpack)"]),
    ("random bytes", lambda pb, rq: random.Random(7).randbytes(64), ["the reply to the Hello"]),
    ("wrong request id", lambda pb, rq: hello_reply(pb, rq, request_id=rq.request_id + 6).SerializeToString(),
     ["reply to request 1 (the Hello) answers request 7"]),
    ("an Error body", lambda pb, rq: pb.Envelope(protocol_version=1, request_id=rq.request_id, error=pb.Error(
        code=pb.Error.BAD_STATE, message="node fake is busy.")).SerializeToString(),
     ["the node answered the Hello with error BAD_STATE: node fake is busy."]),
    ("truncated Envelope", lambda pb, rq: hello_reply(pb, rq).SerializeToString()[:-3],
     ["is not a coord Envelope", "protobuf-c cannot unpack"]),
    ("no reply", lambda pb, rq: None, [f"no reply to the Hello within {FAKE_TIMEOUT_MS} ms"]),
    ("another protocol version", lambda pb, rq: hello_reply(pb, rq, protocol_version=2).SerializeToString(),
     ["the node speaks protocol version 2, this client 1"]),
    ("an empty frame", lambda pb, rq: b"", ["carries no protocol version (0 bytes)"]),
    ("the wrong body", lambda pb, rq: status_reply(pb, rq).SerializeToString(),
     ["answered the Hello with a status, expected a hello_reply"]),
    ("no body", lambda pb, rq: pb.Envelope(protocol_version=1, request_id=rq.request_id).SerializeToString(),
     ["no body this client knows"]),
    ("two frames", lambda pb, rq: [hello_reply(pb, rq).SerializeToString()] * 2, ["more than one frame"]),
])
def test_a_bad_handshake_reply_is_one_sentence(coord_status, fake, pb, case, answer, expected):
    f = fake(lambda index, request: answer(pb, request))
    assert_one_sentence(run_fake(coord_status, f), 1, f.endpoint, *expected)


@pytest.mark.parametrize("case, answer, expected", [
    ("garbage", lambda pb, rq: GARBAGE, ["the reply to the StatusRequest is not a coord Envelope (37 bytes"]),
    ("wrong request id", lambda pb, rq: pb.Envelope(protocol_version=1, request_id=7, status=pb.Status(
        node="fake")).SerializeToString(), ["reply to request 2 (the StatusRequest) answers request 7"]),
    ("an Error body", lambda pb, rq: pb.Envelope(protocol_version=1, request_id=rq.request_id, error=pb.Error(
        code=pb.Error.INTERNAL, message="it broke.")).SerializeToString(), ["with error INTERNAL: it broke."]),
    ("truncated Envelope", lambda pb, rq: status_reply(pb, rq).SerializeToString()[:40], ["cannot unpack"]),
    ("no reply", lambda pb, rq: None, [f"no reply to the StatusRequest within {FAKE_TIMEOUT_MS} ms"]),
])
def test_a_bad_status_reply_is_one_sentence(coord_status, fake, pb, case, answer, expected):
    f = fake(handshake_then(pb, lambda request: answer(pb, request)))
    r = run_fake(coord_status, f)
    assert_one_sentence(r, 1, f.endpoint, *expected)


def test_hostile_text_is_escaped_not_printed(coord_status, fake, pb):
    """A terminal escape, a C1 control and invalid UTF-8 from the node reach the operator's screen escaped."""
    hostile = "\x1b[2J\u009b31m"

    def status(request):
        env = status_reply(pb, request)
        env.status.node = hostile
        env.status.cameras[0].error = "x" * 5000  # longer than any line should be
        return env.SerializeToString()
    r = run_fake(coord_status, fake(handshake_then(pb, status)))
    assert r.code == 0, repr(r)
    assert "\x1b" not in r.stdout and "\u009b" not in r.stdout, repr(r.stdout)
    assert "node \\x1b[2J\\xc2\\x9b31m at" in r.stdout, r.stdout
    assert max(len(line) for line in r.stdout.splitlines()) < 1000

    def error(index, request):
        raw = pb.Envelope(protocol_version=1, request_id=request.request_id, error=pb.Error(
            code=pb.Error.IO, message="disk \x1b]0;owned\x07 full")).SerializeToString()
        return raw.replace(b"full", b"f\xffll")  # invalid UTF-8, which protobuf-c passes through
    r = run_fake(coord_status, fake(error))
    assert_one_sentence(r, 1, "error IO: disk \\x1b]0;owned\\x07 f\\xffll")


def test_mutated_replies_never_crash_it(coord_status_sanitized, fake, pb):
    """Bit flips, cuts and splices of a valid Status reply, under ASan and UBSan: every run ends in exit 0 or
    one sentence and exit 1, never a signal or a sanitizer report."""
    rng = random.Random(20250113)
    cases = 120

    def mutate(request):
        raw = bytearray(status_reply(pb, request).SerializeToString())
        for _ in range(rng.randint(1, 6)):
            kind = rng.randrange(4)
            i = rng.randrange(len(raw))
            if kind == 0:
                raw[i] ^= 1 << rng.randrange(8)
            elif kind == 1:
                raw[i] = rng.choice([0x00, 0x7f, 0x80, 0xff])
            elif kind == 2:
                del raw[i:i + rng.randint(1, 8)]
            else:
                raw[i:i] = rng.randbytes(rng.randint(1, 8))
            if not raw:
                break
        return bytes(raw)
    f = fake(handshake_then(pb, mutate))
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=99",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=98")
    outcomes = {0: 0, 1: 0}
    for n in range(cases):
        r = run(coord_status_sanitized, "--timeout-ms", "2000", f.endpoint, env=env)
        assert r.code in (0, 1), f"mutation {n}: {r!r}"
        if r.code == 1:
            assert_one_sentence(r, 1, f.endpoint)
        outcomes[r.code] += 1
    assert not f.errors, f.errors
    # Both ends are exercised: some mutations still unpack (and print), most are refused.
    assert outcomes[0] > 0 and outcomes[1] > 0, f"exit statuses over {cases} mutations: {outcomes}"


# ---- the generated code ----

def test_checked_in_protobuf_c_code_is_up_to_date():
    if shutil.which("protoc") is None or shutil.which("protoc-gen-c") is None:
        pytest.skip("protoc and protoc-gen-c are needed (Debian: apt-get install protobuf-compiler "
                    "protobuf-c-compiler)")
    result = subprocess.run([str(GENERATOR), "--check"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"{GENERATOR.name} --check failed:\n{result.stdout}\n{result.stderr}"
    assert "up to date" in result.stdout
