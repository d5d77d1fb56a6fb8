"""The generalisation table: each policy on the held-out kinds and on the everyday questions, against the best
single worker, the best fixed workflow and a per-kind lookup table, with paired-bootstrap 95 % intervals.

Usage: PYTHONPATH=src python benchmarks/eval_generalisation_table.py OUT/results.jsonl [MORE.jsonl ...] [--against POLICY ...]
Only questions that EVERY policy answered are compared (an interrupted eval grows kind by kind). Groups: the
held-out kinds (openconductor/tasks/kinds.py, HELD_OUT_KINDS), the everyday test split, and both together.
"best single" / "best fixed" are the single-worker / fixed-workflow policy with the highest accuracy on the
group. "lookup (oracle)" answers each question with the fixed workflow or single worker that scored best on
ITS kind (everyday: on its category) over these very questions: an upper bound for any per-kind lookup table
(one chosen on training questions can only do worse on held-out kinds, which it never saw). "any baseline
(oracle)" is right on a question when any single worker or fixed workflow was: the ceiling for a conductor that
only chooses among these plans per question, so a margin goal above it cannot be met by choosing alone.
"any policy (oracle)", printed when a conductor is among the results: right where any policy at all was, so it
counts the plans a conductor wrote itself; below the table, the questions each conductor alone got right.
"majority answer (no grader)" answers each question with the answer most policies gave (ties: the best fixed
workflow's answer when it is among them): a choice made without seeing whether any answer is right, so what
agreement among these policies is worth, where the oracles are what perfect choosing would be worth.
"""

import argparse
from collections import Counter, defaultdict
from pathlib import Path

from openconductor.evaluation import load_records, paired_bootstrap
from openconductor.tasks.kinds import HELD_OUT_KINDS, kind_name

BASELINE_PREFIXES = ("single:", "fixed:")


def complete_questions(records, policies):
    answered = defaultdict(set)
    for r in records:
        answered[(r.task, r.question_id)].add(r.policy)
    return sorted(q for q, seen in answered.items() if seen >= set(policies))


def baselines(policies):
    """The single workers and fixed workflows among ``policies``."""
    return [p for p in policies if p.startswith(BASELINE_PREFIXES)]


def lookup_row(correct, policies, questions, kind_of):
    """Per question, the baseline that scored best on its kind (ties: the first listed)."""
    bases = baselines(policies)
    by_kind = defaultdict(list)
    for q in questions:
        by_kind[kind_of(q)].append(q)
    row = {}
    for kind, qs in by_kind.items():
        best = max(bases, key=lambda p: sum(correct[p][q] for q in qs))
        row.update({q: correct[best][q] for q in qs})
    return row


def any_baseline_row(correct, policies, questions):
    """Per question, 1 when any single worker or fixed workflow answered it right."""
    bases = baselines(policies)
    return {q: int(any(correct[p][q] for p in bases)) for q in questions}


def any_policy_row(correct, policies, questions):
    """Per question, 1 when any policy at all answered it right (the conductors' own plans included)."""
    return {q: int(any(correct[p][q] for p in policies)) for q in questions}


def majority_row(correct, answers, policies, questions, prefer):
    """Per question, 1 when the answer most policies gave is right (answers compared stripped and lower-cased;
    a tie goes to ``prefer``'s answer when it is among the tied, else to the first policy's)."""
    row = {}
    for q in questions:
        given = {p: answers[p][q] for p in policies if answers[p][q]}
        counts = Counter(given.values())
        if not counts:
            row[q] = 0
            continue
        top = max(counts.values())
        tied = [p for p, a in given.items() if counts[a] == top]
        pick = prefer if prefer in tied else tied[0]
        row[q] = correct[pick][q]
    return row


def best_of(candidates, acc, tokens):
    """The candidate with the highest accuracy; a tie goes to the cheaper one (the one a user would pick)."""
    return max(candidates, key=lambda p: (acc[p], -tokens[p]))


def only_right(correct, policies, questions):
    """Per policy that is not a baseline: the kinds of the questions it alone got right, with counts."""
    bases = baselines(policies)
    out = {}
    for p in policies:
        if p in bases:
            continue
        alone = [q for q in questions if correct[p][q] and not any(correct[b][q] for b in bases)]
        out[p] = (len(alone), Counter(q[0] for q in alone))
    return out


