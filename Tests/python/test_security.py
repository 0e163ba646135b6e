"""Transport security (CONTRACT §8), against real coord-node processes and the real `coord`: a node given
--cert and --authorized serves CURVE only, to the coordinators whose public certificate is in the directory.
A stranger — no CURVE at all, an unlisted certificate, or the right server key with an unlisted client key —
gets no reply to anything (handshake, status, configure, fetch, abort, delete) while an authorized take goes on
and completes. Keys made by pyzmq's zmq.auth work as node and coordinator keys, and `coord keys new` files load
in pyzmq. A node without keys refuses a network address unless --insecure. Denied peers are logged once a
minute per peer, not per attempt; repeated bad input is logged once a minute per kind."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest
import zmq
import zmq.auth

from conftest import (ARM_LEAD_US, FRAME_PERIOD_US, Client, NoReply, Node, configure_and_arm, fetch_file,
                      new_take_id, node_binary, now_us, record_take, wait_finished)
from test_budget_pressure import COORD, check_take, run_coord

SILENCE_MS = 1500


def keys(directory: Path, name: str) -> tuple[Path, Path]:
    """A pair made by pyzmq: (NAME.key, NAME.key_secret)."""
    directory.mkdir(parents=True, exist_ok=True)
    public, secret = zmq.auth.create_certificates(str(directory), name)
    return Path(public), Path(secret)


def z85(path: Path) -> tuple[bytes, bytes | None]:
    return zmq.auth.load_certificate(str(path))


class Keyed:
    """A node with keys, and the certificates around it."""

    def __init__(self, tmp_path: Path, name: str = "node-a", extra: list[str] | None = None):
        self.node_public, self.node_secret = keys(tmp_path / "node-keys", name)
        self.authorized = tmp_path / "authorized"
        coordinator_public, self.coordinator_secret = keys(tmp_path / "coordinator-keys", "coordinator")
        self.authorized.mkdir()
        (self.authorized / "coordinator.key").write_bytes(coordinator_public.read_bytes())
        self.node = Node(tmp_path / name, extra_args=["--name", name, "--cert", str(self.node_secret),
                                                      "--authorized", str(self.authorized), *(extra or [])])

    def client(self, ctx, pb, secret: Path | None = None, server_key: bytes | None = None, timeout_ms: int = 5000) -> Client:
        public, secret_key = z85(secret or self.coordinator_secret)
        return Client(ctx, self.node.endpoint, pb, timeout_ms=timeout_ms,
                      curve=(server_key or z85(self.node_public)[0], public, secret_key))


@pytest.fixture
def keyed(tmp_path):
    k = Keyed(tmp_path)
    yield k
    k.node.cleanup()


def assert_silent(client: Client, body_field: str, body):
    """The request gets nothing back: not an error, not a reply. (A peer whose handshake failed has no connection,
    so its send itself times out: that is the same silence.)"""
    with pytest.raises(NoReply):
        client.send_raw(client.envelope(body_field, body).SerializeToString())
        client.recv_envelope(timeout_ms=SILENCE_MS, what=body_field)


def strangers(tmp_path: Path, keyed: Keyed, zctx, pb) -> dict[str, Client]:
    _, unlisted = keys(tmp_path / "stranger-keys", "stranger")
    # A certificate for the node's name made by someone else: the right name, the wrong key.
    _, forged_node = keys(tmp_path / "forged", "node-a")
    return {
        "no CURVE": Client(zctx, keyed.node.endpoint, pb, timeout_ms=SILENCE_MS),
        "an unlisted certificate": keyed.client(zctx, pb, secret=unlisted, timeout_ms=SILENCE_MS),
        "a forged server key": keyed.client(zctx, pb, server_key=z85(forged_node)[0], timeout_ms=SILENCE_MS),
    }


def test_pyzmq_keys_serve_the_authorized_coordinator_a_whole_take(keyed, zctx, pb):
    c = keyed.client(zctx, pb)
    try:
        assert c.hello().node == "node-a"
        take_id = new_take_id("keyed")
        _, _, status = record_take(c, take_id, groups=10)
        assert {cam.frames for cam in status.cameras} == {10}
        listing = c.call("list_files", pb.ListFiles(take_id=take_id), "file_list")
        mkv = next(f for f in listing.files if f.path.endswith(".mkv"))
        assert len(fetch_file(c, take_id, mkv.path)) > 0
    finally:
        c.close()


def test_strangers_get_no_reply_to_anything_while_an_authorized_take_completes(tmp_path, keyed, zctx, pb):
    owner = keyed.client(zctx, pb)
    # A finished take the strangers try to list, fetch and delete.
    done = new_take_id("kept")
    record_take(owner, done, groups=5)
    files = owner.call("list_files", pb.ListFiles(take_id=done), "file_list").files
    # A take in progress they try to abort.
    live = new_take_id("live")
    configure_and_arm(owner, live)
    owner.call("start_at", pb.StartAt(take_id=live, start_group=0, stop_group=60), "ack")
    try:
        for who, stranger in strangers(tmp_path, keyed, zctx, pb).items():
            try:
                for field, body in [
                    ("hello", pb.Hello(coordinator="stranger")),
                    ("status_request", pb.StatusRequest()),
                    ("configure", pb.Configure(take_id=new_take_id("evil"), cameras=[pb.CameraConfig(
                        camera="cam1", ordinal=0, width=320, height=240, fps=30, codec="mjpeg")])),
                    ("list_files", pb.ListFiles(take_id=done)),
                    ("fetch_chunk", pb.FetchChunk(take_id=done, path=files[0].path, offset=0, length=1024)),
                    ("confirm_collected", pb.ConfirmCollected(take_id=done, files=files)),
                    ("abort", pb.Abort(take_id=live, reason="a stranger")),
                ]:
                    assert_silent(stranger, field, body)
            except AssertionError as e:
                raise AssertionError(f"a stranger with {who}: {e}") from None
            finally:
                stranger.close()
        status = wait_finished(owner, live, deadline_s=20)
        assert {cam.frames for cam in status.cameras} == {60}, [(cam.camera, cam.frames) for cam in status.cameras]
        still = owner.call("list_files", pb.ListFiles(take_id=done), "file_list").files
        assert [f.path for f in still] == [f.path for f in files], "a stranger's ConfirmCollected deleted files"
        for f in files:
            assert (keyed.node.staging / done / f.path).exists(), f"{f.path} is gone"
    finally:
        owner.close()


def test_denied_peers_are_logged_once_per_peer_not_per_attempt(tmp_path, keyed, zctx, pb):
    _, unlisted = keys(tmp_path / "stranger-keys", "stranger")
    for _ in range(20):
        stranger = keyed.client(zctx, pb, secret=unlisted, timeout_ms=300)
        stranger.send_raw(stranger.envelope("hello", pb.Hello(coordinator="stranger")).SerializeToString())
        with pytest.raises(NoReply):
            stranger.recv_envelope(timeout_ms=300)
        stranger.close()
    # The node still serves its coordinator, and by then it has judged every attempt.
    owner = keyed.client(zctx, pb)
    owner.hello()
    owner.close()
    stranger_key = z85(unlisted)[0].decode()
    denied = [l for l in keyed.node.stderr_path.read_text().splitlines() if "denied a peer" in l]
    assert len(denied) == 1, denied
    assert stranger_key in denied[0] and "127.0.0.1" in denied[0], denied[0]


def test_a_key_added_to_the_authorized_directory_is_served_without_a_restart(tmp_path, keyed, zctx, pb):
    public, secret = keys(tmp_path / "second-keys", "second")
    before = keyed.client(zctx, pb, secret=secret, timeout_ms=SILENCE_MS)
    assert_silent(before, "hello", pb.Hello(coordinator="second"))
    before.close()
    (keyed.authorized / "second.key").write_bytes(public.read_bytes())
    deadline = time.monotonic() + 10
    while True:
        after = keyed.client(zctx, pb, secret=secret, timeout_ms=1000)
        try:
            assert after.hello().node == "node-a"
            break
        except NoReply:
            assert time.monotonic() < deadline, "the new key was not served within 10 s of being added"
        finally:
            after.close()


def test_a_revoked_key_is_not_served_on_its_open_connection_within_a_second(tmp_path, keyed, zctx, pb):
    """The coordinator's .key leaves --authorized while its connection is open and a take runs: within 1 s the same
    socket gets no reply to anything, its Abort is not obeyed (another authorized coordinator sees the take finish
    whole), and the node logs the revocation once, not once per message."""
    public, secret = keys(tmp_path / "second-keys", "second")
    (keyed.authorized / "second.key").write_bytes(public.read_bytes())
    owner = keyed.client(zctx, pb)
    # A second coordinator, to watch the take; its key was just added (served from its next connection attempt).
    deadline = time.monotonic() + 10
    while True:
        witness = keyed.client(zctx, pb, secret=secret, timeout_ms=1000)
        try:
            assert witness.hello().node == "node-a"
            break
        except NoReply:
            witness.close()
            assert time.monotonic() < deadline, "the second coordinator's key was not served within 10 s"
    try:
        live = new_take_id("revoked")
        configure_and_arm(owner, live)
        owner.call("start_at", pb.StartAt(take_id=live, start_group=0, stop_group=90), "ack")
        for _ in range(3):
            owner.call("status_request", pb.StatusRequest(), "status")
        (keyed.authorized / "coordinator.key").unlink()
        removed = time.monotonic()
        # The same socket asks again and again; the first request never answered marks the revocation (one merely
        # slow, answered within the next second, does not).
        while True:
            asked = time.monotonic()
            owner.send_raw(owner.envelope("status_request", pb.StatusRequest()).SerializeToString())
            try:
                owner.recv_envelope(timeout_ms=100)
            except NoReply:
                try:
                    owner.recv_envelope(timeout_ms=SILENCE_MS)
                except NoReply:
                    break
            assert asked - removed < 1.0, "the revoked key was still served more than 1 s after its removal"
        latency = asked - removed
        assert latency < 1.0, f"revocation took {latency:.3f} s"
        print(f"revocation latency: {latency * 1000:.0f} ms")
        assert_silent(owner, "status_request", pb.StatusRequest())
        assert_silent(owner, "abort", pb.Abort(take_id=live, reason="a revoked coordinator"))
        status = wait_finished(witness, live, deadline_s=20)
        assert {cam.frames for cam in status.cameras} == {90}, [(cam.camera, cam.frames) for cam in status.cameras]
    finally:
        owner.close()
        witness.close()
    revoked = [l for l in keyed.node.stderr_path.read_text().splitlines() if "dropping the messages of a coordinator" in l]
    assert len(revoked) == 1, revoked
    assert z85(keyed.coordinator_secret)[0].decode() in revoked[0], revoked[0]


def test_a_revoked_key_stops_receiving_the_preview_within_a_second(tmp_path, keyed, zctx, pb):
    """The preview PUB socket cannot judge its subscribers' messages, so a revocation binds it again: the revoked
    coordinator's subscription goes quiet within 1 s while an authorized one is fed again."""
    public, secret = keys(tmp_path / "second-keys", "second")
    (keyed.authorized / "second.key").write_bytes(public.read_bytes())
    deadline = time.monotonic() + 10
    while True:
        witness = keyed.client(zctx, pb, secret=secret, timeout_ms=1000)
        try:
            reply = witness.hello()
            break
        except NoReply:
            witness.close()
            assert time.monotonic() < deadline, "the second coordinator's key was not served within 10 s"
    subscribers = {}
    try:
        assert reply.preview_endpoint, "the node has no preview"
        for who, path in [("owner", keyed.coordinator_secret), ("witness", secret)]:
            sub = zctx.socket(zmq.SUB)
            sub.setsockopt(zmq.LINGER, 0)
            sub.curve_serverkey = z85(keyed.node_public)[0]
            sub.curve_publickey, sub.curve_secretkey = z85(path)
            sub.setsockopt(zmq.SUBSCRIBE, b"")
            sub.connect(reply.preview_endpoint)
            subscribers[who] = sub
        witness.call("start_preview", pb.StartPreview(
            cameras=[pb.CameraConfig(camera="cam0", ordinal=0, width=320, height=240, fps=30, codec="mjpeg")],
            clock=pb.ClockMapping(offset_us=0, rate_ppm=0, ref_local_us=0), t0_us=now_us() + ARM_LEAD_US,
            frame_period_us=FRAME_PERIOD_US, preview=pb.PreviewSettings(width=160, fps=10), lease_ms=20000), "ack")
        for who, sub in subscribers.items():
            assert sub.poll(10_000), f"the {who} got no preview frame"
            sub.recv()
        (keyed.authorized / "coordinator.key").unlink()
        removed = time.monotonic()
        # Read both until the owner has been quiet for 1.5 s (or 6 s pass): when did its last frame come?
        last = {"owner": removed, "witness": removed}
        poller = zmq.Poller()
        for sub in subscribers.values():
            poller.register(sub, zmq.POLLIN)
        while time.monotonic() - last["owner"] < 1.5 and time.monotonic() - removed < 6:
            for sock, _ in poller.poll(100):
                sock.recv()
                who = next(w for w, s in subscribers.items() if s is sock)
                last[who] = time.monotonic()
        assert last["owner"] - removed < 1.0, f"the revoked key still got preview frames {last['owner'] - removed:.2f} s after its removal"
        assert last["witness"] - removed > 1.0, "the authorized subscriber was not fed again after the revocation"
    finally:
        for sub in subscribers.values():
            sub.close(linger=0)
        witness.close()


