"""Held-out evaluation of trained conductors against the baselines, on the one evaluator.

Every conductor writes one workflow per held-out question (the runtime prompt it was trained with,
greedy decoding by default, batched on torch; no resampling and no fallback: an unparseable plan scores
as in training), and ``openconductor.evaluation`` runs those plans and the baselines on the pool and
grades the answers. The baselines: the best single worker (highest mean declared skill), an oracle
single-step router (each domain's best worker), Mixture-of-Agents (7 proposers and a random aggregator,
the paper's 8 calls) and optional fixed chains. Each row adds the training reward and the share of
questions routed to their domain's best worker; differences between two systems come with a
paired-bootstrap 95 % interval over the questions. On the simulated pool every number is SIMULATED.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from ..evaluation import EvalRecord, evaluate as run_policies, paired_bootstrap, summarize
from ..policies.base import Policy, make_policy
from ..policies.baselines import GivenPlans, GivenWorkflow
from ..policies.lookup import OracleRouter, best_by_domain, best_single
from ..pool import Pool, PoolSpec, load_pool
from ..records import Usage
from ..tasks import Question, Task
from ..workflow import Step, Workflow
from .config import RewardSettings, TrainConfig
from .data import Item, load_items, prompt_for
from .reward import record_reward

__all__ = ["Row", "evaluate", "held_out_task", "run_held_out", "baselines", "summarise", "paired_bootstrap", "choose_checkpoint", "conductor_texts",
           "markdown_table", "comparison_table", "best_by_domain", "best_single"]


@dataclass
class Row:
    """One system's held-out numbers (the JSON rows ``conductor train-eval --out`` writes)."""

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


def held_out_task(items: list[Item]) -> Task:
    """The held-out items as an eval task: question ids are their positions, graded as the reward grades."""
    return Task("held-out", [Question(id=str(i), prompt=item.question, reference=item.reference, grader=item.task,
                                      grader_options=dict(item.grader_options), metadata={"domain": item.domain})
                             for i, item in enumerate(items)])


def summarise(system: str, records: list[EvalRecord], reward: RewardSettings, best: dict[str, str]) -> Row:
    """One system's Row from its records (in question order), with the training reward under ``reward``."""
    records = sorted(records, key=lambda r: (int(r.question_id), r.repeat))
    [summary] = summarize(records)
    n = len(records) or 1
    right = [r for r in records if r.workers_used and best.get(r.domain) == r.workers_used[-1]]
    domains = summary.domains
    return Row(
        system=system,
        reward=sum(record_reward(r, reward) for r in records) / n,
        accuracy=summary.accuracy,
        parse_rate=summary.parse_rate,
        right_worker=len(right) / n,
        steps=summary.steps,
        cost_usd=summary.cost_usd,
        tokens=summary.tokens,
        per_domain_right={d: sum(1 for r in right if r.domain == d) / s.n for d, s in domains.items()},
        per_domain_acc={d: s.accuracy for d, s in domains.items()},
        per_domain_steps={d: s.steps for d, s in domains.items() if any(r.planned for r in records if r.domain == d)},
        worker_share=summary.worker_share,
        final_worker_by_domain={d: s.final_worker for d, s in domains.items() if s.final_worker},
        first_worker_by_domain={d: s.first_worker for d, s in domains.items() if s.first_worker},
        shapes=summary.shapes,
        correct=[int(r.correct) for r in records],
    )


def choose_checkpoint(validation_dir: str | Path, system: str = "after GRPO (trained)") -> tuple[str, list[tuple[str, float, float]]]:
    """The checkpoint to test, by a rule fixed before any run ends: the highest validation accuracy, ties
    to the later one (the warm-up first, checkpoints by step, `final` last). `validation_dir` holds one
    rows file per candidate (`warmup.json`, `checkpoint-40.json`, ..., `final.json`, as
    `conductor train-eval --out` writes them). Returns (the winner's name, [(name, accuracy, steps)] in order)."""
    def order(path: Path) -> float:
        if path.stem == "final":
            return float("inf")
        if path.stem == "warmup":
            return float("-inf")
        prefix, _, step = path.stem.partition("-")
        if prefix != "checkpoint" or not (step.isascii() and step.isdigit()):
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


