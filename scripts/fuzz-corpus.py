#!/usr/bin/env python3
"""Writes the seed corpus for coord-fuzz into Tests/fuzz-corpus/: one valid example of every request and reply
the wire carries (for the edge alone, selector 0, and through the node's handling, selector 1), the example rig
file and a few variations (selector 2), a manifest (selector 3), node files (selector 4), discovery datagrams (selector 5) and every reply a node sends the coordinator (selectors 6…13). Run after changing the protocol:
    $(scripts/python-env.sh) scripts/fuzz-corpus.py
"""
import importlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "Tests" / "fuzz-corpus"


def coord_pb2():
    out = Path(tempfile.mkdtemp())
    subprocess.run(["protoc", f"-I{ROOT / 'proto'}", f"--python_out={out}", str(ROOT / "proto/coord/v1/coord.proto")], check=True)
    sys.path.insert(0, str(out))
    return importlib.import_module("coord.v1.coord_pb2")


def main():
    pb = coord_pb2()
    # Seeds are rewritten; inputs that once crashed (crash-*) are kept: the suite replays them forever.
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.iterdir():
        if not old.name.startswith("crash-"):
            old.unlink()
    clock = pb.ClockMapping(offset_us=250_000, rate_ppm=12.5, ref_local_us=10**9, uncertainty_us=3.0)
    camera = pb.CameraConfig(camera="cam0", ordinal=0, width=320, height=240, fps=30, codec="mjpeg", record_every=1,
                             controls=pb.ControlValues(exposure_us=8000, gain_db=3.0))
    bodies = {
        "hello": pb.Hello(coordinator="studio"),
        "configure": pb.Configure(take_id="t1", cameras=[camera]),
        "arm": pb.Arm(take_id="t1", clock=clock, t0_us=10**9 + 2_000_000, frame_period_us=33333, timecode="10:00:00:00",
                      preview=pb.PreviewSettings(width=480, fps=5)),
        "clock_update": pb.ClockUpdate(take_id="t1", clock=clock),
        "start_at": pb.StartAt(take_id="t1", start_group=0, stop_group=30),
        "stop_at": pb.StopAt(take_id="t1", stop_group=30),
        "adjust_camera": pb.AdjustCamera(take_id="t1", camera="cam0", action=pb.AdjustCamera.SLOW, record_every=2, from_group=10),
        "abort": pb.Abort(take_id="t1", reason="operator"),
        "status_request": pb.StatusRequest(),
        "clock_probe": pb.ClockProbe(t1_us=10**9),
        "list_files": pb.ListFiles(take_id="t1"),
        "fetch_chunk": pb.FetchChunk(take_id="t1", path="fuzz/cam0.mkv", offset=0, length=65536),
        "confirm_collected": pb.ConfirmCollected(take_id="t1", files=[pb.FileInfo(path="fuzz/cam0.mkv", bytes=10, sha256="00" * 32)]),
        "start_preview": pb.StartPreview(cameras=[camera], clock=clock, t0_us=10**9, frame_period_us=33333,
                                         preview=pb.PreviewSettings(width=480, fps=5), lease_ms=5000),
        "set_controls": pb.SetControls(camera="cam0", controls=pb.ControlValues(exposure_us=8000, white_balance_k=4500, focus=0.5)),
        "status": pb.Status(node="n1", state=pb.Status.RECORDING, take_id="t1", t0_us=10**9, frame_period_us=33333,
                            rig_now_us=10**9 + 5_000_000, stop_group=90, pressure=pb.NOMINAL,
                            cameras=[pb.CameraStatus(camera="cam0", frames=12, dropped=1, last_group=11)],
                            events=[pb.NodeEvent(t_us=10**9, camera="cam0", kind="pressure", detail="fair")]),
        "controls_applied": pb.ControlsApplied(camera="cam0", controls=pb.ControlValues(exposure_us=8000)),
    }
    for name, body in bodies.items():
        envelope = pb.Envelope(protocol_version=1, request_id=7)
        getattr(envelope, name).CopyFrom(body)
        data = envelope.SerializeToString()
        (OUT / f"edge-{name}").write_bytes(b"\x00" + data)
        (OUT / f"node-{name}").write_bytes(b"\x01" + data)
    # Every reply a node sends the coordinator (selectors 6…13, coord-fuzz's ReplyTarget), with the extremes that
    # once trapped it (issue 23): a 2^64-1-byte file, a frame period of 2^64-1, clock readings at the int64 limits.
    fmt = pb.CameraFormat(pixel_format="yuv420p", width=640, height=480, min_frame_period_us=16666, max_frame_period_us=1_000_000)
    sha = "ab" * 32
    replies = {
        "hello_reply": [pb.HelloReply(node="fuzz", agent_version="0.1.0", host="box", instance_id="i1",
                                      cameras=[pb.CameraInfo(name="cam0", source="synthetic", formats=[fmt], codecs=["mjpeg", "ffv1"])],
                                      mics=["mic0"]),
                        pb.HelloReply(node="fuzz", cameras=[pb.CameraInfo(name="cam0", formats=[pb.CameraFormat(
                            width=640, height=480, min_frame_period_us=2**64 - 1, max_frame_period_us=2**64 - 1)])])],
        "status": [pb.Status(node="fuzz", state=pb.Status.RECORDING, take_id="t1", t0_us=10**9, frame_period_us=33333,
                             rig_now_us=10**9 + 5_000_000, stop_group=150,
                             cameras=[pb.CameraStatus(camera="cam0", frames=12, dropped=1, last_group=11)],
                             events=[pb.NodeEvent(t_us=10**9, camera="cam0", kind="pressure", detail="fair")])],
        "file_list": [pb.FileList(take_id="t1", final=True, files=[pb.FileInfo(path="fuzz/cam0.mkv", bytes=1 << 24, sha256=sha),
                                                                    pb.FileInfo(path="fuzz/frames.csv", bytes=4096, sha256=sha)]),
                      pb.FileList(take_id="t1", files=[pb.FileInfo(path="fuzz/cam0.mkv", bytes=2**64 - 1, sha256=sha),
                                                       pb.FileInfo(path="fuzz/.cam0.mkv.part", bytes=10, sha256=sha)])],
        "chunk": [pb.Chunk(path="fuzz/cam0.mkv", offset=7 << 20, data=b"\x1a\x45\xdf\xa3" * 64, eof=False)],
        "clock_probe_reply": [pb.ClockProbeReply(t1_us=10**9, t2_us=10**9 + 250_000, t3_us=10**9 + 250_040),
                              pb.ClockProbeReply(t1_us=10**9, t2_us=-2**63, t3_us=10**9),
                              pb.ClockProbeReply(t1_us=10**9, t2_us=2**63 - 1, t3_us=2**63 - 1)],
        "armed": [pb.Armed(take_id="t1", cameras=["cam0"], warnings=["camera cam0 free-runs"],
                           controls=[pb.ControlsApplied(camera="cam0", controls=pb.ControlValues(exposure_us=8000, gain_db=3.0))],
                           devices=[pb.SourceDevice(source="cam0", driver="vivid", card="vivid", bus_info="platform:vivid-000"),
                                    pb.SourceDevice(source="mic0", microphone=True, card="Loopback")])],
        "controls_applied": [pb.ControlsApplied(camera="cam0", controls=pb.ControlValues(exposure_us=8000, white_balance_k=4500, focus=0.5))],
        "preview_frame": [pb.PreviewFrame(node="fuzz", camera="cam0", ordinal=0, group=42, center_us=10**9 + 1_400_000, width=160,
                                          height=120, jpeg=b"\xff\xd8\xff\xe0" + b"\x00" * 60 + b"\xff\xd9", take_id="t1",
                                          center_uncertainty_us=3.5, phase_error_us=-12)],
    }
    for selector, (name, examples) in enumerate(replies.items(), start=6):
        for i, body in enumerate(examples):
            envelope = pb.Envelope(protocol_version=1, request_id=7)
            getattr(envelope, name).CopyFrom(body)
            (OUT / f"reply-{name}-{i}").write_bytes(bytes([selector]) + envelope.SerializeToString())
    rig = (ROOT / "deploy" / "rig.example.yaml")
    if rig.exists():
        (OUT / "rig-example").write_bytes(b"\x02" + rig.read_bytes())
    (OUT / "rig-controls").write_bytes(b"\x02" + b"version: 1\nnodes:\n  - name: a\n    endpoint: tcp://h:1\n    cameras:\n"
                                       b"      - name: cam0\n        controls: {exposure_us: 8000, gain_db: 6}\n      - cam1\n"
                                       b"take: {fps: 30, size: 640x480, codec: mjpeg}\npressure: {serious: slow}\n")
    manifest = {"format": "coord-take/1", "take_id": "t1", "name": "t", "status": "partial", "t0_us": 1, "frame_period_us": 33333,
                "groups": 3, "start_wallclock": "2026-01-01T00:00:00Z", "cameras": [],
                "events": [{"t_us": 1, "node": "n1", "camera": "", "kind": "take-aborted", "detail": "aborted elsewhere"}]}
    (OUT / "manifest").write_bytes(b"\x03" + json.dumps(manifest).encode())
    node_file = ROOT / "deploy" / "node.example.yaml"
    if node_file.exists():
        (OUT / "nodefile-example").write_bytes(b"\x04" + node_file.read_bytes())
    (OUT / "nodefile-synthetic").write_bytes(b"\x04" + b"version: 1\nname: n\nendpoint: tcp://127.0.0.1:*\ncameras:\n"
                                            b"  - {name: a, synthetic: true, bus: usb1}\n  - {name: b, v4l2: /dev/video0}\n"
                                            b"buses: {usb1: 5000}\ninsecure: true\nlog_level: debug\n")
    query = pb.Discovery(protocol_version=1, query=pb.DiscoveryQuery(nonce=b"0123456789abcdef"))
    (OUT / "discovery-query").write_bytes(b"\x05" + query.SerializeToString())
    announcement = pb.Discovery(protocol_version=1, announcement=pb.Announcement(
        nonce=b"0123456789abcdef", node="box-1", endpoint="tcp://0.0.0.0:5710", cameras=["cam0", "cam1"],
        agent_version="0.1.0", public_key="rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"))
    (OUT / "discovery-announcement").write_bytes(b"\x05" + announcement.SerializeToString())
    print(f"wrote {len(list(OUT.iterdir()))} seeds to {OUT}")


if __name__ == "__main__":
    main()
