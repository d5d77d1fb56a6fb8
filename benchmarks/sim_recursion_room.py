"""Is there room in world v3 for a conductor that calls itself: two answers, then accept if they agree, else a new
workflow? SIMULATED; no model is run.

    PYTHONPATH=src python benchmarks/sim_recursion_room.py [--seeds 901,...,920]

A v3 question shows its bucket (domain, subtopic, level) and nothing else, so the best *static* policy is one plan
per bucket (``sim_headroom.py``'s ceiling: every plan of the search's five shapes, ranked per bucket on
training-side questions). The paper's recursion gives a conductor one more thing to read: what its first round
answered. In world v3 a worker's wrong answer is its own (another worker's is another value, except when
few answers are possible, as MMLU's four letters), so two workers that agree are more likely right. This probe
scores, per bucket, the best *recursive* policy of one family, chosen the same way on the same questions:

* round 1: two workers answer alone (``a``, ``b``, of the bucket's ``--finalists`` best alone); a conductor step sees
  both answers;
* it accepts when they state the same answer (the answer stands), else it writes round 2: any plan of the five
  shapes, run afresh (in the runtime a nested round's workers see the question, not the outer steps); or, a
  second family, one step of a finalist that sees both answers and checks or combines them (which the runtime's
  nested rounds do not offer).

Both policies are per-bucket tables chosen on ``--ceiling-questions`` training-side questions a bucket at the search's
token price; the recursive one reads each question's own round-1 answers, which no per-bucket table can. A last row
keeps, per bucket, whichever of the static plan and the recursive policy scored better on the training side. Printed:
accuracy and worker tokens on the held-out questions, the paired margin, how often round 2 ran, and how often an
agreement was wrong. The conductor's own second call is not in the tokens (one call a question, about as long as its
first). The runtime's recursive prompt does not yet show the conductor its first round's answers one by one
(``policies.lm.RECURSION`` shows the final answer), so no conductor can learn this policy today.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence, Union

from openconductor.pool import PoolSpec, load_pool
from openconductor.sim.plan_search import AGGREGATE, CHECK, SOLVE, SearchSettings, best_alone, candidate_plans, screen_plans, steps_of
from openconductor.sim.pools import generate_pool, pool_spec
from openconductor.sim.questions import Question
from openconductor.sim.world import gold_answer
from openconductor.sim.world_v3 import Profile, make_questions, run_plan, step_answers
from openconductor.train.sim_eval import declared, pooled_bootstrap
from openconductor.workflow import Workflow

ROOT = Path(__file__).resolve().parents[1]
TRAINING_POOL = ROOT / "examples" / "pools" / "simulated_paper_v3.toml"
PRICE = SearchSettings.token_weight  # per 1,000 tokens, as the search and the ceiling rank plans


@dataclass(frozen=True)
class Outcomes:
    """Per question of a set: each worker's answer alone and its tokens, and each kept plan's (correct, tokens)."""

    solo: list[list[Optional[str]]]  # [question][worker]
    solo_tokens: list[list[int]]
    gold: list[list[bool]]  # [question][worker]: that worker's answer alone is right
    plans: list[list[tuple[bool, int]]]  # [question][plan]
    # [question][(a, b, c, subtask)]: round 2 as one step that sees both answers (check or combine), its (correct, tokens)
    seeing: list[dict[tuple[int, int, int, str], tuple[bool, int]]]


def outcomes(profiles: Sequence[Profile], questions: Sequence[Question], plans: Sequence[Workflow], workers: Sequence[int]) -> Outcomes:
    """``workers``: those that may answer in round 1 or check or combine in round 2."""
    solo, solo_tokens, gold, runs, seeing = [], [], [], [], []
    pairs = list(itertools.combinations(workers, 2))
    for q in questions:
        more = {}
        for a, b in pairs:
            for c in workers:
                for subtask in (CHECK, AGGREGATE):
                    r = run_plan(q.text, [(a, SOLVE, ()), (b, SOLVE, ()), (c, subtask, "all")], profiles)
                    more[(a, b, c, subtask)] = (r.correct, r.tokens)
        seeing.append(more)
        answers, tokens, right = [], [], []
        for w in range(len(profiles)):
            (answer,), n = step_answers(q.text, [(w, SOLVE, ())], profiles)
            answers.append(answer)
            tokens.append(n)
            right.append(answer == gold_answer(q.text))
        solo.append(answers)
        solo_tokens.append(tokens)
        gold.append(right)
        runs.append([(r.correct, r.tokens) for r in (run_plan(q.text, steps_of(p), profiles) for p in plans)])
    return Outcomes(solo, solo_tokens, gold, runs, seeing)


def static(o: Outcomes, k: int) -> tuple[list[int], list[int]]:
    return [int(run[k][0]) for run in o.plans], [run[k][1] for run in o.plans]


Second = Union[int, tuple[int, str]]  # round 2: a kept plan run afresh (its index), or (c, subtask): one step seeing both answers


def recursive(o: Outcomes, a: int, b: int, then: Second) -> tuple[list[int], list[int], int, int]:
    """(correct, tokens) per question of the policy (a, b, then round 2 if they disagree); rounds 2 run; wrong agreements."""
    correct, tokens, second, wrong_agree = [], [], 0, 0
    for answers, solo_tokens, right, run, seeing in zip(o.solo, o.solo_tokens, o.gold, o.plans, o.seeing):
        n = solo_tokens[a] + solo_tokens[b]
        if answers[a] is not None and answers[a] == answers[b]:
            correct.append(int(right[b]))
            wrong_agree += not right[b]
        elif isinstance(then, int):
            second += 1
            correct.append(int(run[then][0]))
            n += run[then][1]
        else:
            second += 1
            ok, n = seeing[(a, b, *then)]
            correct.append(int(ok))
        tokens.append(n)
    return correct, tokens, second, wrong_agree


def score(correct: Sequence[int], tokens: Sequence[int]) -> float:
    return (sum(correct) - PRICE * sum(tokens) / 1000) / max(1, len(correct))


FAMILIES = ("static: the best plan of the five shapes per bucket",
            "recursive: two answers, accept if they agree, else a new plan afresh",
            "recursive: the same, or else one step that sees both answers (check or combine)",
            "per bucket, the better on the training side of the static plan and the recursive policy above")


@dataclass
class Side:
    correct: list[int]
    tokens: list[int]
    second: int = 0
    wrong_agree: int = 0


def compare(spec: PoolSpec, held: Sequence[Question], training_side: Sequence[Question], screen: int, keep: int,
            finalists: int) -> tuple[list[Side], dict]:
    """On ``held``: the static table, the recursive policy with a fresh round 2, with either round 2, and per bucket
    the better of the static plan and the latter; each a per-bucket table chosen on ``training_side``. Also returns
    what each bucket chose (the static plan, then each family's policy), which the held-out questions never decide."""
    profiles = declared(spec)
    train_by: dict = defaultdict(list)
    for q in training_side:
        train_by[q.bucket].append(q)
    held_by: dict = defaultdict(list)
    for i, q in enumerate(held):
        held_by[q.bucket].append(i)
    sides = [Side([0] * len(held), [0] * len(held)) for _ in FAMILIES]
    choices: dict = {}
    for bucket, idx in held_by.items():
        # The static screen's plans (``exhaustive_group``'s), and the bucket's best workers alone on the screen's questions
        # (every worker where the pool has no more than ``finalists``)
        plans = screen_plans(candidate_plans(len(profiles)), profiles, train_by[bucket][:screen], keep, PRICE)
        workers = sorted(best_alone(profiles, train_by[bucket][:screen], finalists))
        pairs = list(itertools.combinations(workers, 2))
        seeing = [(c, subtask) for c in workers for subtask in (CHECK, AGGREGATE)]
        train = outcomes(profiles, train_by[bucket], plans, workers)
        best_static = max(range(len(plans)), key=lambda k: (score(*static(train, k)), -k))
        fresh: list[tuple[int, int, Second]] = [(a, b, k) for a, b in pairs for k in range(len(plans))]
        either = fresh + [(a, b, then) for a, b in pairs for then in seeing]
        chosen = [max(family, key=lambda p: score(*recursive(train, *p)[:2])) for family in (fresh, either)]
        recursion_pays = score(*recursive(train, *chosen[1])[:2]) > score(*static(train, best_static))
        choices[bucket] = (plans[best_static], *chosen, recursion_pays)
        test = outcomes(profiles, [held[i] for i in idx], plans, workers)
        runs = [(*static(test, best_static), 0, 0), *(recursive(test, *p) for p in chosen)]
        runs.append(runs[2] if recursion_pays else runs[0])
        for side, (c, t, second, wrong) in zip(sides, runs):
            for j, i in enumerate(idx):
                side.correct[i], side.tokens[i] = c[j], t[j]
            side.second += second
            side.wrong_agree += wrong
    return sides, choices


def line(name: str, s: Side) -> str:
    return f"| {name} | {100 * sum(s.correct) / len(s.correct):.1f} | {sum(s.tokens) / len(s.tokens):,.0f} |"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pool", type=Path, default=TRAINING_POOL, help="the training pool")
    ap.add_argument("--n", type=int, default=1000, help="held-out questions on the training pool")
    ap.add_argument("--eval-seed", type=int, default=1000)
    ap.add_argument("--ceiling-questions", type=int, default=300, help="training-side questions a bucket (training pool)")
    ap.add_argument("--screen", type=int, default=60, help="questions a bucket that screen every plan")
    ap.add_argument("--keep", type=int, default=24, help="plans kept from the screen (the static table's and round 2's choices)")
    ap.add_argument("--finalists", type=int, default=4, help="a bucket's best workers alone (on the screen) that round 1 and a seeing round 2 draw from")
    ap.add_argument("--seeds", default="", help="comma-separated seeds of unseen pools (unseen_pools.py's)")
    ap.add_argument("--pool-n", type=int, default=64)
    ap.add_argument("--pool-ceiling-questions", type=int, default=150)
    ap.add_argument("--skip-training-pool", action="store_true")
    args = ap.parse_args()
    start = time.perf_counter()
    if not args.skip_training_pool:
        spec = load_pool(args.pool)
        held = make_questions(args.n, args.eval_seed)
        side = make_questions(48 * args.ceiling_questions, 7_000, exclude=frozenset(q.text for q in held))
        (fixed, *recursives), choices = compare(spec, held, side, args.screen, args.keep, args.finalists)
        print(f"SIMULATED: world v3, pool {spec.name}, {args.n} held-out questions (eval seed {args.eval_seed}); "
              f"tables chosen on {args.ceiling_questions} training-side questions a bucket at {PRICE} per 1,000 tokens")
        print("| system | accuracy | worker tokens/q | vs static | round 2 ran | agreements accepted and wrong |\n|---|---|---|---|---|---|")
        print(line(FAMILIES[0], fixed) + " | | |")
        for name, r in zip(FAMILIES[1:], recursives):
            m, lo, hi = pooled_bootstrap([(r.correct, fixed.correct)])
            print(line(name, r) + f" {m:+.1f} [{lo:+.1f}, {hi:+.1f}] | {r.second} of {len(held)} | {r.wrong_agree} |")
        print(f"(recursion chosen in {sum(c[-1] for c in choices.values())} of {len(choices)} buckets; {time.perf_counter() - start:.0f} s)", flush=True)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    if seeds:
        held = make_questions(args.pool_n, args.eval_seed)
        side = make_questions(48 * args.pool_ceiling_questions, 7_000, exclude=frozenset(q.text for q in held))
        print(f"\nSIMULATED: generated pools never trained on, {args.pool_n} held-out questions a pool, tables chosen on "
              f"{args.pool_ceiling_questions} a bucket\n| seed | workers | static | recursive (either round 2) | round 2 ran | the better per bucket |\n|---|---|---|---|---|---|")
        pairs, better = [], []
        for i, seed in enumerate(seeds):
            spec = pool_spec(generate_pool(seed, held_out=i % 2 == 1))  # unseen_pools.py's pools
            (fixed, _, adaptive, either), _ = compare(spec, held, side, args.screen, args.keep, args.finalists)
            pairs.append((adaptive.correct, fixed.correct))
            better.append((either.correct, fixed.correct))
            print(f"| {seed} | {len(spec.workers)} | {100 * sum(fixed.correct) / len(held):.1f} ({sum(fixed.tokens) / len(held):,.0f} tok) | "
                  f"{100 * sum(adaptive.correct) / len(held):.1f} ({sum(adaptive.tokens) / len(held):,.0f} tok) | {adaptive.second} of {len(held)} | "
                  f"{100 * sum(either.correct) / len(held):.1f} |", flush=True)
        print(f"\n{len(seeds)} pools ({time.perf_counter() - start:.0f} s), vs static: recursive (either round 2) "
              + "{:+.1f} [{:+.1f}, {:+.1f}]".format(*pooled_bootstrap(pairs)) + "; the better per bucket "
              + "{:+.1f} [{:+.1f}, {:+.1f}] points".format(*pooled_bootstrap(better)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
