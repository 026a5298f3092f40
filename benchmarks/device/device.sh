#!/usr/bin/env bash
# Device-side entry point of the prepared GPU session (benchmarks/device/README.md). Run from the repository root.
#
#   bash benchmarks/device/device.sh receive          # a staging call: check the carried chunk, keep it in /tmp
#   bash benchmarks/device/device.sh install          # assemble, check, pip install --no-index, import check
#   bash benchmarks/device/device.sh run [ARGS...]    # the last call: receive, install, then gpu_session.py ARGS
#
# Environment: OUT (the device tool's folder that comes back; default /tmp/upright_out), PYTHON (default python3),
# UPRIGHT_STAGE (default /tmp/upright_stage), UPRIGHT_SITE (the --target folder, default /tmp/upright_site).
set -euo pipefail
cd "$(dirname "$0")/../.."
STAGE=${UPRIGHT_STAGE:-/tmp/upright_stage}
SITE=${UPRIGHT_SITE:-/tmp/upright_site}
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/upright_out}
mkdir -p "$OUT"
cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in receive | install | run) ;; *) echo "usage: device.sh receive|install|run [gpu_session.py args]" >&2; exit 2 ;; esac

"$PY" benchmarks/device/stage.py receive --src .devstage --dest "$STAGE"
[ "$cmd" = receive ] && exit 0

t0=$(date +%s)  # the call's clock: UPRIGHT_CALL_S (default 585 of a 600 s call) minus install time is left to run
if [ ! -f "$SITE/.installed" ]; then
  "$PY" benchmarks/device/stage.py assemble --dest "$STAGE" --extract "$STAGE/unpacked"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" "$STAGE"/unpacked/wheels/*.whl
  touch "$SITE/.installed"
fi
# upright is the repository root itself (package-dir "upright" = "."): import it through a link named upright
mkdir -p /tmp/upright_pkgs && ln -sfn "$PWD" /tmp/upright_pkgs/upright
export PYTHONPATH="/tmp/upright_pkgs:$SITE${PYTHONPATH:+:$PYTHONPATH}"
export MENAGERIE_ROOT="$STAGE/unpacked/menagerie" PYTHONUNBUFFERED=1
# the packages that need no torch import here (a rehearsal on a Python without torch runs this far)
"$PY" -c "import warp, mujoco, mujoco_warp, hydra, omegaconf, gymnasium, git; print('installed:', \
'warp', warp.__version__, 'mujoco', mujoco.__version__, 'mujoco_warp', mujoco_warp.__version__)"
echo "install step took $(($(date +%s) - t0)) s"
[ "$cmd" = install ] && exit 0

left=$((${UPRIGHT_CALL_S:-585} - ($(date +%s) - t0)))
exec "$PY" benchmarks/device/gpu_session.py --out "$OUT" --deadline-s "$left" "$@"