def table(name, questions, correct, policies, tokens, against):
    n = len(questions)
    acc = {p: sum(correct[p][q] for q in questions) / n for p in policies}
    singles = [p for p in policies if p.startswith("single:")]
    fixed = [p for p in policies if p.startswith("fixed:")]
    refs = {}
    if singles:
        refs["best single"] = best_of(singles, acc, tokens)
    if fixed:
        refs["best fixed"] = best_of(fixed, acc, tokens)
    refs.update({p: p for p in against if p in acc and p not in refs.values()})  # no column twice
    print(f"\n### {name}: {n} questions answered by all {len(policies)} policies\n")
    cols = " | ".join(f"vs {k} ({v})" if k != v else f"vs {k}" for k, v in refs.items())
    print(f"| policy | accuracy | tokens/q | {cols} |\n|---|---|---|" + "---|" * len(refs))
    for p in sorted(policies, key=lambda p: -acc[p]):
        cells = []
        for ref in refs.values():
            if ref == p:
                cells.append("—")
                continue
            mean, lo, hi = paired_bootstrap([correct[p][q] for q in questions], [correct[ref][q] for q in questions])
            cells.append(f"{100 * mean:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]")
        spent = "—" if tokens[p] != tokens[p] else f"{tokens[p]:.0f}"  # the lookup bound's tokens are not one run's
        print(f"| {p} | {100 * acc[p]:.1f} | {spent} | " + " | ".join(cells) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, nargs="+")
    ap.add_argument("--against", action="append", default=[], metavar="POLICY")
    ap.add_argument("--skip", action="append", default=[], metavar="POLICY", help="leave a policy out (e.g. one run on fewer questions)")
    ap.add_argument("--tag", action="append", default=[], metavar="FILE=TAG",
                    help="append +TAG to the policies read from FILE (two runs of one policy, e.g. under two pool settings)")
    args = ap.parse_args()
    tags = dict(t.split("=", 1) for t in args.tag if "=" in t)
    if len(tags) != len(args.tag) or not set(tags) <= {str(p) for p in args.results}:
        ap.error(f"--tag takes FILE=TAG with FILE one of the results given; got {args.tag}")
    records = []
    for path in args.results:
        tag = tags.get(str(path))
        for r in load_records(path):
            if r.repeat == 0 and r.policy not in args.skip:
                records.append(r.model_copy(update={"policy": f"{r.policy}+{tag}"}) if tag else r)
    policies = list(dict.fromkeys(r.policy for r in records))
    questions = complete_questions(records, policies)
    correct = {p: {} for p in policies}
    tok = defaultdict(dict)
    answers = defaultdict(dict)
    category = {}
    for r in records:
        correct[r.policy][(r.task, r.question_id)] = int(r.correct)
        answers[r.policy][(r.task, r.question_id)] = (r.extracted or "").strip().lower()
        tok[r.policy][(r.task, r.question_id)] = r.tokens
    # Everyday questions' categories come from the packaged file (results carry the question, not its category).
    from openconductor.tasks import load_task

    for q in load_task("everyday", split="all").questions:
        category[("everyday", q.id)] = q.metadata["category"]
    kinds = {kind_name(t) for t in HELD_OUT_KINDS}

    def kind_of(q):
        return f"everyday/{category.get(q, '?')}" if q[0] == "everyday" else q[0]

    groups = {"held-out kinds": [q for q in questions if q[0] in kinds], "everyday (test split)": [q for q in questions if q[0] == "everyday"]}
    groups["both"] = groups["held-out kinds"] + groups["everyday (test split)"]
    print(f"{len(questions)} question(s) answered by all of: {', '.join(policies)}")
    for name, qs in groups.items():
        if not qs:
            continue
        bounds = {"lookup (oracle)": lookup_row(correct, policies, qs, kind_of), "any baseline (oracle)": any_baseline_row(correct, policies, qs)}
        if len(baselines(policies)) < len(policies):
            bounds["any policy (oracle)"] = any_policy_row(correct, policies, qs)
        t = {p: sum(tok[p][q] for q in qs) / len(qs) for p in policies}
        fixed = [p for p in policies if p.startswith("fixed:")]
        acc = {p: sum(correct[p][q] for q in qs) for p in fixed}
        prefer = best_of(fixed, acc, t) if fixed else policies[0]  # the table's "best fixed"
        bounds["majority answer (no grader)"] = majority_row(correct, answers, policies, qs, prefer)
        t |= {b: float("nan") for b in bounds}
        table(name, qs, {**correct, **bounds}, policies + list(bounds), t, args.against)
        per_kind = defaultdict(list)
        for q in qs:
            per_kind[q[0]].append(q)
        for p, (n, kinds_alone) in only_right(correct, policies, qs).items():
            print(f"\n{p}: right on {n} question(s) that no single worker or fixed workflow got right"
                  + (f" ({', '.join(f'{k} {c}' for k, c in kinds_alone.most_common())})" if n else ""))
        if name == "held-out kinds":
            print("\nper kind (accuracy %, n): " + "; ".join(
                f"{k} n={len(v)}: " + ", ".join(f"{p.split(':')[-1][:18]} {100 * sum(correct[p][q] for q in v) / len(v):.0f}" for p in policies)
                for k, v in sorted(per_kind.items())))


if __name__ == "__main__":
    main()
