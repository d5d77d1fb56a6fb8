"""One row per policy over every task of an eval (the mixed set), from its results.jsonl.

Usage: PYTHONPATH=src python scripts/eval_overall.py OUT/results.jsonl
"""

import sys
from pathlib import Path

from openconductor.evaluation import load_records, markdown_table, summarize

records = [r.model_copy(update={"task": "mixed (all tasks)"}) for r in load_records(Path(sys.argv[1]))]
order = {p: i for i, p in enumerate(dict.fromkeys(r.policy for r in records))}
print(markdown_table(sorted(summarize(records), key=lambda row: order[row.policy])))
