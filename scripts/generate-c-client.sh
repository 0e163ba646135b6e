#!/usr/bin/env bash
# Generates the protobuf-c code for proto/coord/v1/coord.proto into clients/c/generated.
#
#   scripts/generate-c-client.sh           regenerate (the output is checked in)
#   scripts/generate-c-client.sh --check   fail if the checked-in code is stale
#
# protoc and its C plugin are Debian's (packages protobuf-compiler and protobuf-c-compiler), pinned to the
# protobuf-c version below so the checked-in code does not churn with whoever ran the script last.
# protobuf-c 1.4 predates proto3 `optional`, which protoc refuses to hand to it, so the script first rewrites
# each `optional T name = N;` into `oneof _name { T name = N; }` in a temporary copy: that is exactly how
# protoc represents proto3 optional itself (a synthetic oneof), the same bytes on the wire, and the C code
# keeps presence as a `_name_case` field.
set -euo pipefail

PROTOBUF_C_VERSION="1.4.1"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PROTOS=("coord/v1/coord.proto")
OUT_DIR="$ROOT/clients/c/generated"

mode="generate"
case "${1:-}" in
    "") ;;
    --check) mode="check" ;;
    -h|--help)
        sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
        exit 0 ;;
    *)
        echo "generate-c-client.sh: unknown argument '$1' (use --check or nothing)." >&2
        exit 2 ;;
esac

die() { echo "generate-c-client.sh: $*" >&2; exit 1; }

command -v protoc >/dev/null 2>&1 \
    || die "protoc is not installed; install Debian's protobuf-compiler (apt-get install protobuf-compiler)."
command -v protoc-gen-c >/dev/null 2>&1 \
    || die "protoc-gen-c is not installed; install Debian's protobuf-c-compiler (apt-get install protobuf-c-compiler)."
got="$(protoc-c --version 2>/dev/null | awk '/^protobuf-c/ {print $2}' || true)"
[[ "$got" == "$PROTOBUF_C_VERSION" ]] \
    || die "protoc-c reports protobuf-c version '${got:-unknown}', expected $PROTOBUF_C_VERSION (the version the checked-in code was made with); install that version or update PROTOBUF_C_VERSION and regenerate."

work="$(mktemp -d "${TMPDIR:-/tmp}/coord-c-protos.XXXXXX")"
trap 'rm -rf "$work"' EXIT
src="$work/src"
tmp="$work/generated"
mkdir -p "$tmp"

# ---- the proto3-optional rewrite, into a copy with the same relative paths ----

for proto in "${PROTOS[@]}"; do
    mkdir -p "$src/$(dirname "$proto")"
    sed -E 's/^([[:space:]]*)optional[[:space:]]+([A-Za-z0-9_.]+)[[:space:]]+([A-Za-z0-9_]+)[[:space:]]*=[[:space:]]*([0-9]+)[[:space:]]*;(.*)$/\1oneof _\3 { \2 \3 = \4; }\5/' \
        "$ROOT/proto/$proto" >"$src/$proto"
    # A form the rewrite does not know (field options, a line break inside the field) must not slip through.
    if left="$(grep -nE '^[[:space:]]*optional[[:space:]]' "$src/$proto")"; then
        die "proto/$proto has an optional field this script cannot rewrite for protobuf-c: $left"
    fi
done

(cd "$src" && protoc -I . --c_out="$tmp" "${PROTOS[@]}") \
    || die "protoc --c_out failed on ${PROTOS[*]}."

if [[ "$mode" == "check" ]]; then
    if [[ ! -d "$OUT_DIR" ]]; then
        die "generated code is missing: $OUT_DIR does not exist; run scripts/generate-c-client.sh."
    fi
    if ! diff -r -u "$OUT_DIR" "$tmp" >"$work/diff" 2>&1; then
        sed -e "s#$tmp#<fresh>#g" "$work/diff" | head -n 60 >&2
        die "generated code in clients/c/generated is stale: it differs from what proto/ produces; run scripts/generate-c-client.sh and commit the result."
    fi
    echo "Generated protobuf-c code is up to date."
    exit 0
fi

# Replace the whole directory so a removed .proto leaves no stale .pb-c.* behind.
rm -rf "$OUT_DIR"
mkdir -p "$(dirname "$OUT_DIR")"
cp -R "$tmp" "$OUT_DIR"
chmod -R u+rwX,go+rX "$OUT_DIR"
echo "Generated $(find "$OUT_DIR" -name '*.pb-c.c' | wc -l) file(s) in ${OUT_DIR#"$ROOT"/} with protobuf-c $PROTOBUF_C_VERSION."
