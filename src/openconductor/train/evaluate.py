"""Held-out evaluation of conductors against the baselines, with the training reward.

Every conductor writes one workflow per held-out question (the runtime prompt it was trained with,
greedy decoding by default, no resampling and no fallback: an unparseable plan scores as in training),
the executor runs it on the pool, and the answer is graded. The baselines run on the same questions:
the best single worker (highest mean skill), an oracle single-step router (the best worker for each
question's domain), Mixture-of-Agents (7 proposers and a random aggregator, the paper's 8 calls) and
optional fixed chains. Differences between two systems come with a paired-bootstrap 95 % interval over
the questions. On the simulated pool every number is SIMULATED.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..policies.base import PlanRequest, make_policy
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
    tokens: float = 0.0  # per question: every worker call's input + output, plus the conductor's own
    per_domain_right: dict[str, float] = field(default_factory=dict)
    per_domain_acc: dict[str, float] = field(default_factory=dict)
    per_domain_steps: dict[str, float] = field(default_factory=dict)
    worker_share: dict[str, float] = field(default_factory=dict)  # final-step worker, all questions
    final_worker_by_domain: dict[str, dict[str, float]] = field(default_factory=dict)  # over all the domain's questions
    # The first step's worker answers from the question alone: in a solve-then-check chain it is the one
    # that writes the solution (the code, on LiveCodeBench), which the final step only reviews. Over all the
    # domain's questions, as the final step's (an unparsed plan has neither). In a fan-out it is only the
    # first of the parallel answers.
    first_worker_by_domain: dict[str, dict[str, float]] = field(default_factory=dict)
    shapes: dict[str, float] = field(default_factory=dict)
    correct: list[int] = field(default_factory=list)  # per question, for paired comparisons


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


async def _score_all(texts: list[str], items: list[Item], spec: PoolSpec, cfg: TrainConfig, seed: int, max_steps: int) -> list[Sample]:
    async with Pool(spec) as pool:
        return list(
            await asyncio.gather(
                *(
                    score_completion(t, question=i.question, reference=i.reference, task=i.task, pool=pool,
                                     settings=cfg.reward, max_steps=max_steps, seed=seed, grader_options=i.grader_options)
                    for t, i in zip(texts, items)
                )
            )
        )


def _shape(sample: Sample) -> str:
    from .reward import topology

    return topology(sample) if sample.parsed else "unparseable"


def summarise(system: str, samples: list[Sample], items: list[Item], best: dict[str, str], extra_tokens: Optional[list[int]] = None) -> Row:
    n = len(samples) or 1
    dom_n: dict[str, int] = defaultdict(int)
    dom_right: dict[str, int] = defaultdict(int)
    dom_acc: dict[str, int] = defaultdict(int)
    dom_steps: dict[str, list[int]] = defaultdict(list)
    finals: dict[str, Counter] = defaultdict(Counter)
    firsts: dict[str, Counter] = defaultdict(Counter)
    shares: Counter = Counter()
    right = 0
    for s, item in zip(samples, items):
        dom_n[item.domain] += 1
        dom_acc[item.domain] += s.correct
        if s.parsed:
            dom_steps[item.domain].append(s.steps)
        if s.workers:
            firsts[item.domain][s.workers[0]] += 1
        last = s.workers[-1] if s.workers else None
        if last is not None:
            shares[last] += 1
            finals[item.domain][last] += 1
        if last is not None and best.get(item.domain) == last:
            right += 1
            dom_right[item.domain] += 1
    parsed = [s for s in samples if s.parsed]
    tokens = [s.tokens + (extra_tokens[i] if extra_tokens else 0) for i, s in enumerate(samples)]
    return Row(
        system=system,
        reward=sum(s.reward for s in samples) / n,
        accuracy=sum(s.correct for s in samples) / n,
        parse_rate=len(parsed) / n,
        right_worker=right / n,
        steps=sum(s.steps for s in parsed) / max(1, len(parsed)),
        cost_usd=sum(s.cost_usd for s in samples) / n,
        tokens=sum(tokens) / n,
        per_domain_right={d: dom_right[d] / dom_n[d] for d in dom_n},
        per_domain_acc={d: dom_acc[d] / dom_n[d] for d in dom_n},
        per_domain_steps={d: sum(v) / len(v) for d, v in dom_steps.items() if v},
        worker_share={k: v / n for k, v in shares.most_common()},
        final_worker_by_domain={d: {k: v / dom_n[d] for k, v in c.most_common()} for d, c in finals.items()},
        first_worker_by_domain={d: {k: v / dom_n[d] for k, v in c.most_common()} for d, c in firsts.items()},
        shapes={k: v / n for k, v in Counter(_shape(s) for s in samples).most_common()},
        correct=[int(s.correct) for s in samples],
    )


def paired_bootstrap(a: list[int], b: list[int], *, resamples: int = 10_000, seed: int = 0) -> tuple[float, float, float]:
    """(mean of a - b, 2.5th and 97.5th percentile of that mean over questions resampled with replacement)."""
    if len(a) != len(b) or not a:
        raise ValueError("paired bootstrap needs two equally long, non-empty per-question lists")
    diff = [x - y for x, y in zip(a, b)]
    n, rng = len(diff), random.Random(seed)
    means = sorted(sum(diff[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    return sum(diff) / n, means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


def choose_checkpoint(validation_dir: str | Path, system: str = "after GRPO (trained)") -> tuple[str, list[tuple[str, float, float]]]:
    """The checkpoint to test, by a rule fixed before any run ends: the highest validation accuracy, ties
    to the later one (the warm-up first, checkpoints by step, `final` last). `validation_dir` holds one
    rows file per candidate (`warmup.json`, `checkpoint-40.json`, ..., `final.json`, as
    `benchmarks/train_cpu_eval.py --out` writes them). Returns (the winner's name, [(name, accuracy, steps)] in order)."""
    def order(path: Path) -> float:
        if path.stem == "final":
            return float("inf")
        if path.stem == "warmup":
            return float("-inf")
        prefix, _, step = path.stem.partition("-")
        if prefix != "checkpoint" or not step.isdigit():
            raise ValueError(f"{path}: expected warmup.json, checkpoint-<step>.json or final.json")
        return int(step)

    files = sorted(Path(validation_dir).glob("*.json"), key=order)
    if not files:
        raise FileNotFoundError(f"no validation rows (*.json) in {validation_dir}: run the validation step first")
    scored = []
    for path in files:
        rows = [r for r in json.loads(path.read_text()) if r.get("system") == system]
        if not rows:
            raise ValueError(f"{path}: no row for system {system!r}")
        scored.append((path.stem, float(rows[0]["accuracy"]), float(rows[0]["steps"])))
    best = max(range(len(scored)), key=lambda i: (scored[i][1], i))
    return scored[best][0], scored


def conductor_texts(model_dir: str, items: list[Item], spec: PoolSpec, cfg: TrainConfig, *, temperature: float, batch_size: int, seed: int) -> tuple[list[str], list[int]]:
    """(plans, the conductor's own tokens per plan: prompt + completion)."""
    from ..providers.transformers_local import load_checkpoint
    from ..decoding import generate_batch
    from ..model_files import resolve_model
    from .trainer import accelerator_device

    model, tokenizer = load_checkpoint(resolve_model(model_dir), device=accelerator_device(), dtype=cfg.model.dtype)
    prompts = [prompt_for(i, spec, cfg) for i in items]
    # A conductor trained with constrained rollouts is evaluated the same way (the runtime's grammar).
    formats = [cfg.rollout.format(len(spec.workers), cfg.prompt.max_steps, fine_grained=cfg.prompt.fine_grained)] * len(items) if cfg.rollout.constrained else None
    texts = generate_batch(model, tokenizer, prompts, max_new_tokens=cfg.settings["max_completion_length"], temperature=temperature,
                           seed=seed, batch_size=batch_size, formats=formats)
    own = [
        len(tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]) + len(tokenizer(t)["input_ids"])
        for p, t in zip(prompts, texts)
    ]
    return texts, own


