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


def test_discover_finds_a_node_on_an_interface_without_a_broadcast_address(tmp_path):
    """Issue 27: on a network whose interface had no broadcast address set (`ip addr add A/24` without `brd`),
    coord discover sent its query to its own address and found nothing. Two namespaces joined by a veth pair, both
    addressed without `brd`: discover, run without --address, sends to the netmask's broadcast and finds the node,
    and the rig file it writes has a take section with what the node's camera offers, and loads."""
    tag = f"cdb{os.getpid() % 100000}"
    coordinator_ns, node_ns = f"{tag}-c", f"{tag}-n"
    subnet = "10.213.77"

    def ip(*argv, check=True):
        return subprocess.run(["ip", *argv], capture_output=True, text=True, timeout=30, check=check)

    node = None
    try:
        ip("netns", "add", coordinator_ns)
        ip("netns", "add", node_ns)
        ip("link", "add", f"{tag}a", "netns", coordinator_ns, "type", "veth", "peer", "name", f"{tag}b", "netns", node_ns)
        for ns, link, host in ((coordinator_ns, f"{tag}a", 1), (node_ns, f"{tag}b", 2)):
            ip("-n", ns, "addr", "add", f"{subnet}.{host}/24", "dev", link)  # no `brd`: the case at hand
            ip("-n", ns, "link", "set", link, "up")
            ip("-n", ns, "link", "set", "lo", "up")
        shown = ip("-n", coordinator_ns, "-4", "addr", "show", "dev", f"{tag}a").stdout
        assert "brd" not in shown, shown
        node = subprocess.Popen(["ip", "netns", "exec", node_ns, str(node_binary()), "--name", "box-nobrd",
                                 "--endpoint", "tcp://0.0.0.0:5710", "--staging", str(tmp_path / "staging"),
                                 "--synthetic", "cam0", "--insecure", "--log-level", "warning"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert node.stdout.readline().startswith("READY "), "the node did not start"
        rig = tmp_path / "found.yaml"
        run = subprocess.run(["ip", "netns", "exec", coordinator_ns, str(COORD), "discover", "--timeout", "2", "--json",
                              "--write-rig", str(rig)], capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        found = json.loads(run.stdout)
        assert [(n["name"], n["endpoint"]) for n in found] == [("box-nobrd", f"tcp://{subnet}.2:5710")], found
        text = rig.read_text()
        assert "\ntake:" in text and "\n  size: " in text and "\n  fps: " in text and "\n  codec: " in text, text
        assert "not asked" not in text, text  # the node was asked what its camera offers
        plan = subprocess.run(["ip", "netns", "exec", coordinator_ns, str(COORD), "plan", "--rig", str(rig)],
                              capture_output=True, text=True, timeout=60)
        assert plan.returncode in (0, 3) and "warning" not in plan.stderr, plan.stderr
        # With nothing answering, the sentence names where the query went: the broadcast, not the own address.
        node.terminate()
        node.wait(timeout=15)
        again = subprocess.run(["ip", "netns", "exec", coordinator_ns, str(COORD), "discover", "--timeout", "0.5"],
                               capture_output=True, text=True, timeout=30)
        assert again.returncode == 1 and f"(query sent to {subnet}.255)" in again.stderr, again.stderr
    finally:
        if node and node.poll() is None:
            node.kill()
            node.wait(timeout=10)
        for ns in (coordinator_ns, node_ns):
            ip("netns", "del", ns, check=False)
