"""What a fit would spend, before it spends anything (``conductor fit POOL --dry-run``).

The fit's own stage code runs with a ``Recorder`` in place of the reward: it runs nothing, scores every
workflow alike (so the search keeps its seeded tie order) and counts the worker calls a real run would make
on an empty replay store. A step's call is identified the way the replay store keys it: by the question,
the worker, the subtask and what the step sees, recursively (the visible steps' own keys stand for their
outputs, which the store replays whenever their keys repeat). So a step that repeats an earlier one, within
a stage or across stages (the profile's runs are the search's first screen; the finalists' runs include the
search's), is counted once, as the store will answer it once. The count is exact up to two unknowns: which
candidates become finalists (the recorder's tie order stands in for the real ranking; the count of runs is
the same) and the conductor's own plans in the evaluation and in GRPO (counted as its group's best plan,
never replayed: an upper bound).

Tokens per call: the input is the worker message's length (rendered, with each visible output at its
estimated length) in tokens, about 3.5 characters a token (a simulated worker counts words); the output is
the worker's measured output per call once the profile has run, else ``output_share`` of its
``max_tokens``. Cost: the pool's prices on those tokens.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Optional

from ... import worker_message
from ...pool import TOOL_PROVIDERS, PoolSpec, WorkerSpec
from ...workflow import parse
from ..reward import Sample

CHARS_PER_TOKEN = 3.5
TEMPLATE_TOKENS = 12  # a chat template's own tokens around one user message
TOOL_OUTPUT_TOKENS = 16  # a program's printed answer, as the next step reads it
OUTPUT_SHARE = 0.25


@dataclass
class Estimate:
    """Calls, tokens and cost a stage (or the whole fit) would spend on an empty replay store."""

    runs: int = 0
    calls: int = 0
    input_tokens: float = 0.0
    output_tokens: float = 0.0
    cost_usd: float = 0.0
    per_worker: dict[str, int] = field(default_factory=dict)

    @property
    def tokens(self) -> float:
        return self.input_tokens + self.output_tokens

    def add(self, other: "Estimate") -> "Estimate":
        workers = dict(self.per_worker)
        for k, v in other.per_worker.items():
            workers[k] = workers.get(k, 0) + v
        return Estimate(self.runs + other.runs, self.calls + other.calls, self.input_tokens + other.input_tokens,
                        self.output_tokens + other.output_tokens, self.cost_usd + other.cost_usd, workers)

    def as_dict(self) -> dict:
        return {"runs": self.runs, "calls": self.calls, "input_tokens": round(self.input_tokens), "output_tokens": round(self.output_tokens),
                "tokens": round(self.tokens), "cost_usd": round(self.cost_usd, 6), "per_worker": dict(self.per_worker)}


def text_tokens(worker: WorkerSpec, text: str) -> float:
    """The tokens ``worker`` is billed for ``text`` (simulated workers count words)."""
    if worker.provider == "simulated":
        return float(len(text.split()))
    return len(text) / CHARS_PER_TOKEN + TEMPLATE_TOKENS


class Recorder:
    """Stands in for the reward (``WorkflowReward``): counts the calls of the runs it is asked to grade,
    across every stage it is used for, as the replay store would make them; runs nothing."""

    def __init__(self, spec: PoolSpec, *, output_tokens: Optional[dict[str, float]] = None, output_share: float = OUTPUT_SHARE):
        self.spec = spec
        self.output = {w.name: (output_tokens or {}).get(w.name, w.max_tokens * output_share) for w in spec.workers}
        self.seen: set[str] = set()
        self.estimate = Estimate()
        self.last_samples: list[Sample] = []

    def stage(self) -> Estimate:
        """What was counted since the last call (one stage's share), and start a new count."""
        done, self.estimate = self.estimate, Estimate()
        return done

    def _out(self, worker: WorkerSpec) -> float:
        return TOOL_OUTPUT_TOKENS if worker.provider in TOOL_PROVIDERS else self.output[worker.name]

    def run(self, question: str, text: str, seed: Optional[int | str] = None) -> int:
        """Count one workflow run on ``question``; returns its estimated tokens."""
        steps = parse(text).steps
        keys: list[str] = []
        tokens = 0.0
        self.estimate.runs += 1
        for i, step in enumerate(steps):
            worker = self.spec.workers[step.worker]
            visible = step.visible(i)
            key = hashlib.sha256(repr((question, seed, worker.name, step.subtask, [keys[j] for j in visible])).encode()).hexdigest()
            keys.append(key)
            if worker.provider in TOOL_PROVIDERS:
                continue  # a tool's run has no tokens
            earlier = [(steps[j].worker, steps[j].subtask, "") for j in visible]
            inp = text_tokens(worker, worker_message.render(question, earlier, step.subtask))
            inp += sum(self._out(self.spec.workers[steps[j].worker]) for j in visible)
            out = self._out(worker)
            tokens += inp + out
            if key in self.seen:
                continue
            self.seen.add(key)
            e = self.estimate
            e.calls += 1
            e.input_tokens += inp
            e.output_tokens += out
            e.cost_usd += (inp * worker.price_input_per_m + out * worker.price_output_per_m) / 1e6
            e.per_worker[worker.name] = e.per_worker.get(worker.name, 0) + 1
        for i, step in enumerate(steps):  # tool steps spend no tokens but are real calls (the sandbox runs)
            worker = self.spec.workers[step.worker]
            if worker.provider in TOOL_PROVIDERS and keys[i] not in self.seen:
                self.seen.add(keys[i])
                self.estimate.calls += 1
                self.estimate.per_worker[worker.name] = self.estimate.per_worker.get(worker.name, 0) + 1
        return round(tokens)

    async def workflow_reward(self, prompts, completions, **columns) -> list[float]:
        questions = columns.get("question") or [""] * len(completions)
        self.last_samples = []
        for question, text in zip(questions, completions):
            tokens = self.run(question, text)
            self.last_samples.append(Sample(reward=0.5, parsed=True, steps=len(parse(text).steps), tokens=tokens))
        return [0.5] * len(completions)

    async def aclose(self) -> None:
        return None