def _policy_texts(name: str, items: list[Item], spec: PoolSpec, seed: int, **options) -> list[str]:
    async def plans() -> list[str]:
        policy = make_policy(name, **options)
        async with Pool(spec) as pool:
            return [(await policy.plan(PlanRequest(i.question, pool, seed=seed))).workflow.render() for i in items]

    return asyncio.run(plans())


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
    moa: bool = True,
) -> list[Row]:
    """Rows for the baselines, then one per conductor (label -> checkpoint dir or model ref).

    ``chains``: also score fixed chains of that many steps on the best single worker, each later step
    checking the earlier answers (access "all").
    """
    spec = load_pool(cfg.pool_path)
    items = load_items(cfg, held_out=True)[: n or None]
    domains = sorted({i.domain for i in items})
    best = best_by_domain(spec, domains)
    rows: list[Row] = []

    def add(row: Row) -> None:
        rows.append(row)
        if on_row:
            on_row(row)

    def score(texts: list[str], max_steps: int = 16) -> list[Sample]:
        # Baselines may be long (MoA: 8 steps); a conductor is held to its own step cap, as in training.
        return asyncio.run(_score_all(texts, items, spec, cfg, seed, max_steps))

    single = best_single(spec, domains)
    if single is not None:
        wf = Workflow((Step(spec.index(single), "Solve the overall task and give the final answer.", ()),)).render()
        add(summarise(f"best single worker ({single})", score([wf] * len(items)), items, best))
    for k in chains:
        if single is None or k < 2:
            continue
        steps = (Step(spec.index(single), "Solve the task.", ()),) + tuple(
            Step(spec.index(single), "Check the previous answers and give the final answer.", "all") for _ in range(k - 1)
        )
        wf = Workflow(steps).render()
        add(summarise(f"fixed {k}-step chain ({single} x{k})", score([wf] * len(items)), items, best))
    if best:
        texts = [Workflow((Step(spec.index(best[i.domain]), "Solve the overall task and give the final answer.", ()),)).render() for i in items]
        add(summarise("oracle single-step router", score(texts), items, best))
    if moa:
        add(summarise("MoA (7 proposers + random aggregator)", score(_policy_texts("moa", items, spec, seed, proposers=7, aggregator="random")), items, best))
    for label, ref in conductors.items():
        texts, own = conductor_texts(ref, items, spec, cfg, temperature=temperature, batch_size=batch_size, seed=seed)
        add(summarise(label, score(texts, cfg.prompt.max_steps), items, best, extra_tokens=own))
    return rows


