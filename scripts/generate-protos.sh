#!/usr/bin/env bash
# Generates the Swift code for proto/coord/v1/coord.proto into Sources/CoordWire/Generated.
#
#   scripts/generate-protos.sh           regenerate (the output is checked in)
#   scripts/generate-protos.sh --check   fail if the checked-in code is stale
#
# protoc-gen-swift is built from swift-protobuf at the exact tag the package pins, so the
# generated code always matches the SwiftProtobuf runtime it compiles against. It is built
# once into a cache directory (gitignored as .build-*) and reused while its version matches.
# protoc itself is Debian's (package protobuf-compiler); it only parses the .proto.
set -euo pipefail

SWIFT_PROTOBUF_VERSION="1.39.0"
SWIFT_PROTOBUF_URL="https://github.com/apple/swift-protobuf"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE_DIR="${PROTOC_GEN_SWIFT_CACHE:-$ROOT/.build-protoc-gen-swift}"
PROTOS=("coord/v1/coord.proto")
OUT_DIR="$ROOT/Sources/CoordWire/Generated"

mode="generate"
case "${1:-}" in
    "") ;;
    --check) mode="check" ;;
    -h|--help)
        sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
        exit 0 ;;
    *)
        echo "generate-protos.sh: unknown argument '$1' (use --check or nothing)." >&2
        exit 2 ;;
esac

die() { echo "generate-protos.sh: $*" >&2; exit 1; }

command -v protoc >/dev/null 2>&1 \
    || die "protoc is not installed; install Debian's protobuf-compiler (apt-get install protobuf-compiler)."
command -v swift >/dev/null 2>&1 || die "swift is not on PATH; it is needed to build protoc-gen-swift."

# ---- protoc-gen-swift, pinned and cached ----

src="$CACHE_DIR/swift-protobuf"
scratch="$CACHE_DIR/build"

plugin_version() {  # prints the version of a built plugin, or nothing
    "$1" --version 2>/dev/null | awk '{print $NF}' || true
}

build_plugin() {
    mkdir -p "$CACHE_DIR"
    if [[ ! -d "$src/.git" ]]; then
        echo "Cloning swift-protobuf $SWIFT_PROTOBUF_VERSION into $src" >&2
        rm -rf "$src"
        git -c advice.detachedHead=false clone --quiet --branch "$SWIFT_PROTOBUF_VERSION" \
            "$SWIFT_PROTOBUF_URL" "$src" \
            || die "cannot clone $SWIFT_PROTOBUF_URL at tag $SWIFT_PROTOBUF_VERSION."
    fi
    if [[ "$(git -C "$src" describe --tags --exact-match 2>/dev/null || true)" != "$SWIFT_PROTOBUF_VERSION" ]]; then
        echo "Checking out swift-protobuf $SWIFT_PROTOBUF_VERSION in $src" >&2
        git -C "$src" fetch --quiet --tags origin \
            || die "cannot fetch tags from $SWIFT_PROTOBUF_URL into $src."
        git -C "$src" -c advice.detachedHead=false checkout --quiet "refs/tags/$SWIFT_PROTOBUF_VERSION" \
            || die "tag $SWIFT_PROTOBUF_VERSION not found in $src."
    fi
    echo "Building protoc-gen-swift $SWIFT_PROTOBUF_VERSION (release; first time takes a few minutes)" >&2
    swift build -c release --product protoc-gen-swift \
        --package-path "$src" --scratch-path "$scratch" >&2 \
        || die "building protoc-gen-swift failed (see the output above)."
}

plugin="$scratch/release/protoc-gen-swift"
if [[ ! -x "$plugin" || "$(plugin_version "$plugin")" != "$SWIFT_PROTOBUF_VERSION" ]]; then
    build_plugin
    plugin="$(swift build -c release --package-path "$src" --scratch-path "$scratch" --show-bin-path)/protoc-gen-swift"
fi
[[ -x "$plugin" ]] || die "protoc-gen-swift was not built at $plugin."
got="$(plugin_version "$plugin")"
[[ "$got" == "$SWIFT_PROTOBUF_VERSION" ]] \
    || die "protoc-gen-swift at $plugin reports version '$got', expected $SWIFT_PROTOBUF_VERSION."

# ---- generate into a temporary directory ----

work="$(mktemp -d "${TMPDIR:-/tmp}/coord-protos.XXXXXX")"
trap 'rm -rf "$work"' EXIT
tmp="$work/Generated"
mkdir -p "$tmp"

(cd "$ROOT" && protoc \
    -I proto \
    --plugin="protoc-gen-swift=$plugin" \
    --swift_opt=Visibility=Public \
    --swift_out="$tmp" \
    "${PROTOS[@]/#/proto/}") \
    || die "protoc failed on ${PROTOS[*]}."

if [[ "$mode" == "check" ]]; then
    if [[ ! -d "$OUT_DIR" ]]; then
        die "generated code is missing: $OUT_DIR does not exist; run scripts/generate-protos.sh."
    fi
    if ! diff -r -u "$OUT_DIR" "$tmp" >"$work/diff" 2>&1; then
        sed -e "s#$tmp#<fresh>#g" "$work/diff" | head -n 60 >&2
        die "generated code in Sources/CoordWire/Generated is stale: it differs from what proto/ produces; run scripts/generate-protos.sh and commit the result."
    fi
    echo "Generated protobuf code is up to date."
    exit 0
fi

# Replace the whole directory so a removed .proto leaves no stale .pb.swift behind.
rm -rf "$OUT_DIR"
mkdir -p "$(dirname "$OUT_DIR")"
cp -R "$tmp" "$OUT_DIR"
chmod -R u+rwX,go+rX "$OUT_DIR"
echo "Generated $(find "$OUT_DIR" -name '*.pb.swift' | wc -l) file(s) in ${OUT_DIR#"$ROOT"/} with protoc-gen-swift $SWIFT_PROTOBUF_VERSION."
