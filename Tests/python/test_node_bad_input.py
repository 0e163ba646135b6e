"""Bad input never crashes or wedges the node: each is answered with the right Error (or, past the
transport limit, dropped), and the node still answers a Hello afterwards."""

from __future__ import annotations

import random
import re

import pytest
from google.protobuf.message import DecodeError

from conftest import (NODE_NAME, Client, NoReply, assert_hello_ok, error_name, new_take_id,
                      record_take)

MiB = 1024 * 1024


def expect_error(pb, env, code: str, request_id: int | None = None):
    assert error_name(pb, env) == code, \
        f"expected error {code}, got {error_name(pb, env)}" + \
        (f": {env.error.message!r}" if env.WhichOneof("body") == "error" else "")
    assert env.error.message.strip(), f"the {code} error has an empty message"
    if request_id is not None:
        assert env.request_id == request_id, f"the {code} error has request_id {env.request_id}, expected {request_id}"
    return env.error


def send_and_receive(client: Client, data: bytes, what: str, timeout_ms: int | None = None):
    client.send_raw(data)
    return client.recv_envelope(timeout_ms, what=what)


def test_random_bytes_are_malformed(client, pb):
    data = bytearray(random.Random(20240611).randbytes(200))
    data[0] = 0x07  # field 0, wire type 7: invalid in every protobuf parser, so this can never parse
    with pytest.raises(DecodeError):
        pb.Envelope.FromString(bytes(data))
    reply = send_and_receive(client, bytes(data), "200 random bytes")
    expect_error(pb, reply, "MALFORMED", request_id=0)
    assert_hello_ok(client)


