#!/usr/bin/env bash
# Build Warren's default base image offline from Debian packages: a minimal
# Debian 12 (bookworm) root filesystem with python3, git, ca-certificates,
# openssh-client, procps and bash, an empty /workspace, no apt lists or
# caches, written as a tarball for `warren image import`.
#
#   scripts/base-image.sh [--cache DIR] [--mirror URL] [--rebuild] [OUT.tar]
#
# The tarball is built once with mmdebstrap and cached under DIR (default
# ${XDG_CACHE_HOME:-~/.cache}/warren/base-image/), keyed by a hash of the
# recipe (suite, package list, dpkg excludes, script version): a second run
# is instant. OUT.tar, when given, receives a copy (a hard link when on the
# same file system); the cached path is printed on stdout either way.
# Packages come from the Debian mirrors the host's apt configuration names
# (/etc/apt/sources.list and /etc/apt/sources.list.d/), or from --mirror URL
# (or $WARREN_DEBIAN_MIRROR: a Debian mirror or apt proxy such as
# http://apt-cacher:3142/debian); no registry is used.
# Progress lines go to stderr. Exit status 0 on success, 1 on failure (no
# mirror reachable, mmdebstrap missing, ...), 2 on a usage error.
set -euo pipefail

VERSION=2
SUITE=bookworm
PACKAGES=(python3 git ca-certificates openssh-client procps bash coreutils less)
# Documentation, man pages and translations are not needed in a sandbox.
DPKG_OPTS=(
  'path-exclude=/usr/share/man/*'
  'path-exclude=/usr/share/doc/*'
  'path-include=/usr/share/doc/*/copyright'
  'path-exclude=/usr/share/info/*'
  'path-exclude=/usr/share/locale/*'
  'path-include=/usr/share/locale/locale.alias'
  'path-exclude=/usr/share/lintian/*'
)

usage() { echo "usage: $0 [--cache DIR] [--mirror URL] [--rebuild] [OUT.tar]" >&2; exit 2; }
say() { echo "base-image: $*" >&2; }

cache=${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/warren/base-image
out=""
rebuild=0
mirror=${WARREN_DEBIAN_MIRROR:-}
while [ $# -gt 0 ]; do
  case $1 in
    --cache) [ $# -ge 2 ] || usage; cache=$2; shift 2 ;;
    --mirror) [ $# -ge 2 ] || usage; mirror=$2; shift 2 ;;
    --rebuild) rebuild=1; shift ;;
    -h|--help) usage ;;
    -*) usage ;;
    *) [ -z "$out" ] || usage; out=$1; shift ;;
  esac
done

recipe="v$VERSION $SUITE ${PACKAGES[*]} ${DPKG_OPTS[*]}"
key=$(printf '%s' "$recipe" | sha256sum | cut -c1-16)
mkdir -p "$cache"
cached="$cache/debian-$SUITE-$key.tar"

if [ -n "$out" ] && [ -e "$out" ] && [ ! -f "$out" ]; then
  say "$out exists and is not a regular file"
  exit 2
fi

deliver() {
  if [ -n "$out" ]; then
    rm -f "$out"
    ln "$cached" "$out" 2>/dev/null || cp "$cached" "$out"
  fi
  echo "$cached"
}

# One builder at a time per cache dir: a concurrent caller waits and then
# takes the cached tarball.
exec 9>"$cache/.lock"
if ! flock -n 9; then
  say "another build is running; waiting for it"
  flock 9
fi

if [ "$rebuild" -eq 0 ] && [ -s "$cached" ]; then
  say "cached: $cached ($(du -h "$cached" | cut -f1))"
  deliver
  exit 0
fi

if ! command -v mmdebstrap >/dev/null; then
  say "mmdebstrap is not installed (apt-get install mmdebstrap, or run scripts/deps.sh)"
  exit 1
fi

# The Debian stanzas of the host's apt sources, suites rewritten to ours
# only when they are the host's own Debian release. Third-party repositories
# (suites that are not bookworm, bookworm-updates or bookworm-security) are
# left out.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sources="$tmp/sources.list"
: >"$sources"
suite_re="^($SUITE|$SUITE-updates|$SUITE-security)\$"
if [ -n "$mirror" ]; then
  for s in "$SUITE" "$SUITE-updates"; do echo "deb $mirror $s main" >>"$sources"; done
