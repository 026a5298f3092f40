#!/bin/bash
# Hook 2 (issue 15), DAgger rounds: the student of round k is the operated policy of round k+1.
#
#   benchmarks/vla_dagger_rounds.sh BASE DEMOS OUT [SEED]     (ARMS="sirius bc control", STEPS=1000, EPS=150,
#                                                              LR_SCHEDULE=constant|cosine)
#
# BASE: a TinyVLA folder (the round-0 student); DEMOS: the LeRobot v3 demonstrations it was trained on; OUT: a folder.
# Per arm and round k = 1..3: the simulated operator (the residual pair upright/assets/policies/panda_lift_residual plays the
# human; takeover when the cube is not grasped 1.0 s in, hand-back once it is 3 cm up) logs EPS episodes of the
# current student with the daemon's columns; the student is fine-tuned for STEPS steps on DEMOS + every round's
# interventions with the arm's weighting (`control`: DEMOS only, no operator, same steps) and evaluated on 500
# episodes (seed 0). Prints one line per evaluation. Needs MENAGERIE_ROOT. Results: docs/vla_residual.md, session 13.
set -euo pipefail
BASE=$1; DEMOS=$2; D=$3; SEED=${4:-0}; STEPS=${STEPS:-1000}; EPS=${EPS:-150}; LR_SCHEDULE=${LR_SCHEDULE:-constant}
mkdir -p "$D"
ev() { python -m upright.vla.evaluate_lift --policy "$1" --episodes 500 --num-envs 100 --seed 0 --out "$1/eval0" > /dev/null
       echo "$(date +%T) $1 $(grep '| `' "$1/eval0/eval.md" | cut -d'|' -f4)"; }
for arm in ${ARMS:-sirius bc control}; do
  prev=$BASE; ds=(--dataset "$DEMOS")
  for k in 1 2 3; do
    out=$D/${arm}_s${SEED}_r$k
    w=$arm
    if [ "$arm" = control ]; then w=bc; else
      int=$D/int_${arm}_s${SEED}_r$k
      [ -d "$int" ] || python -m upright.vla.sim_operator --policy "$prev" --episodes "$EPS" --num-envs 25 \
        --seed $((300 + 10 * k + SEED)) --hand-back-height 0.03 --operator upright/assets/policies/panda_lift_residual --out "$int"
      ds+=(--dataset "$int")
    fi
    [ -f "$out/eval0/eval.md" ] || {
      python -m upright.vla.finetune --base "$prev" "${ds[@]}" --weighting "$w" --steps "$STEPS" --lr 3e-4 \
        --lr-schedule "$LR_SCHEDULE" --seed "$SEED" --out "$out" > "$out.log"
      ev "$out"; }
    prev=$out
  done
done
