#!/usr/bin/env bash
# The whole test suite: generated code up to date, Swift unit and integration tests, then the Python
# protocol peer and the end-to-end demo tests against the real binaries.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
echo "== generated protobuf code is up to date"
scripts/generate-protos.sh --check
echo "== swift build"
swift build --build-tests
echo "== swift test"
swift test --skip-build
echo "== python: protocol peer and end-to-end demo"
PY="$(scripts/python-env.sh)"
"$PY" -m pytest -q Tests/python
