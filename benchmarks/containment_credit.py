"""How often reasoning-gym's base scorer paid a wrong answer for merely containing the reference.

    PYTHONPATH=src python benchmarks/containment_credit.py docs/evaluation/*/results.jsonl runs/**/results.jsonl

reasoning-gym's base ``score_answer`` pays ``len(reference) / len(answer)`` to any answer that contains the
reference ("2895.0" for "2895", "10" for "1", a list of guesses); the ``reasoning_gym`` grader now scores those 0.
This reads the graders' reasons in ``conductor eval`` results (they record reasoning-gym's own score either way),
counts each distinct (question, answer) once across the files, and prints per generator with the base scorer: the
answers, the wrong ones, those paid for containment, their mean payment, and a few examples.
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path

from openconductor.evaluation import load_records
from openconductor.tasks.reasoning_gym_tasks import pays_for_containing

REASON = re.compile(r"^(\w+)\.score_answer = ([-+0-9.e]+)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", type=Path, help="results.jsonl files of conductor eval folders")
    args = parser.parse_args()
    seen: set[tuple[str, str]] = set()
    answers, wrong, paid = defaultdict(int), defaultdict(int), defaultdict(list)
    examples: dict[str, list[str]] = defaultdict(list)
    for path in args.results:
        for record in load_records(path):
            match = REASON.match(record.reason)
            if not match or not pays_for_containing(match.group(1)):
                continue
            key = (record.question, record.final_answer)
            if key in seen:
                continue
            seen.add(key)
            dataset, score = match.group(1), float(match.group(2))
            answers[dataset] += 1
            if score < 1:
                wrong[dataset] += 1
            if 0 < score < 1:
                paid[dataset].append(score)
                if len(examples[dataset]) < 3:
                    examples[dataset].append(f"{(record.extracted or '')[:24]!r}: {score:.2f}")
    print(f"{'generator':24s} {'answers':>8s} {'wrong':>6s} {'paid':>5s} {'mean paid':>9s}  examples")
    for dataset in sorted(answers):
        got = paid[dataset]
        mean = f"{sum(got) / len(got):.2f}" if got else "-"
        print(f"{dataset:24s} {answers[dataset]:8d} {wrong[dataset]:6d} {len(got):5d} {mean:>9s}  {'; '.join(examples[dataset])}")
    total_wrong, total_paid = sum(wrong.values()), sum(len(v) for v in paid.values())
    print(f"all: {sum(answers.values())} answers, {total_wrong} wrong, {total_paid} of them paid for containing the reference "
          f"({100 * total_paid / max(1, total_wrong):.1f} %)")


if __name__ == "__main__":
    main()
