#!/usr/bin/env bash
# Set up embody on a fresh Debian/Ubuntu machine: a virtual environment in .venv with
# embody and the extras named as arguments (e.g. `scripts/setup.sh dev pybullet`), plus the
# Debian headless-rendering libraries when they are missing. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

# Headless rendering (MuJoCo through EGL, OSMesa as the fallback).
debs=(libegl1 libopengl0 libegl-mesa0 libgl1-mesa-dri libosmesa6)
# The tests drive a real headless browser (the PRIMT labelling page): Debian's chromium, with the dev extra.
[[ " $* " == *" dev "* ]] && debs+=(chromium)
missing=()
if command -v dpkg-query >/dev/null; then
  for p in "${debs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; elif sudo -n true 2>/dev/null; then SUDO="sudo"; else SUDO="none"; fi
  if [ "$SUDO" = none ]; then
    echo "embody setup: rendering needs these Debian packages: ${missing[*]}" >&2
    echo "  install them with: sudo apt-get install -y ${missing[*]}  (training and tests without video still work)" >&2
  else
    echo "embody setup: installing ${missing[*]}" >&2
    $SUDO apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
fi

"$PYTHON" -c 'import sys; assert sys.version_info >= (3, 10), "embody needs python >= 3.10"'
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
PIP=(.venv/bin/python -m pip install -q --disable-pip-version-check)
# torch first: 2.13.0 (CPU) satisfies embody's range and installs fast where a local wheel exists;
# elsewhere pip resolves the newest torch the range admits.
.venv/bin/python -c 'import torch' 2>/dev/null || "${PIP[@]}" torch==2.13.0 2>/dev/null || "${PIP[@]}" "torch>=2.2"
extras=$(IFS=,; echo "$*")
"${PIP[@]}" -e ".${extras:+[$extras]}"
echo "embody setup: ready (.venv; extras: ${extras:-none})" >&2
