#!/usr/bin/env bash
# Install what building and testing Warren needs, only when missing.
# Idempotent and quiet when everything is present. Debian packages via
# apt-get (one `apt-get update` first, only when something is missing),
# Python packages via pip.
set -euo pipefail

DEB_PACKAGES=(
  meson ninja-build pkg-config gcc clang clang-format
  libuv1-dev libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler protobuf-compiler
  libssl-dev openssl libsqlite3-dev sqlite3 libseccomp-dev libcap-dev
  libcurl4-openssl-dev libarchive-dev libjansson-dev libyaml-dev libcmocka-dev libclang-rt-14-dev
  busybox-static iproute2 nftables libnftables-dev libmnl-dev libc-ares-dev
  libhttp-parser-dev bubblewrap crun
  docker-registry skopeo
  mmdebstrap
  tmux
  libpcre2-dev   # per-host request rules: path regexes (src/net/rules.c)
  git curl openssh-client openssh-server   # tests/fakenet: git, curl, ssh clients and the bed's sshd
  etcd-server containerd runc containernetworking-plugins umoci   # tests/k8s: the single-node cluster (docs/k8s.md)
)
PY_MODULES=(grpc:grpcio grpc_tools:grpcio-tools google.protobuf:protobuf pytest:pytest
  dnslib:dnslib cryptography:cryptography   # tests/fakenet
  jwt:pyjwt   # tests/e2e/test_tenancy.py: workload identity tokens verified with PyJWT
  requests:requests   # copied into a sandbox image by tests/e2e/test_credentials.py
  yaml:pyyaml)   # tests/k8s: applies docs/k8s-rbac.yaml

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "deps: missing Debian packages: ${missing[*]}; run as root (or: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  # Packages such as openssh-server start their service on install where
  # no init system says otherwise; the tests start their own sshd in a
  # netns, so forbid service starts for this install (only when no
  # policy-rc.d exists; ours is removed afterwards).
  policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy"
    trap 'rm -f "$policy"' EXIT
  fi
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# tests/fakenet's Debian repository serves a few real packages besides its
# own, for the seed's `Image.sandbox().apt_install(["tmux"])`: their .debs
# are fetched once from the host's apt sources into a cache (tests never
# reach a real mirror). Without them that one test skips, naming why.
TEST_DEBS=(tmux libevent-core-2.1-7 libutempter0)
TEST_DEBS_DIR=${WARREN_TEST_DEBS:-/var/cache/warren/test-debs}
if [ "$(id -u)" -eq 0 ]; then
  need=()
  for p in "${TEST_DEBS[@]}"; do
    compgen -G "$TEST_DEBS_DIR/${p}_*.deb" >/dev/null || need+=("$p")
  done
  if [ ${#need[@]} -gt 0 ]; then
    mkdir -p "$TEST_DEBS_DIR"
    chown _apt "$TEST_DEBS_DIR" 2>/dev/null || true
    fetch() { (cd "$TEST_DEBS_DIR" && apt-get download -qq "${need[@]}" >/dev/null 2>&1); }
    fetch || { apt-get update -qq >/dev/null 2>&1 && fetch; } ||
      echo "deps: could not fetch ${need[*]} into $TEST_DEBS_DIR (the fake Debian repository goes without them)" >&2
  fi
fi

PY=${PYTHON:-python3}
pymissing=()
for m in "${PY_MODULES[@]}"; do
  mod=${m%%:*}; pkg=${m##*:}
  "$PY" -c "import $mod" 2>/dev/null || pymissing+=("$pkg")
done
if [ ${#pymissing[@]} -gt 0 ]; then
  echo "deps: pip installing ${pymissing[*]}" >&2
  "$PY" -m pip install -q --disable-pip-version-check --root-user-action=ignore "${pymissing[@]}" >/dev/null
fi
