#!/usr/bin/env bash
# The whole test suite: generated code up to date, Swift unit and integration tests, then the Python
# protocol peer and the end-to-end demo tests against the real binaries.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
echo "== generated protobuf code is up to date"
scripts/generate-protos.sh --check
scripts/generate-c-client.sh --check
scripts/openapi-generate.sh --check
echo "== swift build"
swift build --build-tests
# Every demo and test node uses one calibration of this machine, measured once before anything else runs:
# measured while tests run in parallel, it would see a busy machine and refuse rigs that fit.
export COORD_CALIBRATION="$PWD/.build/test-calibration.json"
echo "== calibrating this machine for the tests ($COORD_CALIBRATION)"
rm -f "$COORD_CALIBRATION"
.build/debug/coord-node calibrate --calibration "$COORD_CALIBRATION" --staging "$PWD/.build/calibrate-staging"
echo "== swift test"
# One test at a time: several suites check real-time behaviour (a V4L2 camera's start on a grid instant, the
# phase loop against a real sensor clock) that 440 tests in parallel on a 2-core machine would disturb. It costs
# about 35 s.
swift test --skip-build --no-parallel
echo "== python: protocol peer and end-to-end demo"
# The .deb packages are built once per run (test_packages.py) and installed again by the VM tier (test_vmlab.py, test_vmlab_devices.py).
export COORD_PACKAGES_DIR="${COORD_PACKAGES_DIR:-$PWD/.build/test-debs}"
rm -rf "$PWD/.build/test-debs"
# Their release build runs beside the Python tier at the lowest CPU and I/O priority: the demo takes leave most of
# both cores idle while they wait for their start instants, so the build is done before test_packages.py needs it
# (it waits on the lock held here until then). SCHED_IDLE (chrt --idle): a test's thread that wakes takes the CPU
# from the build at once, where nice alone may let the build finish its time slice first.
# COORD_TEST_EARLY_DEBS=0 builds them in test_packages.py instead.
if [[ "${COORD_TEST_EARLY_DEBS:-1}" != 0 ]] && ! compgen -G "$COORD_PACKAGES_DIR/coord-node_*.deb" >/dev/null; then
    mkdir -p "$COORD_PACKAGES_DIR"
    export COORD_PACKAGES_LOCK="$COORD_PACKAGES_DIR/.building"
    exec 9>"$COORD_PACKAGES_LOCK"
    flock 9
    echo "== building the .deb packages in the background (log: $COORD_PACKAGES_DIR.log)"
    ( chrt --idle 0 nice -n 19 ionice -c 3 scripts/package.sh "$COORD_PACKAGES_DIR" >"$COORD_PACKAGES_DIR.log" 2>&1 9>&- || true ) &
    exec 9>&-
fi
PY="$(scripts/python-env.sh)"
# --durations shows in every CI log which tests the suite's time goes to (it must stay under 60 minutes on 2 cores).
"$PY" -m pytest -q -p no:cacheprovider --durations=40 Tests/python
