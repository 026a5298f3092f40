#!/usr/bin/env bash
# Rehearse the prepared GPU session on this machine's CPU (benchmarks/device/README.md), step by step:
#   1. pack the wheels + the G1 model into .devstage/ chunks (stage.py pack), as for the device;
#   2. one simulated call per chunk into a device-like copy of the repository (the working tree that travels, the
#      call's carried paths, earlier ignored files kept), each running device.sh: receive ..., then install (chunks
#      joined and SHA-256 checked, pip install --no-index --target, import check) with Python 3.12, the device's;
#   3. MuJoCo Warp from that --target folder steps a model on Warp's CPU device (Python 3.12);
#   4. gpu_session.py --rehearse (CPU, tiny sizes): the vlm_reward cost (Warp renderer), benchmark, training
#      checkpointed into OUT, SIGTERM at the deadline;
#   5. a second session resumes from the checkpoint the first returned, and must continue its iterations;
#   6. a later call on that warm machine, carrying nothing and without --resume, must continue the run again.
# Usage: bash benchmarks/device/rehearse.sh WHEEL_DIR [PY312 [IMAGE_SITE]]: Python 3.12 for steps 2-3 (default
# python3.12), with IMAGE_SITE on its path standing for the device image's own packages (numpy, PyYAML, absl-py,
# etils[epath], packaging, cloudpickle, typing_extensions; README.md says how to make it).
set -euo pipefail
cd "$(dirname "$0")/../.."
WHEELS=${1:?usage: rehearse.sh WHEEL_DIR [PY312]}
PY312=${2:-python3.12}
IMAGE=${3:-}
R=${UPRIGHT_REHEARSE_DIR:-/tmp/upright_rehearse}
rm -rf "$R" && mkdir -p "$R/device_repo"
export MENAGERIE_ROOT=${MENAGERIE_ROOT:-$(realpath ../shared/menagerie)}

echo "== 1. pack"
python benchmarks/device/stage.py pack --wheels "$WHEELS" --menagerie "$MENAGERIE_ROOT" --robots unitree_g1 | tee "$R/plan.txt"
n=$(python -c "import json; print(len(json.load(open('.devstage/manifest.json'))['chunks']))")

sync_call() {  # what one device call sends: the working tree that travels + the carried paths
  git ls-files -co --exclude-standard -z | tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$R/device_repo"
  for path in "$@"; do mkdir -p "$R/device_repo/$(dirname "$path")"; cp -a "$path" "$R/device_repo/$path"; done
}
echo "== 2. $n simulated calls"
export UPRIGHT_STAGE="$R/stage" UPRIGHT_SITE="$R/site"
for k in $(seq 0 $((n - 1))); do
  chunk=$(printf "chunk_%02d" "$k")
  sync_call .devstage/manifest.json ".devstage/$chunk"
  step=receive
  [ "$k" -eq $((n - 1)) ] && step=install
  (cd "$R/device_repo" && OUT="$R/out0" PYTHON="$PY312" PYTHONPATH="$IMAGE" bash benchmarks/device/device.sh $step)
done

echo "== 3. MuJoCo Warp from the installed folder, Python 3.12, Warp's CPU device"
PYTHONPATH="$R/site${IMAGE:+:$IMAGE}" "$PY312" - <<'EOF'
import mujoco, numpy as np, warp as wp
wp.config.log_level = wp.LOG_WARNING
import mujoco_warp as mjw
m = mujoco.MjModel.from_xml_string("<mujoco><worldbody><geom type='plane' size='1 1 .1'/><body pos='0 0 .2'>"
                                   "<freejoint/><geom type='sphere' size='.1'/></body></worldbody></mujoco>")
with wp.ScopedDevice("cpu"):
    mw, dw = mjw.put_model(m), mjw.put_data(m, mujoco.MjData(m), nworld=2)
    for _ in range(200):
        mjw.step(mw, dw)
    z = dw.qpos.numpy()[:, 2]
assert np.allclose(z, 0.1, atol=5e-3), z
print("mujoco_warp on Python 3.12 from the --target folder: the sphere rests at z =", z)
EOF

echo "== 4. session 1 (fresh)"
(cd "$R/device_repo" && python benchmarks/device/gpu_session.py --rehearse --out "$R/out1" --deadline-s 170 \
  --train-min-s 70 --ckpt-every-s 15 --save-interval 2 --run-root "$R/runs" \
  --vlm-args "--num-envs 4 --size 64 --arch tiny --steps 1 --warmup 1 --backend warp --sim-backend warp")
grep -q "| 4 | WarpFrameRenderer |" "$R/out1/report.md" || { echo "REHEARSAL FAILED: no vlm_reward cost row" >&2; exit 1; }
ls -la "$R/out1"
n_out=$(ls "$R/out1" | wc -l)
big=$(find "$R/out1" -type f -size +16M | wc -l)
[ "$n_out" -le 8 ] && [ "$big" -eq 0 ] || { echo "REHEARSAL FAILED: OUT has $n_out files, $big over 16 MiB" >&2; exit 1; }
rm -rf .devstage/resume  # only what session 1 returned
python benchmarks/device/stage.py join --src "$R/out1" --out .devstage/resume
ckpt=$(ls .devstage/resume/model_*.pt | head -1)
first=$(basename "$ckpt" .pt | cut -d_ -f2)

echo "== 5. session 2 resumes from $(basename "$ckpt") (rebuilt from its parts, carried as .devstage/resume/)"
sync_call .devstage/resume
(cd "$R/device_repo" && python benchmarks/device/gpu_session.py --rehearse --out "$R/out2" --deadline-s 110 \
  --train-min-s 70 --ckpt-every-s 15 --save-interval 2 --backends native --no-profile --resume .devstage/resume \
  --run-root "$R/runs2")
grep -h "Resuming" "$R/out2/train.log"
second=$(python -c "import json; print(json.load(open('$R/out2/checkpoint.json'))['name'][6:-3])")
echo "checkpoints: session 1 returned model_$first, session 2 returned model_$second"
[ "$second" -gt "$first" ] || { echo "REHEARSAL FAILED: the resumed run did not continue" >&2; exit 1; }

echo "== 6. a later call on the warm machine: nothing carried, no --resume; it continues the run it finds"
rm -rf .devstage/resume "$R/device_repo/.devstage/resume"  # the device drops a carried path the next call does not carry
sync_call
(cd "$R/device_repo" && python benchmarks/device/gpu_session.py --rehearse --out "$R/out3" --deadline-s 110 \
  --train-min-s 70 --ckpt-every-s 15 --save-interval 2 --backends native --no-profile --run-root "$R/runs2")
grep -h "Resuming" "$R/out3/train.log"
third=$(python -c "import json; print(json.load(open('$R/out3/checkpoint.json'))['name'][6:-3])")
echo "checkpoints: session 2 returned model_$second, the later call model_$third"
[ "$third" -gt "$second" ] || { echo "REHEARSAL FAILED: the later call did not continue the run" >&2; exit 1; }
echo "REHEARSAL PASSED"
