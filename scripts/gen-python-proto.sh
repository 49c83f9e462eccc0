#!/usr/bin/env bash
# Generate the Python protobuf/grpc stubs of proto/ into OUT (default
# python/warren/_proto). The generated tree is committed so that
# `pip install python/` works without grpcio-tools; tests/e2e/test_proto_sync.py
# regenerates into a temp dir and fails when the committed copy is stale.
# Imports are rewritten to live under warren._proto (the SDK package is
# itself named `warren`, and `grpc` is grpcio's name).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$top/python/warren/_proto}
PY=${PYTHON:-python3}
rm -rf "$out"
mkdir -p "$out"
cd "$top/proto"
protos=$(find warren grpc -name '*.proto' | sort)
"$PY" -m grpc_tools.protoc -I. --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" $protos
find "$out" -name '*.py' -o -name '*.pyi' | while read -r f; do
  sed -i -E \
    -e 's/^from warren\.v1 import /from warren._proto.warren.v1 import /' \
    -e 's/^from grpc\.health\.v1 import /from warren._proto.grpc.health.v1 import /' \
    -e 's/^import warren\.v1\./import warren._proto.warren.v1./' \
    "$f"
done
# Packages: every directory gets an __init__.py.
find "$out" -type d -exec sh -c 'for d; do : > "$d/__init__.py"; done' _ {} +
# Strip the grpcio version guard that pins the generating version.
find "$out" -name '*_pb2_grpc.py' -exec sed -i -e '/^GRPC_GENERATED_VERSION/,/^    )$/d' {} +
