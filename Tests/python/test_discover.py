"""`coord discover` in the network lab (issue 13 item 4, CONTRACT §7): three keyed coord-node processes in their own
namespaces, one of them stopped; the query broadcast on the lab's network finds exactly the two running nodes with
their endpoints and public keys, and the rig file it writes records a complete take (check-take passes). The query
goes only to the lab's own broadcast address (--address), never to this machine's real networks.
Needs root (namespaces, iptables); skipped otherwise."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import zmq.auth

from conftest import node_binary
from test_lab_take import COORD, ROOT, check_take, netlab, only_take

if os.geteuid() != 0:
    pytest.skip("the lab needs root (network namespaces, veth, iptables)", allow_module_level=True)
for _tool in ("ip", "iptables"):
    if shutil.which(_tool) is None:
        pytest.skip(f"`{_tool}` is not installed (scripts/setup.sh installs it)", allow_module_level=True)


def test_discover_finds_the_running_nodes_of_the_lab_and_its_rig_file_records_a_take(tmp_path):
    authorized = tmp_path / "authorized"
    authorized.mkdir()
    zmq.auth.create_certificates(str(tmp_path), "coordinator")
    (authorized / "coordinator.key").write_bytes((tmp_path / "coordinator.key").read_bytes())
    keys = {}
    with netlab.Lab(nodes=3, delay_ms=0.2, jitter_ms=0.5, seed=11) as lab:
        procs = []
        try:
            for i in range(1, 4):
                zmq.auth.create_certificates(str(tmp_path), f"box-{i}")
                keys[f"box-{i}"] = zmq.auth.load_certificate(str(tmp_path / f"box-{i}.key"))[0].decode()
                argv = [str(node_binary()), "--name", f"box-{i}", "--endpoint", "tcp://0.0.0.0:5710",
                        "--staging", str(tmp_path / f"staging-{i}"), "--synthetic", "cam0" if i != 2 else "cam0,cam1",
                        "--log-level", "warning", "--cert", str(tmp_path / f"box-{i}.key_secret"), "--authorized", str(authorized)]
                procs.append(lab.start_node(i, argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
            for i, p in enumerate(procs, start=1):
                assert p.stdout.readline().startswith("READY "), f"box-{i} did not start"
            # A stopped node is not found.
            procs[2].terminate()
            assert procs[2].wait(timeout=15) == 0
            broadcast = lab.node_address(1).rsplit(".", 1)[0] + ".255"
            rig = tmp_path / "found.yaml"
            run = subprocess.run([str(COORD), "discover", "--address", broadcast, "--timeout", "2", "--json",
                                  "--write-rig", str(rig), "--cert", "coordinator.key_secret"],
                                 capture_output=True, text=True, timeout=30)
            assert run.returncode == 0, run.stderr
            found = json.loads(run.stdout)
            assert [n["name"] for n in found] == ["box-1", "box-2"], found
            for n in found:
                i = int(n["name"][-1])
                assert n["endpoint"] == f"tcp://{lab.node_address(i)}:5710", n
                assert n["public_key"] == keys[n["name"]], n
                assert n["version"] and n["cameras"] == (["cam0"] if i != 2 else ["cam0", "cam1"]), n
            # Only what a stranger may see.
            assert set(found[0]) == {"name", "endpoint", "cameras", "version", "public_key"}, found[0]
            takes = tmp_path / "takes"
            take = subprocess.run([str(COORD), "start-take", "--rig", str(rig), "--seconds", "3", "--size", "320x240",
                                   "--takes-dir", str(takes)], capture_output=True, text=True, timeout=180)
            assert take.returncode == 0, take.stderr[-3000:]
            failures, _ = check_take.check(only_take(takes))
            assert failures == [], failures
            # A second discover with --write-rig never overwrites the file.
            again = subprocess.run([str(COORD), "discover", "--address", broadcast, "--timeout", "1", "--write-rig", str(rig)],
                                   capture_output=True, text=True, timeout=30)
            assert again.returncode == 2 and "already exists" in again.stderr, again.stderr
        finally:
            for p in procs:
                if p.poll() is None:
                    p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()


def test_no_node_answering_is_one_sentence_and_exit_1(tmp_path):
    run = subprocess.run([str(COORD), "discover", "--address", "127.0.0.1", "--port", "1", "--timeout", "0.5"],
                         capture_output=True, text=True, timeout=30)
    assert run.returncode == 1 and "no node answered on UDP port 1" in run.stderr, run.stderr
