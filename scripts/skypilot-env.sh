#!/usr/bin/env bash
# Best effort: a test-only virtual environment with SkyPilot, whose parser checks the
# skypilot launcher's generated tasks (tests/launch/test_skypilot.py). SkyPilot cannot be
# installed beside the project's pins (every release from 0.9 on needs click<8.2; the lock
# pins 8.5.1), so it lives in its own venv: ~/.cache/ccpo-lab-skypilot, or $1. Built once
# (pip keeps the wheels), kept while its stamp matches SKY_VERSION. Without Python's venv
# or the network the tests skip and say why; this script never fails the caller.
set -u
SKY_VERSION=0.14.1
venv=${1:-$HOME/.cache/ccpo-lab-skypilot}
stamp="$venv/.ccpo-lab-skypilot-$SKY_VERSION"
[[ -f $stamp ]] && exit 0
here=$(cd "$(dirname "$0")/.." && pwd)
log=/tmp/ccpo-skypilot-env.log
echo "skypilot-env: building $venv (skypilot==$SKY_VERSION)" >&2
{ rm -rf "$venv" && python3 -m venv "$venv" \
  && "$venv/bin/python" -m pip install -q --upgrade pip \
  && "$venv/bin/python" -m pip install -q -c "$here/constraints.txt" "skypilot==$SKY_VERSION" \
  && touch "$stamp"; } >"$log" 2>&1 \
  || echo "skypilot-env: failed (see $log): the SkyPilot parser tests will skip" >&2
exit 0
