#!/usr/bin/env bash
# Train SmolLM2-135M as a conductor on 2 CPU cores against the SIMULATED world (examples/pools/
# simulated_paper.toml), pick a checkpoint on validation questions, and score only that one on held-out
# test questions beside the baselines. 37 min on 2 idle cores with the default recipe (warm-up
# search + SFT 2.6 min, 60 GRPO steps 15 min, validation of 4 candidates 6 min, test of 2 rows 13 min
# at N=1000).
#   [TEST_ROWS=final] bash scripts/train_cpu_smollm2.sh [RUN_DIR] [TEST_N] [extra `conductor train` flags...]
# e.g. bash scripts/train_cpu_smollm2.sh runs/cpu-smollm2 1000
# The checkpoint rule is fixed before training: the warm-up, every saved checkpoint from step 40 on, and
# the final model, are scored on 200 validation questions (data.eval_seed = 2000: never trained on, not the test
# set); the most accurate one (ties -> the later) is the one tested (data.eval_seed = 1000).
# All numbers it prints are SIMULATED (the world's workers, not real models).
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=$(realpath -m "${1:-runs/cpu-smollm2}")
N=${2:-1000}
PY=${PYTHON:-.venv/bin/python}
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
"$PY" -m openconductor train examples/train_cpu_smollm2.toml --set "run.output_dir=$RUN" "${@:3}"

mkdir -p "$RUN/validation"
for ckpt in $(ls -d "$RUN"/warmup "$RUN"/checkpoint-* 2>/dev/null | sort -V) "$RUN/final"; do
  name=$(basename "$ckpt")
  step=${name#checkpoint-}
  [[ $name == final || $name == warmup || $step -ge 40 ]] || continue
  "$PY" -m openconductor train-eval examples/train_cpu_smollm2.toml --run "$RUN" --trained "$ckpt" --out "$RUN/validation/$name.json" \
      --n-eval 200 --set data.eval_seed=2000 --only final --no-moa --batch-size 32 --threads 2 > "$RUN/validation/$name.log" 2>&1
done
CHOSEN=$("$PY" -m openconductor train-select "$RUN")
echo "chosen on validation: $CHOSEN" | tee "$RUN/chosen_checkpoint.txt"
# The untrained row is skipped (it writes almost no parseable plan; see docs/training.md).
# TEST_ROWS="final" skips the warm-up row (halves the test's time).
# When the warm-up itself was chosen, its row would be the chosen row twice: run it once.
only=(); for row in ${TEST_ROWS:-warmup final}; do
  [[ $row == warmup && $(basename "$CHOSEN") == warmup ]] || only+=(--only "$row")
done
"$PY" -m openconductor train-eval examples/train_cpu_smollm2.toml --run "$RUN" --trained "$CHOSEN" --n-eval "$N" "${only[@]}" \
    --batch-size 32 --threads 2 | tee "$RUN/eval_table.md"