def markdown_table(rows: list[Row], domains: list[str]) -> str:
    head = "| system | reward | accuracy | parse rate | right worker | " + " | ".join(f"right worker {d}" for d in domains) + " | steps | cost/q ($) |"
    sep = "|" + "---|" * (7 + len(domains))
    lines = [head, sep]
    for r in rows:
        per = " | ".join(f"{r.per_domain_right.get(d, 0.0):.2f}" for d in domains)
        lines.append(f"| {r.system} | {r.reward:.3f} | {r.accuracy:.3f} | {r.parse_rate:.2f} | {r.right_worker:.2f} | {per} | {r.steps:.2f} | {r.cost_usd:.5f} |")
    return "\n".join(lines)


def _top_two(share: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in list(share.items())[:2]) or "—"


def comparison_table(rows: list[Row], domains: list[str], *, against: tuple[str, ...] = ("oracle single-step router", "best single worker")) -> str:
    """Accuracy with paired-bootstrap 95 % intervals of the difference to the baselines, steps per domain,
    where code goes, and tokens per question relative to MoA."""
    base = {prefix: next((r for r in rows if r.system.startswith(prefix)), None) for prefix in against}
    moa = next((r for r in rows if r.system.startswith("MoA")), None)
    cols = [f"vs {p.split(' (')[0]} (points, 95% CI)" for p in against]
    head = ("| system | accuracy | " + " | ".join(cols) + " | " + " | ".join(f"acc {d}" for d in domains) + " | "
            + " | ".join(f"steps {d}" for d in domains) + " | first step on lcb | final step on lcb | tokens/q | tokens vs MoA |")
    lines = [head, "|---" * (6 + len(cols) + 2 * len(domains)) + "|"]
    for r in rows:
        deltas = []
        for prefix in against:
            b = base[prefix]
            if b is None or b is r or len(b.correct) != len(r.correct):
                deltas.append("—")
                continue
            mean, lo, hi = paired_bootstrap(r.correct, b.correct)
            deltas.append(f"{100 * mean:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]")
        first, final = (_top_two(by_domain.get("lcb", {})) for by_domain in (r.first_worker_by_domain, r.final_worker_by_domain))
        ratio = f"{r.tokens / moa.tokens:.3f}x" if moa and moa.tokens else "—"  # 3 places: the goal is <= 0.25x
        lines.append(
            f"| {r.system} | {100 * r.accuracy:.1f} | " + " | ".join(deltas) + " | "
            + " | ".join(f"{100 * r.per_domain_acc.get(d, 0.0):.1f}" for d in domains) + " | "
            + " | ".join(f"{r.per_domain_steps.get(d, 0.0):.2f}" for d in domains) + f" | {first} | {final} | {r.tokens:,.0f} | {ratio} |"
        )
    return "\n".join(lines)
