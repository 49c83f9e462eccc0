#!/usr/bin/env bash
# `make run`: start warrend in the foreground on a local state dir and make
# sure a ready base image exists. The default image `sandbox:latest` is a
# minimal Debian 12 (python3, git, ca-certificates, openssh-client) built
# from Debian packages by scripts/base-image.sh on first start, cached under
# ~/.cache/warren/base-image/ (WARREN_BASE_CACHE overrides), and imported
# with WorkingDir /workspace. No registry is involved. When the build fails
# (no Debian mirror reachable) the busybox-static root filesystem
# (tests/images/busybox-rootfs.sh) is imported instead, with a warning.
# A warm pool sized for the host is on by default (2 per CPU, 2..8), so the
# first `warren run` is served from prepared sandboxes; WARREND_ARGS with
# its own --warm-pool overrides it (--warm-pool 0: none).
# warrend runs with --privsep --user warren unless told otherwise (below).
# WARREND_ARGS adds flags to warrend (word-split), e.g.
#   make run WARREND_ARGS="--registry-config /etc/warren/registries.json"
#   scripts/run.sh BUILD_DIR STATE_DIR LISTEN
set -euo pipefail
build=$1; state=$2; listen=$3
top=$(cd "$(dirname "$0")/.." && pwd)
warrend="$build/src/daemon/warrend"
warren="$build/src/cli/warren"
mkdir -p "$state"

pool=()
case " ${WARREND_ARGS:-} " in
*" --warm-pool"*) ;;
*) n=$(( $(nproc) * 2 )); [ $n -lt 2 ] && n=2; [ $n -gt 8 ] && n=8; pool=(--warm-pool "$n") ;;
esac
# Privilege separation by default (docs/privsep.md): warren-priv keeps root
# and warrend drops to the `warren` user (made by scripts/warren-user.sh,
# which `make deps` runs). Not when WARREND_ARGS names --privsep or --user
# itself, or WARREN_RUN_AS_ROOT=1; when the user cannot reach the state dir
# (a checkout under a 0700 home) warrend keeps root, with warren-priv.
sep=()
case " ${WARREND_ARGS:-} " in
*" --privsep"*|*" --user"*) ;;
*)
  if [ "${WARREN_RUN_AS_ROOT:-0}" = 1 ]; then
    :
  elif id warren >/dev/null 2>&1 &&
       setpriv --reuid=warren --regid=warren --clear-groups -- test -x "$state"; then
    sep=(--privsep --user warren)
  else
    echo "run: WARNING: user warren cannot reach $state (or does not exist): warrend keeps root (--privsep only); see docs/privsep.md" >&2
    sep=(--privsep)
  fi ;;
esac
start_warrend() {
  # shellcheck disable=SC2086 # WARREND_ARGS is a list of flags
  "$warrend" --state-dir "$state" --listen "$listen" "${pool[@]}" "${sep[@]}" ${WARREND_ARGS:-} &
  pid=$!
}
start_warrend
trap 'kill -TERM $pid 2>/dev/null; wait $pid; exit' INT TERM
export WARREN_ADDR="$listen"
for _ in $(seq 1 200); do
  "$warren" version >/dev/null 2>&1 && break
  kill -0 $pid 2>/dev/null || { wait $pid; exit $?; }
  sleep 0.05
done
if ! "$warren" image get sandbox:latest >/dev/null 2>&1; then
  tmp=$(mktemp -d)
  cache_args=()
  [ -n "${WARREN_BASE_CACHE:-}" ] && cache_args=(--cache "$WARREN_BASE_CACHE")
  # the Debian base imported as sandbox-base, then the default image built
  # on it by the builder (scripts/default-image.json: `python` on PATH,
  # /workspace), so the recipe is one spec the SDK and the CLI share
  if base=$("$top/scripts/base-image.sh" "${cache_args[@]}") &&
     "$warren" image import --workdir /workspace \
       --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
       --env LANG=C.UTF-8 sandbox-base:latest "$base" >/dev/null &&
     "$warren" image build --spec "$top/scripts/default-image.json" -t sandbox:latest \
       >/dev/null 2>"$tmp/build.log"; then
    echo "run: built the default image sandbox:latest (Debian 12 from $base, through the builder)" >&2
  else
    [ -s "$tmp/build.log" ] && tail -5 "$tmp/build.log" >&2
    echo "run: WARNING: could not build or import the Debian base image (see above); falling back to busybox, which has no python3, git or ssh" >&2
    "$top/tests/images/busybox-rootfs.sh" "$tmp/rootfs" --tar "$tmp/rootfs.tar"
    "$warren" image import sandbox:latest "$tmp/rootfs.tar" >/dev/null
    echo "run: imported the default image sandbox:latest (busybox)" >&2
  fi
  rm -rf "$tmp"
fi
echo "run: warrend is up on $listen (state dir $state); try: $warren run sandbox:latest -- echo hello" >&2
# A dropped warrend (--user) whose warren-priv died cannot start another
# and exits 3 (docs/privsep.md): started again here, as a service manager
# would (Restart=on-failure), and it recovers the running sandboxes. At
# most 5 starts a minute; any other exit ends `make run` with its status.
starts=()
while :; do
  rc=0
  wait $pid || rc=$?
  [ $rc -eq 3 ] || exit $rc
  now=$(date +%s)
  recent=()
  for t in "${starts[@]}"; do [ $((now - t)) -lt 60 ] && recent+=("$t"); done
  starts=("${recent[@]}")
  if [ ${#starts[@]} -ge 5 ]; then
    echo "run: warrend exited 3 five times within a minute; giving up" >&2
    exit 3
  fi
  starts+=("$now")
  echo "run: warrend exited 3 (warren-priv was lost); starting it again" >&2
  start_warrend
done