def test_truncated_message_is_malformed(client, pb):
    configure = pb.Configure(take_id=new_take_id(), cameras=[pb.CameraConfig(
        camera="cam0", ordinal=0, width=320, height=240, fps=30, codec="mjpeg")])
    whole = client.envelope("configure", configure).SerializeToString()
    half = whole[: len(whole) // 2]
    with pytest.raises(DecodeError):  # the cut lands inside the length-delimited Configure
        pb.Envelope.FromString(half)
    reply = send_and_receive(client, half, "a truncated Configure")
    expect_error(pb, reply, "MALFORMED")
    assert reply.request_id in (0, client.next_id), f"request_id {reply.request_id}"
    assert_hello_ok(client)


def test_envelope_without_body_is_unknown_message(client, pb):
    env = client.envelope()
    reply = send_and_receive(client, env.SerializeToString(), "an Envelope with no body")
    expect_error(pb, reply, "UNKNOWN_MESSAGE", request_id=env.request_id)
    assert_hello_ok(client)


def test_unknown_body_field_is_unknown_message(client, pb):
    env = client.envelope()
    # Field 99, length-delimited, 3 bytes: a body from a newer protocol this node does not know.
    unknown = bytes([(99 << 3 | 2) & 0x7F | 0x80, (99 << 3 | 2) >> 7, 3]) + b"abc"
    data = env.SerializeToString() + unknown
    parsed = pb.Envelope.FromString(data)
    assert parsed.WhichOneof("body") is None and parsed.request_id == env.request_id
    reply = send_and_receive(client, data, "an Envelope with unknown field 99")
    expect_error(pb, reply, "UNKNOWN_MESSAGE", request_id=env.request_id)
    assert_hello_ok(client)


@pytest.mark.parametrize("version", [2, 0])
def test_other_protocol_version_is_refused(client, pb, version):
    env = client.envelope("hello", pb.Hello(coordinator="pytest"), version=version)
    reply = send_and_receive(client, env.SerializeToString(), f"a version {version} Hello")
    err = expect_error(pb, reply, "VERSION_MISMATCH", request_id=env.request_id)
    assert re.search(rf"\b{version}\b", err.message) and re.search(r"\b1\b", err.message), \
        f"VERSION_MISMATCH message does not name both versions ({version} and 1): {err.message!r}"
    assert_hello_ok(client)


def test_oversized_message_is_too_large(client, pb):
    env = client.envelope("hello", pb.Hello(coordinator="x" * (2 * MiB)))
    data = env.SerializeToString()
    assert len(data) > 2 * MiB
    reply = send_and_receive(client, data, "a 2 MiB Hello", timeout_ms=15_000)
    expect_error(pb, reply, "TOO_LARGE")
    assert reply.request_id in (0, env.request_id), f"request_id {reply.request_id}"
    assert_hello_ok(client)


def test_20_mib_message_is_too_large(client, pb):
    env = client.envelope("hello", pb.Hello(coordinator="x" * (20 * MiB)))
    reply = send_and_receive(client, env.SerializeToString(), "a 20 MiB Hello", timeout_ms=15_000)
    expect_error(pb, reply, "TOO_LARGE")
    assert "exceeds" in reply.error.message


def test_message_past_the_transport_cap_does_not_wedge_the_node(node, client, zctx, pb):
    """Over 64 MiB libzmq cuts the sender off before buffering it; the node goes on serving others."""
    env = client.envelope("hello", pb.Hello(coordinator="x" * (80 * MiB)))
    client.send_raw(env.SerializeToString())
    try:
        reply = client.recv_envelope(3000, what="an 80 MiB Hello")
    except NoReply:
        pass  # dropped at the transport
    else:
        expect_error(pb, reply, "TOO_LARGE")
    fresh = Client(zctx, node.endpoint, pb)
    try:
        assert_hello_ok(fresh)
    finally:
        fresh.close()


def test_start_before_arm_is_bad_state(client, pb):
    reply = client.request("start_at", pb.StartAt(take_id=new_take_id(), start_group=0, stop_group=15))
    expect_error(pb, reply, "BAD_STATE")
    assert_hello_ok(client)


def test_start_after_configure_but_before_arm_is_bad_state(client, pb):
    take_id = new_take_id()
    client.call("configure", pb.Configure(take_id=take_id, cameras=[pb.CameraConfig(
        camera="cam0", ordinal=0, width=320, height=240, fps=30, codec="mjpeg")]), "ack")
    reply = client.request("start_at", pb.StartAt(take_id=take_id, start_group=0, stop_group=15))
    expect_error(pb, reply, "BAD_STATE")
    assert_hello_ok(client)


def test_configure_unknown_camera_is_bad_config(client, pb):
    configure = pb.Configure(take_id=new_take_id(), cameras=[pb.CameraConfig(
        camera="nope", ordinal=0, width=320, height=240, fps=30, codec="mjpeg")])
    reply = client.request("configure", configure)
    err = expect_error(pb, reply, "BAD_CONFIG")
    assert "nope" in err.message, f"BAD_CONFIG message does not name the camera: {err.message!r}"
    assert_hello_ok(client)


def assert_no_file_contents(pb, reply, what: str):
    kind = reply.WhichOneof("body")
    if kind == "chunk":
        pytest.fail(f"{what} returned a Chunk of {len(reply.chunk.data)} bytes: {reply.chunk.data[:60]!r}")
    assert error_name(pb, reply) in ("NOT_FOUND", "BAD_CONFIG"), \
        f"{what}: expected NOT_FOUND or BAD_CONFIG, got {error_name(pb, reply)}"
    assert reply.error.message.strip(), f"{what}: the error has an empty message"


def test_fetch_outside_the_take_is_refused(node, client, pb):
    take_id = new_take_id()
    record_take(client, take_id, groups=5)
    # A file that exists in the staging area but outside any take: only a traversal could reach it.
    (node.staging / "secret.txt").write_text("secret\n")
    for path in ["../../etc/passwd", "/etc/passwd", f"{NODE_NAME}/../../../../etc/passwd",
                 "../secret.txt", "../../secret.txt", f"{NODE_NAME}/../../secret.txt",
                 str(node.staging / "secret.txt")]:
        what = f"FetchChunk of {path!r} in take {take_id}"
        reply = client.request("fetch_chunk", pb.FetchChunk(take_id=take_id, path=path, offset=0, length=4096))
        assert_no_file_contents(pb, reply, what)
    assert_hello_ok(client)


def test_fetch_with_a_traversing_take_id_is_refused(node, client, pb):
    (node.staging / "secret.txt").write_text("secret\n")
    for take_id, path in [("../../../../../../etc", "passwd"), ("..", "etc/passwd"),
                          ("/etc", "passwd"), ("..", "secret.txt"), (".", "secret.txt")]:
        what = f"FetchChunk of {path!r} in take {take_id!r}"
        reply = client.request("fetch_chunk", pb.FetchChunk(take_id=take_id, path=path, offset=0, length=4096))
        assert_no_file_contents(pb, reply, what)
    assert_hello_ok(client)
