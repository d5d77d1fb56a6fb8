"""Does a learned router's choice carry to kinds of question it never saw? Leave one kind out, on training records.

For each kind in the records, train the router (policies/router.py) on every other kind's questions, route this
kind's questions, and score the arm it chose. Printed per kind and overall, against each arm alone and against the
per-kind lookup chosen on the held-out kind itself (an oracle: it sees the answers of the kind it is scored on),
with paired-bootstrap 95 % intervals. This is the check that needs no held-out kind: the same question the held-out
kinds answer (docs/results.md [32]), asked of the training kinds.

With --cascade it also scores, for the first two arms, the rule that uses what the question's own run shows rather
than its text: the answer of arm 1, or arm 2's where arm 1's program failed or printed nothing (and the reverse). It
reads the runs' traces from the trace store the eval wrote them to (OPENCONDUCTOR_HOME), making no new calls.

Usage: PYTHONPATH=src python benchmarks/router_transfer.py RESULTS.jsonl [...] --arm fixed:A --arm fixed:B [--l2 0.01] [--cascade]
Only questions that every arm answered count. Needs the `router` extra (the question embedder).
"""

import argparse
from collections import defaultdict
from pathlib import Path

from openconductor.evaluation import load_records, paired_bootstrap
from openconductor.policies.router import embed, train_router
from openconductor.tasks.kinds import kind_name


def pct(interval):
    m, lo, hi = interval
    return f"{100 * m:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+")
    parser.add_argument("--arm", action="append", required=True, help="single:WORKER or fixed:WORKFLOW (at least two)")
    parser.add_argument("--l2", type=float, default=1e-2)
    parser.add_argument("--cascade", action="store_true", help="also score the cascades of the first two arms on whether a program ran")
    args = parser.parse_args()
    records = [r for path in args.results for r in load_records(Path(path)) if r.policy in args.arm]
    correct: dict[str, dict[str, int]] = defaultdict(dict)
    run_of: dict[str, dict[str, str]] = defaultdict(dict)
    kind_of: dict[str, str] = {}
    for r in records:
        correct[r.policy][r.question] = int(r.correct)
        run_of[r.policy][r.question] = r.run_id
        kind_of[r.question] = kind_name(r.task)
    questions = sorted(set.intersection(*(set(correct[a]) for a in args.arm)))
    kinds = sorted({kind_of[q] for q in questions})
    vectors = dict(zip(questions, embed(questions)))
    routed: dict[str, int] = {}
    lookup: dict[str, int] = {}
    print(f"{len(questions)} questions of {len(kinds)} kinds; arms: {', '.join(args.arm)}; leave one kind out, l2={args.l2}\n")
    print("| kind | n | " + " | ".join(args.arm) + " | router | router chose |")
    print("|---|---|" + "---|" * len(args.arm) + "---|---|")
    for kind in kinds:
        held = [q for q in questions if kind_of[q] == kind]
        model = train_router([r for r in records if kind_of[r.question] != kind and r.question in vectors], arms=args.arm, l2=args.l2)
        picks = [model.choose(model.scores(vectors[q]), range(len(args.arm))) for q in held]
        for q, i in zip(held, picks):
            routed[q] = correct[args.arm[i]][q]
        best = max(args.arm, key=lambda a: sum(correct[a][q] for q in held))
        lookup.update({q: correct[best][q] for q in held})
        counts = " | ".join(str(sum(correct[a][q] for q in held)) for a in args.arm)
        chose = ", ".join(f"{a} {picks.count(i)}" for i, a in enumerate(args.arm) if picks.count(i))
        print(f"| {kind} | {len(held)} | {counts} | {sum(routed[q] for q in held)} | {chose} |")
    n = len(questions)
    router = [routed[q] for q in questions]
    print(f"\nrouter (leave one kind out): {100 * sum(router) / n:.1f} % of {n}")
    for arm in args.arm:
        alone = [correct[arm][q] for q in questions]
        print(f"  vs {arm} ({100 * sum(alone) / n:.1f} %): {pct(paired_bootstrap(router, alone))}")
    oracle = [lookup[q] for q in questions]
    print(f"  vs the per-kind lookup chosen on each kind's own questions (oracle, {100 * sum(oracle) / n:.1f} %): {pct(paired_bootstrap(router, oracle))}")
    if args.cascade:
        cascades(args.arm[:2], questions, correct, run_of)


def program_ran(run_id: str) -> bool:
    """The run's first tool step ran and its tool counts its output as a result (a python program that failed or
    printed nothing does not)."""
    from openconductor.executor import _tool_answered  # the executor's own test of whether a tool step answered
    from openconductor.traces import TraceStore

    run = TraceStore().get(run_id)
    tools = [s for s in run.steps if s.detail.get("status") is not None or s.worker_name == "python"]
    return bool(tools) and _tool_answered(tools[0])


def cascades(arms, questions, correct, run_of) -> None:
    ran = {(a, q): program_ran(run_of[a][q]) for a in arms for q in questions}
    n = len(questions)
    print("\nprograms that ran: " + ", ".join(f"{a} {sum(ran[(a, q)] for q in questions)} of {n}" for a in arms))
    for first, second in (arms, arms[::-1]):
        rule = [correct[first][q] if ran[(first, q)] else correct[second][q] for q in questions]
        line = ", ".join(f"vs {a} {pct(paired_bootstrap(rule, [correct[a][q] for q in questions]))}" for a in arms)
        print(f"cascade {first}, then {second} where its program did not run: {100 * sum(rule) / n:.1f} %; {line}")


if __name__ == "__main__":
    main()
