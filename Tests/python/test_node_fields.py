"""Every number of every request is checked at the node's edge (issue 14, item 2): valid envelopes whose
numbers the node's arithmetic cannot take (NaN, infinities, 1e308, values near the integer limits) used to kill
the node with a Swift trap mid-take. Each is now refused with BAD_CONFIG naming the field and its range, the
node keeps answering, and the take it was recording is not disturbed."""
from __future__ import annotations

import math

import pytest

from conftest import assert_hello_ok, configure_and_arm, error_name, new_take_id, wait_finished

INT64_MAX, INT64_MIN, UINT64_MAX = 2**63 - 1, -(2**63), 2**64 - 1


def bad_requests(pb, take_id: str):
    """(name, body field, message, field named in the refusal), each sent while `take_id` is armed."""
    def mapping(**kw):
        base = dict(offset_us=0, rate_ppm=0.0, ref_local_us=0, uncertainty_us=1.0)
        base.update(kw)
        return pb.ClockMapping(**base)

    def arm(**kw):
        base = dict(take_id=take_id, clock=mapping(), t0_us=10**12, frame_period_us=33333)
        base.update(kw)
        return pb.Arm(**base)
    return [
        ("clock update rate NaN", "clock_update", pb.ClockUpdate(take_id=take_id, clock=mapping(rate_ppm=math.nan)), "ClockUpdate.clock.rate_ppm"),
        ("clock update rate inf", "clock_update", pb.ClockUpdate(take_id=take_id, clock=mapping(rate_ppm=math.inf)), "ClockUpdate.clock.rate_ppm"),
        ("clock update rate 1e308", "clock_update", pb.ClockUpdate(take_id=take_id, clock=mapping(rate_ppm=1e308)), "ClockUpdate.clock.rate_ppm"),
        ("clock update offset near INT64_MAX", "clock_update", pb.ClockUpdate(take_id=take_id, clock=mapping(offset_us=INT64_MAX - 5)), "ClockUpdate.clock.offset_us"),
        ("clock update uncertainty NaN", "clock_update", pb.ClockUpdate(take_id=take_id, clock=mapping(uncertainty_us=math.nan)), "ClockUpdate.clock.uncertainty_us"),
        ("arm rate NaN", "arm", arm(clock=mapping(rate_ppm=math.nan)), "Arm.clock.rate_ppm"),
        ("arm frame period UINT64_MAX", "arm", arm(frame_period_us=UINT64_MAX), "Arm.frame_period_us"),
        ("arm frame period 2^62", "arm", arm(frame_period_us=2**62), "Arm.frame_period_us"),
        ("arm t0 INT64_MIN", "arm", arm(t0_us=INT64_MIN), "Arm.t0_us"),
        ("start group INT64_MAX", "start_at", pb.StartAt(take_id=take_id, start_group=INT64_MAX), "StartAt.start_group"),
        ("start group INT64_MIN", "start_at", pb.StartAt(take_id=take_id, start_group=INT64_MIN), "StartAt.start_group"),
        ("stop group INT64_MAX", "stop_at", pb.StopAt(take_id=take_id, stop_group=INT64_MAX), "StopAt.stop_group"),
        ("adjust from group INT64_MAX", "adjust_camera", pb.AdjustCamera(take_id=take_id, camera="cam0", action=pb.AdjustCamera.SLOW, record_every=2, from_group=INT64_MAX), "AdjustCamera.from_group"),
        ("adjust from group INT64_MIN", "adjust_camera", pb.AdjustCamera(take_id=take_id, camera="cam0", action=pb.AdjustCamera.DISABLE, from_group=INT64_MIN), "AdjustCamera.from_group"),
        ("abort reason of 300 000 characters", "abort", pb.Abort(take_id=take_id, reason="x" * 300_000), "Abort.reason"),
    ]


CASES = ["clock update rate NaN", "clock update rate inf", "clock update rate 1e308", "clock update offset near INT64_MAX",
         "clock update uncertainty NaN", "arm rate NaN", "arm frame period UINT64_MAX", "arm frame period 2^62",
         "arm t0 INT64_MIN", "start group INT64_MAX", "start group INT64_MIN", "stop group INT64_MAX",
         "adjust from group INT64_MAX", "adjust from group INT64_MIN", "abort reason of 300 000 characters"]


@pytest.mark.parametrize("case", CASES)
def test_an_out_of_range_field_is_refused_naming_it_and_the_take_goes_on(node, client, pb, case):
    take_id = new_take_id("fields")
    configure_and_arm(client, take_id)
    cases = {c[0]: c for c in bad_requests(pb, take_id)}
    assert set(cases) == set(CASES)
    name, field, message, named = cases[case]
    start = pb.StartAt(take_id=take_id, start_group=0, stop_group=45)
    # A bad start is sent while the take is armed (where a start is acted on); everything else while it records.
    if field != "start_at":
        client.call("start_at", start, "ack")
    reply = client.request(field, message)
    assert error_name(pb, reply) == "BAD_CONFIG", f"{case}: {reply}"
    text = reply.error.message
    assert named in text and "…" in text, f"{case}: {text!r}"
    assert len(text) < 400, f"{case}: the refusal echoes {len(text)} characters"
    assert_hello_ok(client)
    if field == "start_at":
        client.call("start_at", start, "ack")
    # The take that was recording is untouched: it finishes with every group.
    status = wait_finished(client, take_id)
    assert [c.frames for c in status.cameras] == [45], status
    assert node.proc.poll() is None


def test_the_fuzz_corpus_replays_without_a_crash():
    """coord-fuzz built without libFuzzer replays the committed corpus (every seed and every input a fuzzing run
    once crashed on) through the same targets."""
    import subprocess
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    fuzz = root / ".build" / "debug" / "coord-fuzz"
    corpus = root / "Tests" / "fuzz-corpus"
    assert any(corpus.iterdir())
    run = subprocess.run([str(fuzz), str(corpus)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{len(list(corpus.iterdir()))} input(s) ran without a crash" in run.stdout
