"""What the shipped programs link (issue 35 item 3): `coord` records nothing, so it links no capture library
(libasound, libv4l2); neither `coord` nor `coord-node` carries a test double (the scripted V4L2 driver lives in
the test-only `coord-node-scripted`). `coord` may link libav: `coord deliver` writes QuickTime and BWAV through it.

Reads the debug build (`swift build`), or COORD / COORD_NODE when set, with ldd and nm; starts no process.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import node_binary

ROOT = Path(__file__).resolve().parents[2]

# Capture libraries only a node's cameras and microphones need.
CAPTURE_LIBRARIES = ("libasound", "libv4l2", "libv4lconvert")
# The scripted V4L2 driver (module V4L2Simulator) and the scripted-camera glue (module ScriptedCameras).
TEST_DOUBLE_SYMBOLS = re.compile(r"V4L2Simulator|ScriptedCameras|ScriptedV4L2Driver|ScriptedPainter")


def coord_binary() -> Path:
    path = Path(os.environ.get("COORD") or ROOT / ".build" / "debug" / "coord")
    if not path.is_file():
        pytest.fail(f"the coord binary is missing at {path}; build it (swift build) or set COORD.")
    return path


def linked_libraries(binary: Path) -> list[str]:
    done = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [line.split()[0] for line in done.stdout.splitlines() if line.strip()]


def scripted_driver_symbols(binary: Path) -> list[str]:
    if shutil.which("nm") is None:
        pytest.skip("nm is not installed (binutils)")
    done = subprocess.run(["nm", "--defined-only", str(binary)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if TEST_DOUBLE_SYMBOLS.search(line)]


def test_coord_links_no_capture_library():
    libraries = linked_libraries(coord_binary())
    capture = [lib for lib in libraries if lib.startswith(CAPTURE_LIBRARIES)]
    assert capture == [], f"coord links {capture}; it records nothing and must not"
    # The deliver command's QuickTime writer is why libav stays.
    assert any(lib.startswith("libavformat") for lib in libraries), libraries


@pytest.mark.parametrize("which", ["coord", "coord-node"])
def test_a_shipped_program_carries_no_test_double(which):
    binary = coord_binary() if which == "coord" else node_binary()
    symbols = scripted_driver_symbols(binary)
    assert symbols == [], f"{which} carries {len(symbols)} scripted-driver symbols, e.g. {symbols[:3]}"


def test_coord_node_links_the_capture_libraries_it_records_with():
    """The other side of the split: the node still reaches cameras and microphones."""
    libraries = linked_libraries(node_binary())
    for lib in ("libasound", "libv4l2"):
        assert any(name.startswith(lib) for name in libraries), f"coord-node does not link {lib}: {libraries}"


def test_coord_node_has_no_v4l2_script_flag(tmp_path):
    """The scripted driver is reached only through coord-node-scripted; the shipped node refuses the flag."""
    done = subprocess.run([str(node_binary()), "--list-cameras", "--v4l2-script", str(tmp_path / "cams.json")],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.strip() == "coord-node: Unknown option '--v4l2-script' (see coord-node --help)", done.stderr
