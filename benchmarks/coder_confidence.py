"""Does a coder's confidence in its own program tell a right answer from a wrong one? Choosing between two coders per question by it.

Each coder is one policy's records from `conductor eval` (e.g. the 0.5B's code-then-run and the 1.5B's code-run-answer on
`examples/pools/local-two-coders.toml`), on training kinds (--train) and on held-out kinds (--test). For every record the
coder's step is read back from the trace store (the exact messages it was sent, and its program), and the program is
scored teacher-forced under the coder's own model (its GGUF, de-quantised by transformers; no new generation):

* mean_lp: the mean log-probability of the program's tokens;
* min_lp: the least likely token's log-probability;
* mean_ent: the mean entropy of the next-token distribution over the program.

Printed: per coder, how well each statistic separates its right answers from its wrong ones (AUC, pooled and within a
kind), then the rule "the larger coder's answer where its standardised confidence exceeds the smaller's by more than t",
with the statistic and t chosen on --train only, scored on --test against each coder alone with paired-bootstrap 95 %
intervals, and the oracle (either coder right). Scores are kept in --scores, so a second run makes no model calls.

Usage: PYTHONPATH=src python benchmarks/coder_confidence.py --pool POOL --train A.jsonl --test B.jsonl
       --arm WORKER=POLICY --arm WORKER=POLICY [--scores FILE] [--traces DB]
(the first --arm is the smaller coder, the one kept where the rule does not switch).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from openconductor.evaluation.records import EvalRecord, load_records
from openconductor.evaluation.summary import Interval, interval_text, paired_bootstrap
from openconductor.pool import load_pool

STATS = ("mean_lp", "min_lp", "mean_ent")
HIGHER_IS_SURER = {"mean_lp": 1, "min_lp": 1, "mean_ent": -1}
THRESHOLDS = [k / 4 for k in range(-12, 13)]


def program_stats(model: Any, tokenizer: Any, messages: list[dict], output: str) -> dict[str, float]:
    """The coder's confidence in ``output`` as its reply to ``messages``, teacher-forced (one forward pass)."""
    import torch

    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    output_ids = tokenizer(output, add_special_tokens=False)["input_ids"]
    if not output_ids:
        raise ValueError("an empty program has no confidence")
    with torch.no_grad():
        logits = model(torch.tensor([prompt_ids + output_ids])).logits[0, len(prompt_ids) - 1 : -1].float()
    logp = torch.log_softmax(logits, -1)
    chosen = logp[torch.arange(len(output_ids)), torch.tensor(output_ids)]
    entropy = -(logp.exp() * logp).sum(-1)
    return {"mean_lp": chosen.mean().item(), "min_lp": chosen.min().item(), "mean_ent": entropy.mean().item(), "tokens": len(output_ids)}


def auc(labels: list[int], scores: list[float]) -> float | None:
    """Probability that a right answer scores above a wrong one (ties count half); None without both."""
    right = [s for y, s in zip(labels, scores) if y]
    wrong = [s for y, s in zip(labels, scores) if not y]
    if not right or not wrong:
        return None
    return sum((r > w) + 0.5 * (r == w) for r in right for w in wrong) / (len(right) * len(wrong))


def standardiser(rows: list[dict], stat: str):
    """z-score of ``stat`` by the mean and spread of the rows given (the training records), oriented so higher is surer."""
    values = [r[stat] for r in rows]
    mean, spread = statistics.mean(values), statistics.pstdev(values) or 1.0
    return lambda value: HIGHER_IS_SURER[stat] * (value - mean) / spread


def switches(pairs: list[tuple[dict, dict]], stat: str, t: float, train_pairs: list[tuple[dict, dict]]) -> list[bool]:
    """Per question, whether the rule takes the larger coder's answer: its z exceeds the smaller's by more than t."""
    z_small = standardiser([s for s, _ in train_pairs], stat)
    z_large = standardiser([b for _, b in train_pairs], stat)
    return [z_large(big[stat]) - z_small(small[stat]) > t for small, big in pairs]


def rule_picks(pairs: list[tuple[dict, dict]], stat: str, t: float, train_pairs: list[tuple[dict, dict]]) -> list[int]:
    """Per question, 1 where the chosen answer is right."""
    return [int(big["correct"] if switch else small["correct"]) for (small, big), switch in zip(pairs, switches(pairs, stat, t, train_pairs))]


