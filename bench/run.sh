#!/usr/bin/env bash
# Run every benchmark and print the numbers.
#   bench/run.sh [BUILD_DIR]   (default: build)
#   RUNS=3 bench/run.sh ...    (repeat each C benchmark; the machine is shared)
# Starts its own server: BUILD/src/daemon/warrend --enable-diag when it
# exists and starts, else the RPC layer's BUILD/tests/tools/wr-diag-server;
# then a second one with a throw-away certificate for the TLS numbers.
# Everything stays on a temp dir's unix socket and 127.0.0.1.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-build}
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
PYTHON=${PYTHON:-python3}
TMP=$(mktemp -d /tmp/warren-bench.XXXXXX)
SOCK="$TMP/warren.sock"
PORT=$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
SRV_PID=""

cleanup() {
  if [ -n "$SRV_PID" ] && kill -0 "$SRV_PID" 2>/dev/null; then
    kill -TERM "$SRV_PID" 2>/dev/null || true
    wait "$SRV_PID" 2>/dev/null || true
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT

start_server() {
  "$@" --state-dir "$TMP/state" --listen "unix:$SOCK" --listen "tcp:127.0.0.1:$PORT" \
       --enable-diag --log-level warn >"$TMP/server.log" 2>&1 &
  SRV_PID=$!
  for _ in $(seq 1 200); do
    if [ -S "$SOCK" ] && (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
      return 0
    fi
    kill -0 "$SRV_PID" 2>/dev/null || break
    sleep 0.05
  done
  kill -TERM "$SRV_PID" 2>/dev/null || true
  wait "$SRV_PID" 2>/dev/null || true
  SRV_PID=""
  rm -f "$SOCK"
  return 1
}

SERVER=""
if [ -x "$BUILD/src/daemon/warrend" ] && start_server "$BUILD/src/daemon/warrend" --insecure-tcp; then
  SERVER=warrend
elif start_server "$BUILD/tests/tools/wr-diag-server"; then
  SERVER=wr-diag-server
else
  echo "bench: no server could start" >&2
  cat "$TMP/server.log" >&2
  exit 1
fi
# VmRSS counts resident shared-library pages too; Private_Dirty is the
# server's own memory.
rss() {
  echo "$(awk '/VmRSS/ {print $2}' "/proc/$SRV_PID/status") kB" \
       "(private dirty $(awk '/^Private_Dirty/ {print $2}' "/proc/$SRV_PID/smaps_rollup") kB)"
}
sleep 0.3
echo "server: $SERVER (pid $SRV_PID)"
echo "server-idle-rss: $(rss)"

RUNS=${RUNS:-1}
RPCC="$BUILD/bench/rpc-c"
for _ in $(seq "$RUNS"); do
  "$RPCC" --addr "unix:$SOCK" --seconds 3 unary
  "$RPCC" --addr "127.0.0.1:$PORT" --seconds 3 unary | sed 's/^c-unary:/c-unary-tcp:/'
  "$RPCC" --addr "unix:$SOCK" --megabytes 200 bidi
  "$RPCC" --addr "127.0.0.1:$PORT" --megabytes 200 bidi | sed 's/^c-bidi:/c-bidi-tcp:/'
done
"$PYTHON" "$ROOT/bench/rpc.py" --addr "unix:$SOCK" --seconds 3
"$PYTHON" "$ROOT/bench/rpc.py" --addr "127.0.0.1:$PORT" --seconds 3 | sed 's/^grpcio-unary:/grpcio-unary-tcp:/'
# Cached message buffers are returned 100 ms after the last call.
sleep 0.5
echo "server-rss-after-load: $(rss)"

# TLS: a second server with a throw-away CA and certificate.
if command -v openssl >/dev/null; then
  kill -TERM "$SRV_PID" 2>/dev/null || true
  wait "$SRV_PID" 2>/dev/null || true
  SRV_PID=""
  rm -f "$SOCK"
  C="$TMP/tls"
  mkdir -p "$C"
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$C/ext.cnf"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$C/ca.key" \
    -out "$C/ca.crt" -days 1 -subj /CN=warren-bench-ca >/dev/null 2>&1
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$C/server.key" \
    -out "$C/server.csr" -subj /CN=localhost >/dev/null 2>&1
  openssl x509 -req -in "$C/server.csr" -CA "$C/ca.crt" -CAkey "$C/ca.key" -CAcreateserial \
    -out "$C/server.crt" -days 1 -extfile "$C/ext.cnf" >/dev/null 2>&1
  BIN="$BUILD/tests/tools/wr-diag-server"
  [ "$SERVER" = warrend ] && BIN="$BUILD/src/daemon/warrend"
  if start_server "$BIN" --tls-cert "$C/server.crt" --tls-key "$C/server.key"; then
    TLSOPTS=(--addr "127.0.0.1:$PORT" --tls --ca "$C/ca.crt" --server-name localhost)
    for _ in $(seq "$RUNS"); do
      "$RPCC" "${TLSOPTS[@]}" --seconds 3 unary | sed 's/^c-unary:/c-unary-tls:/'
      "$RPCC" "${TLSOPTS[@]}" --megabytes 200 bidi | sed 's/^c-bidi:/c-bidi-tls:/'
    done
  else
    echo "bench: the TLS server did not start" >&2
  fi
fi
