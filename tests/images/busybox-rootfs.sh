#!/usr/bin/env bash
# Populate DIR with a minimal root filesystem built from Debian's
# busybox-static: /bin/busybox, one symlink per applet, /bin/bash as a
# wrapper around busybox sh (the seed examples call bash), /etc basics and
# an empty /workspace. With --tar FILE, also write it as a tarball (what
# `warren image import` takes).
#   tests/images/busybox-rootfs.sh DIR [--tar FILE]
set -euo pipefail
dir=$1; shift
tarfile=
if [ "${1:-}" = "--tar" ]; then tarfile=$2; fi
bb=/bin/busybox
[ -x "$bb" ] || { echo "busybox-static is not installed (apt-get install busybox-static)" >&2; exit 1; }
mkdir -p "$dir"/{bin,sbin,usr/bin,usr/sbin,etc,tmp,root,workspace,proc,sys,dev,run,var/tmp}
chmod 1777 "$dir/tmp" "$dir/var/tmp"
chmod 700 "$dir/root"
cp "$bb" "$dir/bin/busybox"
for a in $("$bb" --list); do
  case "$a" in busybox) continue;; esac
  [ -e "$dir/bin/$a" ] || ln -s busybox "$dir/bin/$a"
done
cat > "$dir/bin/bash" <<'SH'
#!/bin/sh
exec /bin/busybox sh "$@"
SH
chmod 755 "$dir/bin/bash"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' > "$dir/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$dir/etc/group"
: > "$dir/etc/hosts"
: > "$dir/etc/resolv.conf"
if [ -n "$tarfile" ]; then
  tar --numeric-owner --owner=0 --group=0 -C "$dir" -cf "$tarfile" .
fi
