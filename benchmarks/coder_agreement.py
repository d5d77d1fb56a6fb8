"""Does a coder that agrees with itself have the right answer? Choosing between two coders per question by agreement.

Each coder is given by two or more runs of its programs on the same questions (records of `conductor eval`, e.g. one
at the pool's temperature and one sampled hotter). Per question, scored from the records and without new calls:

* agreement: the coder whose runs all extracted the same answer, where exactly one coder's runs agree; otherwise the
  --fallback coder's first run (choose the fallback on training kinds, not on the questions scored here);
* majority: the answer most runs of either coder extracted, where one answer leads with two or more; otherwise the
  fallback's first run;
* any right: some run has the right answer (an oracle: the room a perfect choice among these runs would have).

Printed against every run alone with paired-bootstrap 95 % intervals, and per kind. Only questions that every run
answered count.

Usage: PYTHONPATH=src python benchmarks/coder_agreement.py --run NAME RESULTS.jsonl POLICY [--run ...] --fallback NAME
(a NAME given twice or more is one coder's runs; exactly two coders).
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from pathlib import Path

from openconductor.evaluation.records import EvalRecord, load_records
from openconductor.evaluation.summary import paired_bootstrap
from openconductor.graders.exact import normalize_text
from openconductor.tasks.kinds import kind_name


def answer(record: EvalRecord) -> str | None:
    """The extracted answer as the exact grader compares answers (case, spaces, quotes, a final period), or None."""
    return (normalize_text(record.extracted) or None) if record.extracted else None


def choose(runs: dict[str, list[EvalRecord]], fallback: str) -> tuple[EvalRecord, EvalRecord]:
    """(the agreement rule's record, the majority rule's record) for one question's runs, keyed by coder."""
    first = runs[fallback][0]
    steady = [c for c, rs in runs.items() if answer(rs[0]) is not None and len({answer(r) for r in rs}) == 1]
    agreed = runs[steady[0]][0] if len(steady) == 1 else first
    votes = Counter(a for rs in runs.values() for a in map(answer, rs) if a is not None)
    ranked = votes.most_common()
    if ranked and ranked[0][1] >= 2 and (len(ranked) == 1 or ranked[1][1] < ranked[0][1]):
        return agreed, next(r for rs in runs.values() for r in rs if answer(r) == ranked[0][0])
    return agreed, first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", nargs=3, action="append", required=True, metavar=("CODER", "RESULTS", "POLICY"))
    parser.add_argument("--fallback", required=True, help="the coder chosen where agreement does not decide")
    args = parser.parse_args()
    coders = list(dict.fromkeys(name for name, _, _ in args.run))
    if len(coders) != 2 or args.fallback not in coders:
        parser.error(f"exactly two coders, and --fallback one of them: got coders {coders}, fallback {args.fallback!r}")
    labels = [f"{name}: {policy} ({Path(path).parent.name})" for name, path, policy in args.run]
    per_run: list[dict[tuple[str, str], EvalRecord]] = []
    for _, path, policy in args.run:
        found = {(r.task, r.question_id): r for r in load_records(Path(path)) if r.policy == policy and r.repeat == 0}
        if not found:
            parser.error(f"no records of {policy} in {path}")
        per_run.append(found)
    questions = sorted(set.intersection(*(set(found) for found in per_run)))
    if not questions:
        parser.error("no question was answered by every run")
    rows: dict[str, list[int]] = defaultdict(list)
    for key in questions:
        runs: dict[str, list[EvalRecord]] = defaultdict(list)
        for (name, _, _), found, label in zip(args.run, per_run, labels):
            runs[name].append(found[key])
            rows[label].append(int(found[key].correct))
        agreed, majority = choose(runs, args.fallback)
        rows["agreement"].append(int(agreed.correct))
        rows["majority"].append(int(majority.correct))
        rows["any right (oracle)"].append(int(any(r.correct for rs in runs.values() for r in rs)))
    kinds = [kind_name(task) for task, _ in questions]
    print(f"{len(questions)} questions of {len(set(kinds))} kinds; coders {coders}, fallback {args.fallback}\n")
    print("| policy | accuracy | " + " | ".join(f"vs {label}" for label in labels) + " |")
    print("|---|---|" + "---|" * len(labels))
    for name, right in rows.items():
        margins = []
        for label in labels:
            m, lo, hi = paired_bootstrap(right, rows[label])
            margins.append(f"{100 * m:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]")
        print(f"| {name} | {100 * sum(right) / len(right):.1f} % | " + " | ".join(margins) + " |")
    print("\n| kind | n | " + " | ".join(rows) + " |\n|---|---|" + "---|" * len(rows))
    for kind in sorted(set(kinds)):
        idx = [i for i, k in enumerate(kinds) if k == kind]
        print(f"| {kind} | {len(idx)} | " + " | ".join(str(sum(right[i] for i in idx)) for right in rows.values()) + " |")


if __name__ == "__main__":
    main()
