"""Held-out evaluation of conductors against single-worker baselines, with the training reward.

Every conductor writes one workflow per held-out question (same runtime prompt as training, greedy
decoding by default, no resampling and no fallback — an unparseable plan scores like in training),
the executor runs it on the pool, and the answer is graded. Baselines run on the same questions:
the best single worker (highest mean skill) and an oracle single-step router that sends each
question to the best worker for its domain. On the simulated pool every number is SIMULATED.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Optional

from ..pool import Pool, PoolSpec, load_pool
from ..workflow import Step, Workflow
from .config import TrainConfig
from .data import Item, load_items, prompt_for
from .reward import Sample, score_completion


@dataclass
class Row:
    system: str
    reward: float
    accuracy: float
    parse_rate: float
    right_worker: float  # share of questions whose final step ran on the best worker for their domain
    steps: float
    cost_usd: float
    per_domain_right: dict[str, float] = field(default_factory=dict)
    per_domain_acc: dict[str, float] = field(default_factory=dict)
    worker_share: dict[str, float] = field(default_factory=dict)


def skills(spec: PoolSpec) -> dict[str, dict[str, float]]:
    """Per-worker per-domain accuracies declared in a simulated pool (empty for real pools)."""
    return {w.name: dict(w.options.get("skills", {})) for w in spec.workers if w.options.get("skills")}


def best_by_domain(spec: PoolSpec, domains: list[str]) -> dict[str, str]:
    table = skills(spec)
    return {d: max(table, key=lambda name: table[name].get(d, 0.0)) for d in domains} if table else {}


def best_single(spec: PoolSpec, domains: list[str]) -> Optional[str]:
    table = skills(spec)
    if not table:
        return spec.workers[spec.strongest_index()].name
    return max(table, key=lambda name: sum(table[name].get(d, 0.0) for d in domains) / len(domains))


async def _score_all(texts: list[str], items: list[Item], spec: PoolSpec, cfg: TrainConfig, seed: int) -> list[Sample]:
    async with Pool(spec) as pool:
        return list(
            await asyncio.gather(
                *(
                    score_completion(t, question=i.question, reference=i.reference, task=i.task, pool=pool,
                                     settings=cfg.reward, max_steps=cfg.prompt.max_steps, seed=seed)
                    for t, i in zip(texts, items)
                )
            )
        )


def summarise(system: str, samples: list[Sample], items: list[Item], best: dict[str, str]) -> Row:
    n = len(samples) or 1
    dom_n: dict[str, int] = defaultdict(int)
    dom_right: dict[str, int] = defaultdict(int)
    dom_acc: dict[str, int] = defaultdict(int)
    shares: dict[str, int] = defaultdict(int)
    right = 0
    for s, item in zip(samples, items):
        dom_n[item.domain] += 1
        dom_acc[item.domain] += s.correct
        last = s.workers[-1] if s.workers else None
        if last is not None:
            shares[last] += 1
        if last is not None and best.get(item.domain) == last:
            right += 1
            dom_right[item.domain] += 1
    parsed = [s for s in samples if s.parsed]
    return Row(
        system=system,
        reward=sum(s.reward for s in samples) / n,
        accuracy=sum(s.correct for s in samples) / n,
        parse_rate=len(parsed) / n,
        right_worker=right / n,
        steps=sum(s.steps for s in parsed) / max(1, len(parsed)),
        cost_usd=sum(s.cost_usd for s in samples) / n,
        per_domain_right={d: dom_right[d] / dom_n[d] for d in dom_n},
        per_domain_acc={d: dom_acc[d] / dom_n[d] for d in dom_n},
        worker_share={k: v / n for k, v in sorted(shares.items(), key=lambda kv: -kv[1])},
    )


def conductor_texts(model_dir: str, items: list[Item], spec: PoolSpec, cfg: TrainConfig, *, temperature: float, batch_size: int, seed: int) -> list[str]:
    from ..providers.transformers_local import load_checkpoint
    from .models import resolve_model
    from .trainer import accelerator_device, generate

    model, tokenizer = load_checkpoint(resolve_model(model_dir), device=accelerator_device(), dtype=cfg.model.dtype)
    out: list[str] = []
    for start in range(0, len(items), batch_size):
        batch = [prompt_for(i, spec, cfg) for i in items[start : start + batch_size]]
        out += generate(model, tokenizer, batch, max_new_tokens=cfg.grpo.max_completion_length, temperature=temperature, seed=seed + start)
    return out


def evaluate(
    cfg: TrainConfig,
    conductors: dict[str, str],
    *,
    n: Optional[int] = None,
    temperature: float = 0.0,
    batch_size: int = 8,
    seed: int = 0,
    on_row=None,
    chains: tuple[int, ...] = (),
) -> list[Row]:
    """Rows for the baselines, then one per conductor (label → checkpoint dir or model ref).

    ``chains``: also score fixed chains of that many steps on the best single worker, each later
    step checking the earlier answers (access "all"): the multi-step headroom a conductor could find.
    """
    spec = load_pool(cfg.path(cfg.pool))
    items = load_items(cfg, held_out=True)[: n or None]
    domains = sorted({i.domain for i in items})
    best = best_by_domain(spec, domains)
    rows: list[Row] = []

    def add(row: Row) -> None:
        rows.append(row)
        if on_row:
            on_row(row)

    single = best_single(spec, domains)
    if single is not None:
        wf = Workflow((Step(spec.index(single), "Solve the overall task and give the final answer.", ()),)).render()
        add(summarise(f"best single worker ({single})", asyncio.run(_score_all([wf] * len(items), items, spec, cfg, seed)), items, best))
    for k in chains:
        if single is None or k < 2:
            continue
        steps = (Step(spec.index(single), "Solve the task.", ()),) + tuple(
            Step(spec.index(single), "Check the previous answers and give the final answer.", "all") for _ in range(k - 1)
        )
        wf = Workflow(steps).render()
        add(summarise(f"fixed {k}-step chain ({single} x{k})", asyncio.run(_score_all([wf] * len(items), items, spec, cfg, seed)), items, best))
    if best:
        texts = [Workflow((Step(spec.index(best[i.domain]), "Solve the overall task and give the final answer.", ()),)).render() for i in items]
        add(summarise("oracle single-step router", asyncio.run(_score_all(texts, items, spec, cfg, seed)), items, best))
    for label, ref in conductors.items():
        texts = conductor_texts(ref, items, spec, cfg, temperature=temperature, batch_size=batch_size, seed=seed)
        add(summarise(label, asyncio.run(_score_all(texts, items, spec, cfg, seed)), items, best))
    return rows


def markdown_table(rows: list[Row], domains: list[str]) -> str:
    head = "| system | reward | accuracy | parse rate | right worker | " + " | ".join(f"right worker {d}" for d in domains) + " | steps | cost/q ($) |"
    sep = "|" + "---|" * (7 + len(domains))
    lines = [head, sep]
    for r in rows:
        per = " | ".join(f"{r.per_domain_right.get(d, 0.0):.2f}" for d in domains)
        lines.append(f"| {r.system} | {r.reward:.3f} | {r.accuracy:.3f} | {r.parse_rate:.2f} | {r.right_worker:.2f} | {per} | {r.steps:.2f} | {r.cost_usd:.5f} |")
    return "\n".join(lines)
