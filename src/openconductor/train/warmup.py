"""The format warm-up's targets: what a small model copies before GRPO to learn the workflow format (the paper
has no such step; a 135M model writes no parseable workflow without it, and GRPO learns nothing from a group
whose rewards are all 0). The copy itself is ``supervised_copy.py``; the wordings are ``workflow/wordings.py``.

Targets are rendered by ``Workflow.render`` (the one source of the text form). They are *balanced*: the
step count is uniform over 1..max_steps, and chains (plan -> solve -> check), fan-outs (independent
solvers, then one that combines them) and mixed shapes all appear, with subtasks whose wording matches
their place in the shape (on a pool with a code-running tool, also write-program -> run -> read-output
chains, the run step on the tool). Workers are drawn uniformly at random, so the warm-up teaches the format and
sensible shapes, never which worker is good at what: routing is left to GRPO.

Optionally (``[search]``, ``train/search/warmup_targets.py``) the targets are selected rather than drawn: each prompt gets many
such random workflows, the search runs and grades them on the pool, and ``keep_best`` keeps the ones
that answered that training question right (rejection-sampling fine-tuning). The model then starts GRPO
already writing chains with workers that worked, which random rollouts of a uniform warm-up rarely find.
"""

from __future__ import annotations

import random
from typing import TypeVar

from ..pool import TOOL_PROVIDERS, PoolSpec
from ..workflow import SUBTASK_CHARS, Access, Step, Workflow, WorkflowFormat, parse
from ..workflow.wordings import PHRASES

T = TypeVar("T")

SHAPES = ("chain", "fan-out", "plan-fan-out", "code")


def _chain(k: int, rng: random.Random) -> list[tuple[str, Access]]:
    roles = ["plan", "implement"] if k >= 2 and rng.random() < 0.5 else ["solve"]
    while len(roles) < k:
        roles.append("check")
    return [(role, () if i == 0 else "all") for i, role in enumerate(roles[:k])]


def _fan_out(k: int, fine_grained: bool, rng: random.Random) -> list[tuple[str, Access]]:
    solvers = [("solve", ()) for _ in range(k - 1)]
    last: Access = tuple(range(k - 1)) if fine_grained and rng.random() < 0.5 else "all"
    return solvers + [("aggregate", last)]


def _plan_fan_out(k: int, fine_grained: bool, rng: random.Random) -> list[tuple[str, Access]]:
    see_plan: Access = (0,) if fine_grained else "all"
    middle = [("implement", see_plan) for _ in range(k - 2)]
    return [("plan", ())] + middle + [("aggregate", "all")]


def shape(k: int, *, fine_grained: bool, rng: random.Random, code: bool = False) -> list[tuple[str, Access]]:
    """(role, access) per step for a k-step workflow of a random shape that fits k (``code``: the pool
    has a code-running tool, so write-run(-answer) chains are a shape too)."""
    options = ["chain"]
    if k >= 3:
        options.append("fan-out")
    if k >= 4 and fine_grained:
        options.append("plan-fan-out")
    if code and k in (2, 3):
        options.append("code")
    kind = rng.choice(options)
    if kind == "code":
        return [("code", ()), ("run", "all"), ("answer", "all")][:k]
    if kind == "fan-out":
        return _fan_out(k, fine_grained, rng)
    if kind == "plan-fan-out":
        return _plan_fan_out(k, fine_grained, rng)
    return _chain(k, rng)


def _reasoning(roles: list[str]) -> str:
    if roles[0] == "code":
        return "Reasoning: the answer is computable, so one agent writes a program and the tool runs it."
    if len(roles) == 1:
        return "Reasoning: one agent answers."
    if roles[-1] == "aggregate" and roles.count("solve") + roles.count("implement") >= 2:
        head = "a plan, then " if roles[0] == "plan" else ""
        return f"Reasoning: {head}{len(roles) - 1 - (roles[0] == 'plan')} independent answers, then one agent combines them."
    return "Reasoning: " + ", then ".join(dict.fromkeys(r if r != "implement" else "solve" for r in roles)) + "."


def format_targets(n: int, n_workers: int, max_steps: int, seed: int, *, fine_grained: bool = False,
                   code_runners: tuple[int, ...] = ()) -> list[str]:
    """``n`` valid workflows in the paper's three-list format: step counts uniform over 1..max_steps,
    shapes and wording as described in the module docstring, workers uniformly random. ``code_runners``:
    ids of workers that run code (the python tool); then write-run(-answer) chains are drawn too, the
    "run" step on a runner and the others on the remaining workers (pools without one draw as before)."""
    rng = random.Random(f"format|{seed}")
    writers = [i for i in range(n_workers) if i not in code_runners]
    code = bool(code_runners) and bool(writers)
    out = []

    def worker(role: str, coded: bool) -> int:
        # A write-run chain runs its program on a code runner and writes/reads it on the other workers.
        if not coded:
            return rng.randrange(n_workers)
        return rng.choice(code_runners) if role == "run" else rng.choice(writers)

    for i in range(n):
        k = 1 + i % max_steps  # uniform over the step counts, in rotation
        layout = shape(k, fine_grained=fine_grained, rng=rng, code=code)
        coded = layout[0][0] == "code"
        steps = tuple(Step(worker(role, coded), rng.choice(PHRASES[role]), access) for role, access in layout)
        out.append(Workflow(steps, reasoning=_reasoning([role for role, _ in layout])).render())
    rng.shuffle(out)
    return out


def single_worker_plans(spec: PoolSpec) -> list[str]:
    """One one-step plan per model of the pool (tools cannot answer alone): "ask worker i", worded as the
    warm-up's first solve phrase. The domain search ranks them beside its random candidates."""
    return [Workflow((Step(i, PHRASES["solve"][0], ()),), reasoning=_reasoning(["solve"])).render()
            for i, worker in enumerate(spec.workers) if worker.provider not in TOOL_PROVIDERS | {"conductor"}]


def taught_wordings(targets: list[str]) -> list[str]:
    """Every subtask of the warm-up's targets, once, in order of first use: the manifest's ``wordings``, the closed
    set a pool may hold the conductor to (``[conductor] subtasks = "trained"``). A subtask no conductor can write
    (a quote, a non-ASCII character, more than ``SUBTASK_CHARS``) is left out: holding the conductor to it would
    refuse every plan."""
    free = WorkflowFormat(1, 1, subtask_chars=SUBTASK_CHARS)
    subtasks = dict.fromkeys(step.subtask for text in targets for step in parse(text).steps)
    return [text for text in subtasks if free.unwritable(text) is None]


def keep_best(candidates: list[list[T]], scores: list[list[float]], k: int, seed: int) -> list[list[T]]:
    """Per prompt, the ``k`` best-scoring candidates (workflow texts, or anything that goes with them);
    ties in a seeded random order (so a prompt whose candidates all scored alike keeps a random, still
    varied, subset)."""
    rng = random.Random(f"select|{seed}")
    kept = []
    for texts, marks in zip(candidates, scores):
        order = sorted(range(len(texts)), key=lambda i: (-marks[i], rng.random()))
        kept.append([texts[i] for i in order[:k]])
    return kept
