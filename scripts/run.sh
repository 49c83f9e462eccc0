#!/usr/bin/env bash
# `make run`: start warrend in the foreground on a local state dir and make
# sure a ready base image exists. Until the Debian base image of the image
# issue lands, the default image `sandbox:latest` is a busybox-static root
# filesystem (tests/images/busybox-rootfs.sh), imported on first start.
#   scripts/run.sh BUILD_DIR STATE_DIR LISTEN
set -euo pipefail
build=$1; state=$2; listen=$3
top=$(cd "$(dirname "$0")/.." && pwd)
warrend="$build/src/daemon/warrend"
warren="$build/src/cli/warren"
mkdir -p "$state"

"$warrend" --state-dir "$state" --listen "$listen" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid' INT TERM
export WARREN_ADDR="$listen"
for _ in $(seq 1 200); do
  "$warren" version >/dev/null 2>&1 && break
  kill -0 $pid 2>/dev/null || { wait $pid; exit $?; }
  sleep 0.05
done
if ! "$warren" image get sandbox:latest >/dev/null 2>&1; then
  tmp=$(mktemp -d)
  "$top/tests/images/busybox-rootfs.sh" "$tmp/rootfs" --tar "$tmp/rootfs.tar"
  "$warren" image import sandbox:latest "$tmp/rootfs.tar" >/dev/null
  rm -rf "$tmp"
  echo "run: imported the default image sandbox:latest (busybox)" >&2
fi
echo "run: warrend is up on $listen (state dir $state); try: $warren run sandbox:latest -- echo hello" >&2
wait $pid
