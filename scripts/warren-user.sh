#!/usr/bin/env bash
# The user `warrend --privsep --user NAME` drops to (docs/privsep.md, phase
# 5): created when missing as a system user with its own group, no home
# and no login shell. Run by `make run` and `make test` (needs root; a
# no-op when the user exists or when not root).
#   scripts/warren-user.sh [NAME]     (default: warren)
set -euo pipefail
name=${1:-warren}
if id -u "$name" >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "warren-user: $name does not exist and only root can create it; run as root: $0 $name" >&2
  exit 0
fi
shell=/usr/sbin/nologin
[ -x "$shell" ] || shell=/sbin/nologin
[ -x "$shell" ] || shell=/bin/false
if command -v useradd >/dev/null 2>&1; then
  useradd --system --user-group --no-create-home --home-dir /nonexistent --shell "$shell" "$name"
elif command -v adduser >/dev/null 2>&1; then
  adduser -S -D -H -h /nonexistent -s "$shell" "$name"
else
  echo "warren-user: neither useradd nor adduser found: create the system user $name by hand" >&2
  exit 1
fi
echo "warren-user: created system user $name (uid $(id -u "$name"), no login shell)" >&2
