"""Per-task and mixed-set tables of an eval, over the questions that EVERY policy has answered.

Usage: PYTHONPATH=src python benchmarks/eval_overall.py OUT/results.jsonl [MORE/results.jsonl ...] [--against POLICY ...]
An interrupted eval leaves some questions answered by some policies only; comparing policies on
different questions would mislead, so those are left out (and counted). Several results files (e.g. a
new policy evaluated later on the same questions and task seed) are read as one. `--against P` adds each
policy's accuracy difference to P on the mixed set, with a paired-bootstrap 95 % interval over questions.
"""

import argparse
from collections import defaultdict
from pathlib import Path

from openconductor.evaluation import load_records, markdown_table, paired_bootstrap, summarize

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("results", type=Path, nargs="+")
ap.add_argument("--against", action="append", default=[], metavar="POLICY")
args = ap.parse_args()
records = [r for path in args.results for r in load_records(path)]
policies = list(dict.fromkeys(r.policy for r in records))
answered = defaultdict(set)
for r in records:
    answered[(r.task, r.question_id)].add(r.policy)
complete = {q for q, seen in answered.items() if seen >= set(policies)}
kept = [r for r in records if (r.task, r.question_id) in complete]
order = {p: i for i, p in enumerate(policies)}
print(f"{len(complete)} question(s) answered by all {len(policies)} policies; {len(answered) - len(complete)} left out\n")
print(markdown_table(sorted(summarize(kept), key=lambda row: (row.task, order[row.policy]))) + "\n")
mixed = [r.model_copy(update={"task": "mixed (all tasks)"}) for r in kept]
print(markdown_table(sorted(summarize(mixed), key=lambda row: order[row.policy])))
questions = sorted(complete)
correct = {p: {(r.task, r.question_id): int(r.correct) for r in kept if r.policy == p and r.repeat == 0} for p in policies}
for base in args.against:
    if base not in correct:
        raise SystemExit(f"--against {base!r}: no such policy (have {', '.join(policies)})")
    print(f"\n| policy | vs {base} (points, paired-bootstrap 95 % CI, {len(questions)} questions) |\n|---|---|")
    for p in policies:
        if p != base:
            mean, lo, hi = paired_bootstrap([correct[p][q] for q in questions], [correct[base][q] for q in questions])
            print(f"| {p} | {100 * mean:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}] |")
