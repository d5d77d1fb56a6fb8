"""Per policy: how the correct answers of a reasoning-gym eval were extracted (marker / boxed / last number).

Usage: python benchmarks/eval_breakdown.py OUT/results.jsonl
A correct answer found only as "the last number in the reply" may be a coincidence (e.g. a reply that
restates the question); this shows how much of each accuracy rests on it.
"""

import sys
from collections import Counter, defaultdict
from pathlib import Path

from openconductor.evaluation import load_records
from openconductor.tasks.reasoning_gym_tasks import extract_answer_how

counts: dict[str, Counter] = defaultdict(Counter)
totals: Counter = Counter()
for record in load_records(Path(sys.argv[1])):
    totals[record.policy] += 1
    if record.correct:
        counts[record.policy][extract_answer_how(record.final_answer)[1]] += 1
print("| policy | n | correct | by marker/boxed | by last number only |")
print("|---|---|---|---|---|")
for policy, n in totals.items():
    c = counts[policy]
    print(f"| {policy} | {n} | {sum(c.values())} | {c['marker'] + c['boxed']} | {c['last number']} |")
