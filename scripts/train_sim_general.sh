#!/usr/bin/env bash
# The general conductor for SIMULATED world-v3 pools, end to end on 2 CPU cores (docs/simulation.md): the rank-lookup
# recipe (workers named by their place in the pool's measured ranking), its copy targets "mixed" (the training pool's
# own searched plans, the rank lookup's on the 60 generated pools), a time-boxed copy (SmolLM2-135M + LoRA), then its
# table on the training pool and on unseen pools.
#   bash scripts/train_sim_general.sh [RUN_DIR] [UNSEEN_SEEDS]
# RANKING=area (default; "Fifth step", about 2 h): places in each area's ranking, a fresh copy in a 50-minute box.
# RANKING=subtopic (how the former builtin:sim-subtopic was made, about 2 h 15 min): every pool profiled per
#   subtopic, targets the subtopic table at a token price of 0.03 (960 training-pool examples), the ranking view,
#   copied from the former builtin:sim-general (learning rate 5e-4) in a 75-minute box; the tables score the subtopic lookups.
# RANKING=subtopic-own (a probe, not shipped; about 2 h 30 min from the former builtin:sim-subtopic): as subtopic, but the
#   training pool's own plans searched at 0.012 (its per-bucket table, the bar there) beside the generated pools' subtopic
#   table at 0.03, 16 examples a generated pool, copied on from sim-subtopic in a 55-minute box.
# RANKING=subtopic-bucket (how builtin:sim-bucket was made, about 3 h): as subtopic-own, but the training pool's own
#   plans searched as the benchmark's per-bucket lookup is (240 questions a bucket: they are that table), copied for 130
#   batches (an 80-minute box at most), and the training pool scored on two held-out sets side by side (seeds 1000, 2000).
# sim-general and sim-subtopic, the conductors these copies start from, no longer ship: they are read from the archive
#   commit (docs/history.md) into RUN/init-NAME.
# Env: COPY_MAX_MIN (the copy's time box), PYTHON. Every number it prints is SIMULATED.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=$(realpath -m "${1:-runs/sim-general}")
SEEDS=${2:-$(seq -s, 901 920)}
PY=${PYTHON:-.venv/bin/python}
CONFIG=examples/train_sim_general_ranks.toml
ARCHIVE=e4ee2c3  # archive/wave3-research
case ${RANKING:-area} in
  area)
    RECIPE=(); COPY=(); BOX=50; TRAINING_POOL=(); UNSEEN=() ;;
  subtopic)
    RECIPE=(--training-pool-examples 960 --token-weight 0.03 --ranking subtopic --set prompt.show=ranking)
    COPY=(--init archived:sim-general --lr 5e-4); BOX=75
    TRAINING_POOL=(--rank-price 0.03); UNSEEN=(--rank subtopic:0.012 --rank subtopic:0.03) ;;
  subtopic-own)
    RECIPE=(--training-pool-examples 960 --per-pool 16 --token-weight 0.03 --training-pool-token-weight 0.012 --ranking subtopic --set prompt.show=ranking)
    COPY=(--init archived:sim-subtopic --lr 5e-4); BOX=55
    TRAINING_POOL=(--rank-price 0.03); UNSEEN=(--rank subtopic:0.012 --rank subtopic:0.03) ;;
  subtopic-bucket)
    RECIPE=(--training-pool-examples 960 --per-pool 16 --token-weight 0.03 --training-pool-token-weight 0.012 --training-pool-search 80,160
            --ranking subtopic --set prompt.show=ranking)
    COPY=(--init archived:sim-subtopic --lr 5e-4 --max-batches 130); BOX=80
    TRAINING_POOL=(--rank-price 0.03 --eval-seed 1000,2000 --jobs 2 --copy-data "$RUN/copy_data.json.gz"); UNSEEN=(--rank subtopic:0.012 --rank subtopic:0.03) ;;
  *) echo "RANKING=${RANKING}: use area, subtopic, subtopic-own or subtopic-bucket" >&2; exit 2 ;;
esac
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$RUN"
if [[ ${COPY[1]:-} == archived:* ]]; then  # a superseded shipped conductor, from the commit that still shipped it
  name=${COPY[1]#archived:}; COPY[1]="$RUN/init-$name"; mkdir -p "${COPY[1]}"
  for f in adapter_config.json adapter_model.safetensors openconductor.json; do
    git show "$ARCHIVE:src/openconductor/data/conductors/$name/$f" > "${COPY[1]}/$f"
  done
fi
"$PY" -m openconductor.train.sim_general "$CONFIG" --stage search --targets mixed "${RECIPE[@]}" --output-dir "$RUN" 2>&1 | tee "$RUN/search.log"
"$PY" -m openconductor.train.sim_general "$CONFIG" --stage copy --targets mixed "${RECIPE[@]}" --copy-data "$RUN/copy_data.json.gz" --output-dir "$RUN" \
    "${COPY[@]}" --epochs 1 --batch-size 8 --copy-max-minutes "${COPY_MAX_MIN:-$BOX}" 2>&1 | tee "$RUN/copy.log"
"$PY" benchmarks/sim_training_pool.py --conductor "$RUN/warmup" --n 1000 "${TRAINING_POOL[@]}" | tee "$RUN/training_pool_table.md" || true
"$PY" benchmarks/unseen_pools.py --seeds "$SEEDS" --n 64 --conductor "$RUN/warmup" "${UNSEEN[@]}" | tee "$RUN/unseen_pools_table.md"
