#!/usr/bin/env bash
# Builds coord-fuzz for libFuzzer and fuzzes for SECONDS (default 60) from the committed corpus:
#   scripts/fuzz.sh [SECONDS] [TARGET [RUNS]]
# TARGET (edge, node, rig, manifest, nodefile, discovery) sends every input to that target alone, stopping after RUNS inputs if given
# (as well as after SECONDS); without it the first byte of each input picks the target.
# New inputs go to .build-fuzz/corpus, crashes to .build-fuzz/artifacts (add a crash's file to Tests/fuzz-corpus
# once fixed: the suite replays that corpus). SwiftPM links executables with `--defsym main=<module>_main`,
# which gold cannot link against libFuzzer's runtime here (an internal error), so the link is redone with lld.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds="${1:-60}"
target="${2:-}"
runs="${3:--1}"
flags=(-c release --scratch-path .build-fuzz --product coord-fuzz -Xswiftc -sanitize=fuzzer -Xswiftc -DFUZZING)
binary=.build-fuzz/x86_64-unknown-linux-gnu/release/coord-fuzz
if ! swift build "${flags[@]}" >/dev/null 2>&1; then
    link="$(swift build "${flags[@]}" -v 2>&1 | grep -E '^/opt/swift/usr/bin/swiftc .*-emit-executable' | head -1 || true)"
    [[ -n "$link" ]] || { echo "fuzz.sh: the build failed before linking; run: swift build ${flags[*]}" >&2; exit 1; }
    bash -c "$link -use-ld=lld" >/dev/null 2>&1 || { echo "fuzz.sh: linking coord-fuzz with lld failed" >&2; exit 1; }
fi
mkdir -p .build-fuzz/corpus .build-fuzz/artifacts
COORD_FUZZ_TARGET="$target" "$binary" .build-fuzz/corpus Tests/fuzz-corpus -max_total_time="$seconds" -runs="$runs" -max_len=4096 -rss_limit_mb=4096 \
    -artifact_prefix=.build-fuzz/artifacts/ -print_final_stats=1
