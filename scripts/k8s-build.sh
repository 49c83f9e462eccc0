#!/usr/bin/env bash
# Build the Kubernetes binaries the k8s test suite runs (kube-apiserver,
# kubelet, kube-controller-manager, kube-scheduler) from the Go module proxy
# and cache them under ~/.cache/warren/k8s/<version>/. Idempotent: when the
# cached binaries exist and report the right version it only prints the
# directory. See /work/shared/design/K8S.md (and docs/k8s.md) for why it is
# built this way.
#
#   scripts/k8s-build.sh            build if missing; print the bin dir
#   K8S_VERSION=v1.37.2             the version (default below)
#   WARREN_K8S_CACHE=DIR            cache root (default ~/.cache/warren/k8s)
#
# k8s.io/kubernetes's go.mod replaces its 33 staging modules with
# ./staging/..., which the module zip lacks, so `go install ...@version`
# fails. A small wrapper module requires k8s.io/kubernetes and replaces
# each staging module with its own published v0.<minor>.<patch>.
# From scratch this takes ~12 minutes of two cores and a 3.8 GB Go build
# cache; it runs under `nice` so other work on the machine keeps going.
set -euo pipefail

VERSION=${K8S_VERSION:-v1.37.2}
CACHE=${WARREN_K8S_CACHE:-$HOME/.cache/warren/k8s}
OUT=$CACHE/$VERSION
BINS=(kube-apiserver kubelet kube-controller-manager kube-scheduler)

have_all() {
  for b in "${BINS[@]}"; do
    [ -x "$OUT/bin/$b" ] || return 1
  done
  "$OUT/bin/kube-apiserver" --version 2>/dev/null | grep -qx "Kubernetes $VERSION"
}

if have_all; then
  echo "$OUT/bin"
  exit 0
fi

command -v go >/dev/null || {
  echo "k8s-build: no Go toolchain on PATH (k8s.io/kubernetes $VERSION needs Go >= 1.26)" >&2
  exit 1
}

ver=${VERSION#v}
major=${ver%%.*}
rest=${ver#*.}
minor=${rest%%.*}
staging_ver="v0.${ver#*.}"

mkdir -p "$CACHE"
exec 9>"$CACHE/.build.lock"
flock 9
have_all && { echo "$OUT/bin"; exit 0; }

src=$CACHE/src-$VERSION
mkdir -p "$src"
gomod_file=$(go mod download -json "k8s.io/kubernetes@$VERSION" |
  sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')
[ -f "$gomod_file" ] || { echo "k8s-build: could not download k8s.io/kubernetes@$VERSION" >&2; exit 1; }
gover=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$gomod_file")
{
  echo "module warren.local/k8sbuild"
  echo
  echo "go $gover"
  echo
  echo "require k8s.io/kubernetes $VERSION"
  echo
  echo "replace ("
  sed -n 's#^\t\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\t\1 => \1 '"$staging_ver"'#p' "$gomod_file"
  echo ")"
} >"$src/go.mod"
n=$(grep -c "=> k8s.io/" "$src/go.mod")
[ "$n" -gt 20 ] || { echo "k8s-build: found only $n staging modules in $gomod_file" >&2; exit 1; }

ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$VERSION"
ldflags+=" -X k8s.io/component-base/version.gitMajor=$major"
ldflags+=" -X k8s.io/component-base/version.gitMinor=$minor"
ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$VERSION"
ldflags+=" -X k8s.io/client-go/pkg/version.gitMajor=$major"
ldflags+=" -X k8s.io/client-go/pkg/version.gitMinor=$minor"

tmp=$OUT/bin.tmp.$$
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
(
  cd "$src"
  export GOFLAGS="-mod=mod -buildvcs=false"
  pkgs=()
  for b in "${BINS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  nice -n 15 go build -trimpath -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}"
)
for b in "${BINS[@]}"; do
  [ -x "$tmp/$b" ] || { echo "k8s-build: $b was not built" >&2; exit 1; }
done
rm -rf "$OUT/bin"
mv "$tmp" "$OUT/bin"
trap - EXIT
echo "k8s-build: built ${BINS[*]} $VERSION in $(( $(date +%s) - start ))s" >&2
have_all || { echo "k8s-build: $OUT/bin/kube-apiserver does not report $VERSION" >&2; exit 1; }
echo "$OUT/bin"
