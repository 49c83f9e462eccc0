#!/usr/bin/env bash
# Build the libFuzzer targets (clang, build-fuzz/) and run each one for
# SECONDS (default 30) on a temp copy of its seed corpus. A crash fails.
#   scripts/fuzz.sh [SECONDS]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-30}
bd="$top/build-fuzz"
[ -f "$bd/build.ninja" ] || CC=clang meson setup "$bd" -Dfuzz=true -Db_lundef=false >/dev/null
targets=()
for f in "$top"/tests/fuzz/fuzz-*.c; do targets+=("$(basename "$f" .c)"); done
ninja -C "$bd" $(printf 'tests/fuzz/%s ' "${targets[@]}") >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for t in "${targets[@]}"; do
  mkdir -p "$tmp/$t"
  seed="$top/tests/fuzz/corpus/${t#fuzz-}"
  [ -d "$seed" ] && cp -r "$seed/." "$tmp/$t/"
  out=$("$bd/tests/fuzz/$t" -max_total_time="$secs" -artifact_prefix="$tmp/" "$tmp/$t" 2>&1) || {
    echo "$out" | tail -40; echo "fuzz: $t FAILED"; exit 1; }
  echo "fuzz: $t ok ($(echo "$out" | grep -o 'Done [0-9]* runs' | tail -1) in ${secs}s)"
done
