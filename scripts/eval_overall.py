"""Per-task and mixed-set tables of an eval, over the questions that EVERY policy has answered.

Usage: PYTHONPATH=src python scripts/eval_overall.py OUT/results.jsonl
An interrupted eval leaves some questions answered by some policies only; comparing policies on
different questions would mislead, so those are left out (and counted).
"""

import sys
from collections import defaultdict
from pathlib import Path

from openconductor.evaluation import load_records, markdown_table, summarize

records = load_records(Path(sys.argv[1]))
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