def fit_rule(train_pairs: list[tuple[dict, dict]]) -> tuple[str, float]:
    """The statistic and threshold with the most right answers on the training pairs (ties: the smaller |t|, then STATS' order)."""
    return max(((stat, t) for stat in STATS for t in THRESHOLDS),
               key=lambda st: (sum(rule_picks(train_pairs, st[0], st[1], train_pairs)), -abs(st[1]), -STATS.index(st[0])))


def coder_step(run, worker: str) -> tuple[list[dict], str] | None:
    """The worker's first step in a stored run as (messages sent, program), or None where that step gave no program.
    Only the first: in code-run-answer the same coder also writes the answer, which is not a program."""
    for step in run.steps:
        if step.worker_name == worker:
            return (step.messages, step.output) if step.status == "ok" and step.output.strip() else None
    raise SystemExit(f"run {run.id} has no step of worker {worker!r}: does that --arm name the coder of its policy?")


def score_records(records: list[EvalRecord], worker: str, model_name: str, traces, cached: dict[str, dict], save) -> set[str]:
    """Add to ``cached`` (keyed by model and run id) the statistics of every record's program not scored yet, saving as it
    goes; return the run ids whose coder step gave no program (not cached: a later run looks again)."""
    from openconductor.traces import TraceNotFound

    steps, no_program = {}, set()
    for record in records:  # every trace first, so that a missing one stops the run before a model loads
        if f"{model_name}:{record.run_id}" in cached:
            continue
        try:
            step = coder_step(traces.get(record.run_id), worker)
        except TraceNotFound as exc:
            raise SystemExit(f"{exc}: score the records where they were run, or pass --traces with their store") from None
        if step is None:
            no_program.add(record.run_id)
        else:
            steps[record.run_id] = step
    if not steps:
        return no_program
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from openconductor import model_files
    from openconductor.providers.local_gguf import resolve_model

    weights = model_files.resolve_model(f"gguf:{resolve_model(model_name)[0]}")  # de-quantised once, then kept
    tokenizer = AutoTokenizer.from_pretrained(weights)
    model = AutoModelForCausalLM.from_pretrained(weights).eval()
    for n, (run_id, (messages, program)) in enumerate(steps.items(), 1):
        cached[f"{model_name}:{run_id}"] = program_stats(model, tokenizer, messages, program)
        print(f"  {worker}: {n}/{len(steps)}", end="\r", file=sys.stderr, flush=True)
        if n % 10 == 0 or n == len(steps):
            save()
    print(file=sys.stderr)
    return no_program


def pct(rights: list[int]) -> str:
    return f"{100 * sum(rights) / len(rights):.1f} %"


