#!/bin/sh
# scripts/check-merge-markers.sh [DIR]: fails when a tracked file still holds
# a merge conflict's markers (a line starting "<<<<<<< ", "=======" alone or
# ">>>>>>> "), as docs/privsep.md once did after a merge. Run by `make
# test-unit` (meson test "merge-markers"). Outside a git checkout: skipped.
cd "${1:-.}" || exit 1
git rev-parse --git-dir >/dev/null 2>&1 || { echo "not a git checkout: skipped"; exit 77; }
hits=$(git grep -n -I -E '^(<<<<<<< |=======$|>>>>>>> )' -- . ':!scripts/check-merge-markers.sh')
if [ -n "$hits" ]; then
	echo "merge conflict markers left in tracked files (resolve them):"
	echo "$hits"
	exit 1
fi
echo "no merge conflict markers"