fi
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [ -z "$mirror" ] || break
  [ -f "$f" ] || continue
  # one-line style: deb [opts] URI SUITE COMPONENTS...
  while read -r type rest; do
    [ "$type" = deb ] || continue
    set -f  # "[arch=amd64]" is a glob pattern
    # shellcheck disable=SC2086
    set -- $rest
    set +f
    if [ "${1:-}" != "${1#[}" ]; then
      while [ $# -gt 0 ] && [ "${1%]}" = "$1" ]; do shift; done
      shift
    fi
    [ $# -ge 3 ] || continue
    uri=$1 s=$2; shift 2
    [[ $s =~ $suite_re ]] || continue
    echo "deb $uri $s $*" >>"$sources"
  done <"$f"
done
for f in /etc/apt/sources.list.d/*.sources; do
  [ -z "$mirror" ] || break
  [ -f "$f" ] || continue
  # deb822: blank-line separated stanzas with Types/URIs/Suites/Components
  awk -v re="$suite_re" '
    function flush(   n, i, u, s, nu, ns) {
      if (types ~ /(^| )deb( |$)/ && uris != "" && suites != "" && tolower(enabled) != "no") {
        nu = split(uris, u, " "); ns = split(suites, s, " ")
        for (i = 1; i <= nu; i++)
          for (n = 1; n <= ns; n++)
            if (s[n] ~ re) print "deb " u[i] " " s[n] " " (comps == "" ? "main" : comps)
      }
      types = uris = suites = comps = enabled = ""
    }
    /^[ \t]*#/ { next }
    /^[ \t]*$/ { flush(); next }
    tolower($1) == "types:" { $1 = ""; types = $0 }
    tolower($1) == "uris:" { $1 = ""; uris = $0 }
    tolower($1) == "suites:" { $1 = ""; suites = $0 }
    tolower($1) == "components:" { $1 = ""; comps = $0 }
    tolower($1) == "enabled:" { enabled = $2 }
    END { flush() }' "$f" | sed 's/  */ /g' >>"$sources"
done
if [ ! -s "$sources" ]; then
  say "the host's apt sources name no Debian $SUITE mirror; using http://deb.debian.org/debian"
  echo "deb http://deb.debian.org/debian $SUITE main" >"$sources"
fi
sort -u -o "$sources" "$sources"
while read -r line; do say "mirror: $line"; done <"$sources"

dpkgopts=()
for o in "${DPKG_OPTS[@]}"; do dpkgopts+=(--dpkgopt="$o"); done

say "building Debian $SUITE with ${PACKAGES[*]} (mmdebstrap, a few minutes the first time)"
start=$(date +%s)
partial="$cache/.debian-$SUITE-$key.tar.partial"
rm -f "$partial"
# --skip=output/dev: no device nodes (warrend refuses them; it mounts its own
# /dev). --customize-hook: /workspace, no /root/.ssh (warrend refuses images that
# carry one), no machine-id, no leftover apt lists or logs.
# mmdebstrap runs in the background so that INT/TERM reach this script: they
# are forwarded, and the partial tarball removed once mmdebstrap has cleaned
# up (it finishes its current step first).
mm=""
stop() {
  trap - INT TERM
  if [ -n "$mm" ]; then kill -TERM "$mm" 2>/dev/null || true; wait "$mm" 2>/dev/null || true; fi
  rm -f "$partial"
  say "interrupted"
  exit 130
}
trap stop INT TERM
mmdebstrap --variant=minbase --mode=root --format=tar --quiet --skip=output/dev \
    --include="$(IFS=,; echo "${PACKAGES[*]}")" \
    "${dpkgopts[@]}" \
    --aptopt='Acquire::Languages "none"' \
    --customize-hook='mkdir -p "$1/workspace" && chmod 0755 "$1/workspace"' \
    --customize-hook='rm -rf "$1/root/.ssh" "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*.log "$1"/var/log/apt/*' \
    --customize-hook='rm -f "$1/etc/machine-id" && : >"$1/etc/machine-id"' \
    "$SUITE" "$partial" "$sources" </dev/null &
mm=$!
if ! wait "$mm"; then
  mm=""
  rm -f "$partial"
  say "mmdebstrap failed (is a Debian mirror reachable?)"
  exit 1
fi
mm=""
trap - INT TERM
mv -f "$partial" "$cached"
say "built $cached ($(du -h "$cached" | cut -f1)) in $(($(date +%s) - start))s"
deliver