def interval(a: list[int], b: list[int]) -> str:
    mean, low, high = paired_bootstrap(a, b)
    return interval_text(Interval(baseline="", n=len(a), mean=mean, low=low, high=high))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", required=True, help="the pool file the records were made with (names the coders' models)")
    parser.add_argument("--train", type=Path, required=True, help="records on training kinds: the rule is chosen here")
    parser.add_argument("--test", type=Path, required=True, help="records on held-out kinds: the rule is scored here")
    parser.add_argument("--arm", action="append", required=True, metavar="WORKER=POLICY", help="twice: the smaller coder first")
    parser.add_argument("--scores", type=Path, help="a JSON file of scores kept between runs")
    parser.add_argument("--traces", type=Path, help="the trace store the records' runs are in (default: the user's)")
    args = parser.parse_args()
    arms = [a.split("=", 1) for a in args.arm]
    if len(arms) != 2 or any(len(a) != 2 for a in arms) or arms[0][0] == arms[1][0]:
        parser.error(f"exactly two --arm WORKER=POLICY with two different workers, the smaller coder first: got {args.arm}")
    pool = load_pool(args.pool)
    workers = {w.name: w for w in pool.workers}
    for worker, _ in arms:
        if worker not in workers:
            parser.error(f"worker {worker!r} is not in {args.pool} (it has {', '.join(workers)})")

    from openconductor.traces import TraceStore

    cached: dict[str, dict] = {}
    if args.scores and args.scores.exists():
        try:
            cached = json.loads(args.scores.read_text())
        except ValueError as exc:
            parser.error(f"--scores {args.scores} is not JSON ({exc}): move it away to score again")
        if not isinstance(cached, dict):
            parser.error(f"--scores {args.scores} is not a scores file this script wrote: move it away to score again")

    def save() -> None:  # whole or not at all: an interrupted write leaves the previous file
        if args.scores:
            partial = args.scores.with_name(args.scores.name + ".partial")
            partial.write_text(json.dumps(cached))
            os.replace(partial, args.scores)

    traces = TraceStore(args.traces)
    records: dict[tuple[str, str], list[EvalRecord]] = {}
    for split, path in (("train", args.train), ("test", args.test)):
        for worker, policy in arms:
            records[split, worker] = [r for r in load_records(path) if r.policy == policy and r.repeat == 0]
            if not records[split, worker]:
                parser.error(f"no records of {policy} in {path}")
            if any(not r.run_id for r in records[split, worker]):
                parser.error(f"records of {policy} in {path} without a run_id: their programs cannot be read back")
    shared = {(r.task, r.question_id) for r in records["train", arms[0][0]]} & {(r.task, r.question_id) for r in records["test", arms[0][0]]}
    if shared:
        parser.error(f"--train and --test share {len(shared)} questions (e.g. {sorted(shared)[0]}): the rule must be scored on questions it was not chosen on")
    no_program: set[str] = set()
    for worker, _ in arms:  # one model load a coder
        no_program |= score_records(records["train", worker] + records["test", worker], worker, workers[worker].model, traces, cached, save)
    split_pairs: dict[str, list[tuple[dict, dict]]] = {}
    for split in ("train", "test"):
        by_question: dict[tuple[str, str], dict[str, dict]] = defaultdict(dict)
        for worker, _ in arms:
            for r in records[split, worker]:
                if r.run_id not in no_program:
                    stats = cached[f"{workers[worker].model}:{r.run_id}"]
                    by_question[(r.task, r.question_id)][worker] = dict(stats, correct=r.correct, task=r.task)
        split_pairs[split] = [(q[arms[0][0]], q[arms[1][0]]) for _, q in sorted(by_question.items()) if len(q) == 2]
        if not split_pairs[split]:
            parser.error(f"no question of --{split} has a program from both coders")
        print(f"--{split}: {len(split_pairs[split])} questions with a program from both coders; "
              f"{len(by_question) - len(split_pairs[split])} left out (a coder wrote no program, or answered no record)")
    print()
    print("| coder | split | questions | right | " + " | ".join(f"AUC {s} (within a kind)" for s in STATS) + " |")
    print("|---|---|---|---|" + "---|" * len(STATS))
    for i, (worker, policy) in enumerate(arms):
        for split, pairs in split_pairs.items():
            rows = [p[i] for p in pairs]
            labels = [int(r["correct"]) for r in rows]
            kinds = defaultdict(list)
            for r in rows:
                kinds[r["task"]].append(r)
            cells = []
            for stat in STATS:
                sign = HIGHER_IS_SURER[stat]
                pooled = auc(labels, [sign * r[stat] for r in rows])
                within = [a for rs in kinds.values() if (a := auc([int(r["correct"]) for r in rs], [sign * r[stat] for r in rs])) is not None]
                cells.append(f"{pooled:.2f} ({statistics.mean(within):.2f}, {len(within)} kinds)" if pooled is not None and within else "—")
            print(f"| {worker}: {policy} | {split} | {len(rows)} | {pct(labels)} | " + " | ".join(cells) + " |")

    stat, t = fit_rule(split_pairs["train"])
    print(f"\nRule chosen on --train: the larger coder where its standardised {stat} exceeds the smaller's by more than {t:+.2f}.\n")
    print("| split | questions | rule | switched | smaller coder | larger coder | rule vs smaller | rule vs larger | either right (oracle) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for split, pairs in split_pairs.items():
        picks = rule_picks(pairs, stat, t, split_pairs["train"])
        small = [int(s["correct"]) for s, _ in pairs]
        large = [int(b["correct"]) for _, b in pairs]
        switched = sum(switches(pairs, stat, t, split_pairs["train"]))
        either = [max(a, b) for a, b in zip(small, large)]
        print(f"| {split} | {len(pairs)} | {pct(picks)} | {switched} | {pct(small)} | {pct(large)} | {interval(picks, small)} | "
              f"{interval(picks, large)} | {pct(either)} |")


if __name__ == "__main__":
    main()