def conductor_texts(model_dir: str, items: list[Item], spec: PoolSpec, cfg: TrainConfig, *, temperature: float, batch_size: int, seed: int) -> tuple[list[str], list[Usage]]:
    """(plans, what writing each cost the conductor: prompt and completion tokens)."""
    from ..decoding import generate_batch
    from ..model_files import resolve_model
    from ..conductor.checkpoint import held_wordings, load_checkpoint
    from .trainer import accelerator_device

    model, tokenizer = load_checkpoint(resolve_model(model_dir), device=accelerator_device(), dtype=cfg.model.dtype)
    prompts = [prompt_for(i, spec, cfg) for i in items]
    # A conductor trained with constrained rollouts is evaluated the same way (the runtime's grammar, held to the wordings
    # its manifest records as the pool holds it).
    wordings = held_wordings(spec.conductor, model_dir)
    fmt = cfg.rollout.format(len(spec.workers), cfg.prompt.max_steps, fine_grained=cfg.prompt.fine_grained, wordings=wordings)
    formats = [fmt] * len(items) if cfg.rollout.constrained else None
    texts = generate_batch(model, tokenizer, prompts, max_new_tokens=cfg.settings["max_completion_length"], temperature=temperature,
                           seed=seed, batch_size=batch_size, formats=formats)
    usage = [
        Usage(input_tokens=len(tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]),
              output_tokens=len(tokenizer(t)["input_ids"]))
        for p, t in zip(prompts, texts)
    ]
    return texts, usage


def baselines(spec: PoolSpec, domains: list[str], *, chains: tuple[int, ...] = (), moa: bool = True) -> list[tuple[str, Policy]]:
    """(label, policy) of the baselines: the best single worker, fixed chains on it, the oracle router, MoA."""
    single = best_single(spec, domains)
    out: list[tuple[str, Policy]] = [(f"best single worker ({single})", make_policy("single", worker=single))]
    for k in (k for k in chains if k >= 2):
        steps = (Step(spec.index(single), "Solve the task.", ()),) + tuple(
            Step(spec.index(single), "Check the previous answers and give the final answer.", "all") for _ in range(k - 1)
        )
        out.append((f"fixed {k}-step chain ({single} x{k})", GivenWorkflow(Workflow(steps), name=f"chain-{k}")))
    best = best_by_domain(spec, domains)
    if best:
        out.append(("oracle single-step router", OracleRouter(best)))
    if moa:
        out.append(("MoA (7 proposers + random aggregator)", make_policy("moa", proposers=7, aggregator="random")))
    return out


def evaluate(
    cfg: TrainConfig,
    conductors: dict[str, str],
    *,
    n: Optional[int] = None,
    temperature: float = 0.0,
    batch_size: int = 8,
    seed: int = 0,
    on_row: Optional[Callable[[Row], None]] = None,
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
    task = held_out_task(items)
    rows: list[Row] = []

    def add(label: str, policy: Policy) -> None:
        records = asyncio.run(run_held_out(task, label, policy, spec, seed))
        rows.append(summarise(label, records, cfg.reward, best))
        if on_row:
            on_row(rows[-1])

    for label, policy in baselines(spec, domains, chains=chains, moa=moa):
        add(label, policy)
    for label, ref in conductors.items():
        texts, usage = conductor_texts(ref, items, spec, cfg, temperature=temperature, batch_size=batch_size, seed=seed)
        # A conductor is held to its own step cap, as in training.
        add(label, GivenPlans({i.question: t for i, t in zip(items, texts)}, max_steps=cfg.prompt.max_steps,
                              usage={i.question: u for i, u in zip(items, usage)}, name="trained-sample"))
    return rows


async def run_held_out(task: Task, label: str, policy: Policy, spec: PoolSpec, seed: int = 0) -> list[EvalRecord]:
    """One system's records on the held-out task: every question at once (the pool's per-worker limits
    bound the calls), each with the same seed, as the training reward runs them."""
    async with Pool(spec) as pool:
        return await run_policies([task], [(label, policy)], pool, concurrency=max(1, len(task)), seed=seed, seed_per_question=False)


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
