#!/usr/bin/env bash
# The whole test suite: generated code up to date, Swift unit and integration tests, then the Python
# protocol peer and the end-to-end demo tests against the real binaries.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
echo "== generated protobuf code is up to date"
scripts/generate-protos.sh --check
echo "== swift build"
swift build --build-tests
# Every demo and test node uses one calibration of this machine, measured once before anything else runs:
# measured while tests run in parallel, it would see a busy machine and refuse rigs that fit.
export COORD_CALIBRATION="$PWD/.build/test-calibration.json"
echo "== calibrating this machine for the tests ($COORD_CALIBRATION)"
rm -f "$COORD_CALIBRATION"
.build/debug/coord-node calibrate --calibration "$COORD_CALIBRATION" --staging "$PWD/.build/calibrate-staging"
echo "== swift test"
swift test --skip-build
echo "== python: protocol peer and end-to-end demo"
PY="$(scripts/python-env.sh)"
"$PY" -m pytest -q Tests/python
