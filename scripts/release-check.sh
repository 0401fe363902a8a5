#!/usr/bin/env bash
# Checks what `make release` built in DIR for VERSION: the sums, and each
# binary's format, platform and build settings. The linux/amd64 binary is
# run (`--version` must print the stamped version); the others are read,
# not run: `go version -m` shows the GOOS, GOARCH, CGO_ENABLED and
# -trimpath they were built with (go records no -ldflags under -trimpath,
# so the stamp is looked for in the binary's bytes, and -s -w as a binary
# without symbols), and their first bytes the executable format.
set -euo pipefail
dir=${1:?usage: release-check.sh DIR VERSION} version=${2:?usage: release-check.sh DIR VERSION}
go=${GO:-go}
fail() { echo "release-check: $*" >&2; exit 1; }

cd "$dir"
sha256sum --quiet -c SHA256SUMS || fail "SHA256SUMS does not match the binaries"

# hexdump of N bytes at OFFSET of FILE, without spaces.
bytes() { od -An -tx1 -j "$2" -N "$3" "$1" | tr -d ' \n'; }

n=0
for os in linux darwin; do
  for arch in amd64 arm64; do
    bin=ralph-$version-$os-$arch
    [ -f "$bin" ] || fail "$bin is missing"
    grep -q "  $bin\$" SHA256SUMS || fail "$bin is not in SHA256SUMS"
    info=$("$go" version -m "$bin") || fail "$bin: go version -m failed"
    for want in "build	GOOS=$os" "build	GOARCH=$arch" "build	CGO_ENABLED=0" "build	-trimpath=true" "build	-tags=natsserver"; do
      grep -qF -- "$want" <<<"$info" || fail "$bin: go version -m does not show \"$want\""
    done
    grep -qaF -- "$version" "$bin" || fail "$bin: the version $version is not stamped in it"
    # stripped (-s -w): no symbol of its own (a darwin binary still lists
    # the system library's functions it imports, as U).
    syms=$("$go" tool nm "$bin" 2>/dev/null | grep -c ' [TtDdBbRr] ' || true)
    [ "$syms" = 0 ] || fail "$bin: not stripped ($syms symbols)"
    case $os/$arch in
      # ELF: magic, then e_machine at 18 (little endian): 0x3e x86-64, 0xb7 AArch64.
      linux/amd64) magic=7f454c46 at=18 machine=3e00 ;;
      linux/arm64) magic=7f454c46 at=18 machine=b700 ;;
      # Mach-O 64-bit little endian: magic, then cputype at 4: x86_64, arm64.
      darwin/amd64) magic=cffaedfe at=4 machine=07000001 ;;
      darwin/arm64) magic=cffaedfe at=4 machine=0c000001 ;;
    esac
    [ "$(bytes "$bin" 0 4)" = "$magic" ] || fail "$bin: not a $os executable (magic $(bytes "$bin" 0 4))"
    [ "$(bytes "$bin" "$at" $(( ${#machine} / 2 )))" = "$machine" ] || fail "$bin: not built for $arch"
    if [ "$os" = linux ]; then
      # static: no program interpreter (PT_INTERP) means no dynamic loader.
      ! grep -qa 'ld-linux' "$bin" || fail "$bin: dynamically linked"
    fi
    n=$((n + 1))
  done
done

out=$(./ralph-"$version"-linux-amd64 --version) || fail "ralph --version failed"
case $out in "ralph version $version "*) ;; *) fail "ralph --version printed \"$out\", want \"ralph version $version …\"" ;; esac
echo "release-check: $n binaries ok ($(du -h ralph-"$version"-linux-amd64 | cut -f1) for linux/amd64); ralph --version: $out"