def test_coord_keys_new_writes_certificates_pyzmq_reads(tmp_path):
    r = run_coord("keys", "new", "studio-a", "--dir", tmp_path / "k")
    assert r.returncode == 0, r.stderr
    public, secret = z85(tmp_path / "k" / "studio-a.key_secret")
    assert z85(tmp_path / "k" / "studio-a.key") == (public, None)
    assert zmq.curve_public(secret) == public
    assert (tmp_path / "k" / "studio-a.key_secret").stat().st_mode & 0o077 == 0, "the secret file is readable by others"
    assert f"public key {public.decode()}" in r.stdout
    again = run_coord("keys", "new", "studio-a", "--dir", tmp_path / "k")
    assert again.returncode != 0 and "never overwrites" in again.stderr, again.stderr


def test_a_node_without_keys_refuses_a_network_address_unless_insecure(tmp_path):
    args = [str(node_binary()), "--name", "open", "--endpoint", "tcp://0.0.0.0:*", "--staging", str(tmp_path / "s"),
            "--synthetic", "cam0"]
    refused = subprocess.run(args, capture_output=True, text=True, timeout=30)
    assert refused.returncode == 2, refused.stderr
    assert "without keys" in refused.stderr and "--cert" in refused.stderr and "--insecure" in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    insecure = subprocess.Popen(args + ["--insecure"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = insecure.stdout.readline()
        assert re.match(r"READY tcp://0\.0\.0\.0:\d+", line), line
    finally:
        insecure.kill()
        insecure.wait()


@pytest.mark.parametrize("args, needle", [
    (["--cert", "{secret}"], "--cert needs --authorized"),
    (["--authorized", "{dir}"], "--authorized needs --cert"),
    (["--cert", "{public}", "--authorized", "{dir}"], "holds only a public key"),
    (["--cert", "{missing}", "--authorized", "{dir}"], "cannot read the certificate"),
    (["--cert", "{garbage}", "--authorized", "{dir}"], "not a ZeroMQ certificate"),
])
def test_bad_key_flags_get_one_sentence(tmp_path, args, needle):
    public, secret = keys(tmp_path / "k", "n")
    garbage = tmp_path / "garbage.key_secret"
    garbage.write_text("hello\n")
    values = {"secret": secret, "public": public, "dir": tmp_path / "k", "missing": tmp_path / "nope.key_secret",
              "garbage": garbage}
    argv = [str(node_binary()), "--name", "n", "--endpoint", "tcp://127.0.0.1:*", "--staging", str(tmp_path / "s"),
            "--synthetic", "cam0"] + [a.format(**values) for a in args]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and needle in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_keyed_rig_records_collects_and_reports_through_coord(tmp_path):
    """Two nodes with keys, pinned in the rig file by public_key (pyzmq's) and by cert (coord keys new)."""
    coordinator = tmp_path / "coordinator"
    assert run_coord("keys", "new", "coordinator", "--dir", coordinator).returncode == 0
    authorized = tmp_path / "authorized"
    authorized.mkdir()
    (authorized / "coordinator.key").write_bytes((coordinator / "coordinator.key").read_bytes())
    left_public, left_secret = keys(tmp_path / "left-keys", "left")
    assert run_coord("keys", "new", "right", "--dir", tmp_path / "right-keys").returncode == 0
    nodes = [Node(tmp_path / "left", extra_args=["--name", "left", "--cert", str(left_secret), "--authorized", str(authorized)]),
             Node(tmp_path / "right", extra_args=["--name", "right", "--synthetic", "cam0",
                                                 "--cert", str(tmp_path / "right-keys" / "right.key_secret"),
                                                 "--authorized", str(authorized)])]
    try:
        rig = tmp_path / "rig.yaml"
        rig.write_text(
            "version: 1\n"
            "security:\n  cert: coordinator/coordinator.key_secret\n"
            "nodes:\n"
            f"  - name: left\n    endpoint: {nodes[0].endpoint}\n    public_key: \"{z85(left_public)[0].decode()}\"\n"
            f"  - name: right\n    endpoint: {nodes[1].endpoint}\n    cert: right-keys/right.key\n")
        status = run_coord("status", "--rig", rig)
        assert status.returncode == 0, status.stdout + status.stderr
        takes = tmp_path / "takes"
        r = run_coord("start-take", "--rig", rig, "--seconds", "2", "--size", "320x240", "--takes-dir", takes)
        assert r.returncode == 0, r.stderr
        take = next(d for d in takes.iterdir() if d.is_dir())
        failures, _ = check_take.check(take)
        assert failures == [], failures

        # The same rig with the right node pinned to someone else's key: that node is named, nothing hangs.
        _, other = keys(tmp_path / "other", "other")
        wrong = tmp_path / "wrong.yaml"
        wrong.write_text(rig.read_text().replace("cert: right-keys/right.key", f"public_key: \"{z85(other)[0].decode()}\""))
        r = run_coord("status", "--rig", wrong, "--timeout", "1")
        assert r.returncode != 0
        assert "right" in r.stdout + r.stderr and "pins a key other than the node's own" in r.stdout + r.stderr, r.stdout + r.stderr
    finally:
        for n in nodes:
            n.cleanup()


@pytest.mark.parametrize("security, node_keys, needle", [
    ("", "    public_key: \"{key}\"\n", "rig has no security.cert"),
    ("security:\n  cert: coordinator.key_secret\n", "", "has no public_key"),
    ("security:\n  cert: coordinator.key_secret\n", "    public_key: \"short\"\n", "must be 40 Z85 characters"),
    ("security:\n  cert: missing.key_secret\n", "    public_key: \"{key}\"\n", "cannot read the certificate"),
    ("security:\n  cert: coordinator.key\n", "    public_key: \"{key}\"\n", "holds only a public key"),
])
def test_bad_rig_security_gets_one_sentence_naming_the_line(tmp_path, security, node_keys, needle):
    public, _ = keys(tmp_path, "coordinator")
    key = z85(public)[0].decode()
    rig = tmp_path / "rig.yaml"
    rig.write_text("version: 1\n" + security + "nodes:\n  - name: a\n    endpoint: tcp://127.0.0.1:5999\n" + node_keys.format(key=key))
    r = run_coord("status", "--rig", rig)
    assert r.returncode == 2, r.stdout + r.stderr
    assert needle in r.stderr and "line" in r.stderr, r.stderr


def test_repeated_bad_input_is_logged_once_a_minute_per_kind(node, client, pb):
    for _ in range(200):
        client.send_raw(b"\xff\x00 not a protobuf envelope")
        client.recv_envelope(what="garbage")
    client.hello()
    rejected = [l for l in node.stderr_path.read_text().splitlines() if "rejected a message" in l]
    assert len(rejected) == 1, f"{len(rejected)} log lines for 200 bad messages"


def test_repeated_refused_requests_are_logged_once_a_minute_per_kind(node, client, pb):
    """Well-formed requests the node refuses (found by the soak: 75 000 lines in 10 minutes before): a StartAt with
    nothing armed, 200 times, is one line; a refusal of another kind right after still gets its own line."""
    for _ in range(200):
        client.request("start_at", pb.StartAt(take_id=new_take_id(), start_group=0, stop_group=15))
    client.request("stop_at", pb.StopAt(take_id=new_take_id(), stop_group=15))
    client.hello()
    lines = [l for l in node.stderr_path.read_text().splitlines() if "request refused" in l]
    assert len(lines) == 2, f"{len(lines)} log lines for 201 refused requests: {lines[:5]}"
