#!/usr/bin/env bash
# Prepare the local state dir used by `make run`: nothing to do yet beyond
# making sure the directory exists. Later: a ready base image.
set -euo pipefail
build=$1; state=$2
mkdir -p "$state"
