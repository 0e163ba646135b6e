#!/usr/bin/env bash
# Builds the Debian packages (CONTRACT §7) for this machine's architecture into OUTDIR:
#   OUTDIR/coord_<version>_<arch>.deb        the coordinator CLI, its man page and shell completions
#   OUTDIR/coord-node_<version>_<arch>.deb   the node agent: binary, systemd unit, sysusers.d user (video group),
#                                            state directory, /etc/coord-node/node.yaml (conffile), keys made by
#                                            its postinst, man page and shell completions
# Usage: scripts/package.sh OUTDIR
# The binaries are a release build with the Swift runtime linked statically (.build-release, the same build
# bench/ uses); Depends: lists only the shared C libraries they load (dpkg-shlibdeps). Needs dpkg-dev. The
# man pages come from swift-argument-parser's generate-manual. The packaging files are in deploy/debian/
# (LINTIAN.md: what lintian says and why).
# Environment: COORD_VERSION overrides the version; COORD_PACKAGE_SKIP_BUILD=1 packages the binaries already in
# .build-release without running swift build; COORD_MAINTAINER overrides the Maintainer field.
set -euo pipefail

die() { echo "package.sh: $*" >&2; exit 1; }

[[ $# -eq 1 ]] || die "usage: scripts/package.sh OUTDIR"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$1" || die "cannot create $1."
OUT="$(cd "$1" && pwd)"
DEB="$ROOT/deploy/debian"
cd "$ROOT"

for tool in dpkg-deb dpkg-shlibdeps gzip strip iconv; do
    command -v "$tool" >/dev/null 2>&1 \
        || die "$tool is not installed (Debian: apt-get install dpkg-dev binutils)."
done

ARCH="$(dpkg --print-architecture)"

# --- the version: the programs' own (CoordVersion.current, what --version prints), then where in git -------------
# 0.1.0+git20261125.143.aca8c1b: the commit's date (UTC) and its number of commits keep versions increasing from
# one commit to the next; a tree with uncommitted changes adds .dirty. Outside a git clone: the bare version.
upstream="$(sed -n 's/.*static let current = "\([^"]*\)".*/\1/p' Sources/CoordCore/Version.swift 2>/dev/null | head -n1)"
[[ -n "$upstream" ]] || die "cannot read CoordVersion.current from Sources/CoordCore/Version.swift."
git_() { git -c safe.directory="$ROOT" -C "$ROOT" "$@"; }
if [[ -n "${COORD_VERSION:-}" ]]; then
    VERSION="$COORD_VERSION"
elif git_ rev-parse --verify -q HEAD >/dev/null 2>&1; then
    date="$(TZ=UTC git_ log -1 --format=%cd --date=format-local:%Y%m%d)"
    VERSION="$upstream+git$date.$(git_ rev-list --count HEAD).$(git_ rev-parse --short=7 HEAD)"
    if [[ -n "$(git_ status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
        VERSION="$VERSION.dirty"
    fi
else
    VERSION="$upstream"
fi
[[ "$VERSION" =~ ^[0-9][A-Za-z0-9.+~]*$ ]] || die "\"$VERSION\" is not a Debian version (digits first; then A-Z a-z 0-9 . + ~)."
# Timestamps inside the packages: the commit's time, so the same commit packs the same files.
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git_ log -1 --format=%ct 2>/dev/null || date +%s)}"
MAINTAINER="${COORD_MAINTAINER:-coord maintainers <maintainers@users.noreply.a-seed-1750c0ed.example>}"

# --- the binaries ---------------------------------------------------------------------------------------------
SCRATCH="$ROOT/.build-release"
if [[ "${COORD_PACKAGE_SKIP_BUILD:-}" != 1 ]]; then
    echo "== swift build -c release --static-swift-stdlib (.build-release)" >&2
    swift build -c release --static-swift-stdlib --scratch-path "$SCRATCH" >&2
fi
BIN="$(swift build -c release --static-swift-stdlib --scratch-path "$SCRATCH" --show-bin-path)"
for program in coord coord-node; do
    [[ -x "$BIN/$program" ]] || die "$BIN/$program is missing: build it (or unset COORD_PACKAGE_SKIP_BUILD)."
done
# generate-manual, from the swift-argument-parser the binaries were built with (a small build, once).
GENERATE_MANUAL="$SCRATCH/tools/release/generate-manual"
if [[ ! -x "$GENERATE_MANUAL" || "$SCRATCH/checkouts/swift-argument-parser/Package.swift" -nt "$GENERATE_MANUAL" ]]; then
    echo "== swift build generate-manual (swift-argument-parser)" >&2
    swift build -c release --package-path "$SCRATCH/checkouts/swift-argument-parser" --product generate-manual \
        --scratch-path "$SCRATCH/tools" >&2 || die "building swift-argument-parser's generate-manual failed."
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# --- one package tree per program -----------------------------------------------------------------------------
# stage PROGRAM: the binary (stripped copy: .build-release stays as built), its man page, its completions and
# the docs every package carries.
stage() {
    local program="$1" tree="$WORK/$1"
    install -d -m 755 "$tree/DEBIAN" "$tree/usr/bin" "$tree/usr/share/man/man1" "$tree/usr/share/doc/$program" \
        "$tree/usr/share/bash-completion/completions" "$tree/usr/share/zsh/vendor-completions" \
        "$tree/usr/share/fish/vendor_completions.d"
    install -m 755 "$BIN/$program" "$tree/usr/bin/$program"
    strip --strip-unneeded --remove-section=.comment --remove-section=.note "$tree/usr/bin/$program"

    # Completions as swift-argument-parser writes them.
    # (bash's is sourced, not run: without its #! line.)
    "$tree/usr/bin/$program" --generate-completion-script bash | sed '1{/^#!/d}' \
        >"$tree/usr/share/bash-completion/completions/$program"
    "$tree/usr/bin/$program" --generate-completion-script zsh >"$tree/usr/share/zsh/vendor-completions/_$program"
    "$tree/usr/bin/$program" --generate-completion-script fish >"$tree/usr/share/fish/vendor_completions.d/$program.fish"

    # The man page, every subcommand in it.
    manpage "$program" "$tree/usr/share/man/man1/$program.1"
    gzip -9n "$tree/usr/share/man/man1/$program.1"

    install -m 644 "$DEB/copyright" "$tree/usr/share/doc/$program/copyright"
    # The annotated example files, so a box set up from the packages alone has them.
    install -d -m 755 "$tree/usr/share/doc/$program/examples"
    case "$program" in
        coord) install -m 644 "$ROOT/deploy/rig.example.yaml" "$tree/usr/share/doc/$program/examples/" ;;
        coord-node) install -m 644 "$ROOT/deploy/node.example.yaml" "$tree/usr/share/doc/$program/examples/" ;;
    esac
    install -D -m 644 "$DEB/$program.lintian-overrides" "$tree/usr/share/lintian/overrides/$program"
    {
        echo "$program ($VERSION) unstable; urgency=medium"
        echo
        echo "  * Built by scripts/package.sh from coord's git tree$(git_ rev-parse -q --short=12 HEAD 2>/dev/null | sed 's/^/ at /')."
        echo
        echo " -- $MAINTAINER  $(date -u -R -d "@$SOURCE_DATE_EPOCH")"
    } | gzip -9n >"$tree/usr/share/doc/$program/changelog.gz"
}

# manpage PROGRAM FILE: swift-argument-parser's generate-manual (built once from the checkout the binaries were built
# with, into .build-release/tools) writes one mdoc page with every subcommand from `PROGRAM
# --experimental-dump-help`. It drops every non-ASCII character, so the help text goes through a wrapper that
# spells µs, §, ± and the like in ASCII first.
manpage() {
    local program="$1" file="$2" wrapper="$WORK/dump-help/$1"
    mkdir -p "$WORK/dump-help"
    {
        echo '#!/bin/sh'
        printf '"%s" "$@" | ' "$WORK/$program/usr/bin/$program"
        cat <<'SED'
sed -e 's/µ/u/g' -e 's/§/section /g' -e 's/±/+-/g' -e 's/×/x/g' -e 's/→/->/g' -e 's/≥/>=/g' -e 's/≤/<=/g' \
    -e 's/—/--/g' -e 's/–/-/g' -e 's/…/.../g' -e "s/‘/'/g" -e "s/’/'/g" -e 's/“/\\"/g' -e 's/”/\\"/g' \
    | iconv -f UTF-8 -t ASCII//TRANSLIT
SED
    } >"$wrapper"
    chmod 755 "$wrapper"
    mkdir -p "$WORK/man-$program"
    "$GENERATE_MANUAL" "$wrapper" --date "$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)" --section 1 \
        --output-directory "$WORK/man-$program" >/dev/null || die "generate-manual failed on $program."
    # FILES and EXIT STATUS, which the command-line parser cannot know, before AUTHORS (or at the end).
    awk -v extra="$DEB/$program.man-extra" '
        /^\.Sh AUTHORS/ && !done { while ((getline line < extra) > 0) print line; done = 1 }
        { print }
        END { if (!done) while ((getline line < extra) > 0) print line }' "$WORK/man-$program/$program.1" >"$file"
}

# control FILE TEMPLATE PROGRAM: the control file, with Depends from the shared libraries the binary loads.
control() {
    local program="$1" tree="$WORK/$1" depends
    mkdir -p "$WORK/shlibs-$program/debian"
    printf 'Source: coord\n\nPackage: %s\nArchitecture: any\n' "$program" >"$WORK/shlibs-$program/debian/control"
    depends="$(cd "$WORK/shlibs-$program" && dpkg-shlibdeps -O -e"$tree/usr/bin/$program" 2>"$WORK/shlibdeps.log")" \
        || { cat "$WORK/shlibdeps.log" >&2; die "dpkg-shlibdeps failed on $program."; }
    depends="${depends#shlibs:Depends=}"
    [[ -n "$depends" ]] || die "dpkg-shlibdeps found no libraries for $program."
    if [[ "$program" == coord-node ]]; then
        # The postinst makes the user with systemd-sysusers, or with useradd where systemd is missing.
        depends="$depends, systemd-sysusers | passwd"
    fi
    rm -rf "$WORK/shlibs-$program"
    # Installed-Size in KiB, as dpkg-gencontrol counts it.
    local size
    size="$(du -k -s --exclude=DEBIAN "$tree" | cut -f1)"
    local text
    text="$(<"$DEB/$program.control.in")"
    text="${text//@VERSION@/$VERSION}"
    text="${text//@ARCH@/$ARCH}"
    text="${text//@MAINTAINER@/$MAINTAINER}"
    text="${text//@INSTALLED_SIZE@/$size}"
    text="${text//@DEPENDS@/$depends}"
    printf '%s\n' "$text" >"$tree/DEBIAN/control"
}

# build PROGRAM: md5sums, timestamps, dpkg-deb.
build() {
    local program="$1" tree="$WORK/$1" deb="$OUT/${1}_${VERSION}_${ARCH}.deb"
    (cd "$tree" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0r md5sum) \
        >"$tree/DEBIAN/md5sums"
    chmod 644 "$tree/DEBIAN/md5sums" "$tree/DEBIAN/control"
    find "$tree" -newermt "@$SOURCE_DATE_EPOCH" -print0 | xargs -0r touch --no-dereference --date="@$SOURCE_DATE_EPOCH"
    rm -f "$deb"
    dpkg-deb --root-owner-group -Zxz --build "$tree" "$deb" >/dev/null
    echo "$deb"
}

# coord.
stage coord
control coord
build coord

# coord-node: the above, and the service.
stage coord-node
tree="$WORK/coord-node"
install -D -m 644 deploy/coord-node.service "$tree/lib/systemd/system/coord-node.service"
install -D -m 644 "$DEB/coord-node.sysusers" "$tree/usr/lib/sysusers.d/coord-node.conf"
install -D -m 644 "$DEB/node.yaml" "$tree/etc/coord-node/node.yaml"
install -d -m 755 "$tree/etc/coord-node/authorized" "$tree/var/lib/coord-node"
install -m 755 "$DEB/coord-node.postinst" "$tree/DEBIAN/postinst"
install -m 755 "$DEB/coord-node.prerm" "$tree/DEBIAN/prerm"
install -m 755 "$DEB/coord-node.postrm" "$tree/DEBIAN/postrm"
echo /etc/coord-node/node.yaml >"$tree/DEBIAN/conffiles"
chmod 644 "$tree/DEBIAN/conffiles"
control coord-node
build coord-node
