"""Held-out evaluation of trained conductors against baselines, on the one evaluator (``openconductor.evaluation``).

**``conductor train evaluate``** (``evaluate_conductors``): every conductor writes one workflow per held-out question
(the runtime prompt it was trained with, greedy decoding by default, batched on torch; no resampling and no
fallback: an unparseable plan scores as in training), and the evaluator runs those plans and the baselines on the
pool and grades the answers. The baselines: the best single worker (highest mean declared skill), an oracle
single-step router (each domain's best worker), Mixture-of-Agents (7 proposers and a random aggregator, the paper's
8 calls) and optional fixed chains. Each row adds the training reward and the share of questions routed to their
domain's best worker (``reward_table``); differences between two systems come with a paired-bootstrap 95 % interval
over the questions (``comparison_table``). On the simulated pool every number is SIMULATED.

**The fit's evaluation** (``evaluate_fit``): the conductor against every single worker, the best fixed workflow and
the best per-task lookup table, on held-out questions, through ``evaluation.run_eval``. Two question sets, reported
apart: held-out questions of the groups the fit trained on, and questions of kinds it never saw (``--eval-task``).
The baselines are chosen on the TRAINING questions, before any held-out question runs: the best fixed workflow is
the candidate with the highest mean screen reward over all groups, the lookup table gives each group its best
finalist (and unseen kinds the best fixed workflow). Every conductor plans as ``conductor ask`` would with it (the
pool's ``[conductor] checkpoint`` set to it: its llama.cpp copy under the grammar when it has one). Each difference
comes with a paired-bootstrap 95 % interval over the same questions (``report``). Results are a resumable
``conductor eval`` folder (``eval/``), and the calls go through the fit's replay store.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from ..evaluation import EvalRecord, compare, interval_text, paired_bootstrap, run_eval, summarize
from ..evaluation import evaluate as run_policies
from ..policies.base import Policy, make_policy
from ..policies.baselines import GivenPlans, GivenWorkflow
from ..policies.lookup import LookupTable, OracleRouter, best_by_domain, best_single
from ..pool import Pool, PoolSpec, load_pool
from ..records import Usage
from ..tasks import Question, Task
from ..workflow import Step, Workflow, parse
from .config import RewardSettings, TrainConfig
from .data import Item, load_items, prompt_for
from .reward import record_reward
from .search.candidates import Candidate, models

HELD_OUT, UNSEEN = "held-out", "unseen"  # the eval tasks' names: held-out questions of the trained groups, kinds never trained on


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


def eval_task(name: str, items: list[Item]) -> Task:
    """Items as an eval task: question ids are their positions, each keeps its group as its domain, graded as the
    reward grades."""
    return Task(name, [Question(id=str(i), prompt=item.question, reference=item.reference, grader=item.task,
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


def evaluate_conductors(
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
    task = eval_task(HELD_OUT, items)
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


def reward_table(rows: list[Row], domains: list[str]) -> str:
    """Markdown: each system's training reward, accuracy, parse rate, share routed to the domain's best worker, steps, cost."""
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


def baseline_policies(spec: PoolSpec, candidates: list[Candidate], table: dict[str, str], best_fixed: str) -> list[tuple[str, Policy]]:
    """(label, policy): each model alone, the best fixed workflow, the per-task lookup table."""
    by_name = {c.name: c for c in candidates}
    out: list[tuple[str, Policy]] = [(f"single:{spec.workers[i].name}", make_policy("single", worker=spec.workers[i].name)) for i in models(spec)]
    out.append((f"best fixed ({best_fixed})", GivenWorkflow(parse(by_name[best_fixed].text), name=f"fixed:{best_fixed}")))
    lookup = LookupTable({g: parse(by_name[n].text) for g, n in table.items()}, default=parse(by_name[best_fixed].text), name="lookup")
    out.append(("lookup (per task)", lookup))
    return out


def with_checkpoint(spec: PoolSpec, checkpoint: Path) -> tuple[PoolSpec, dict]:
    """The pool planned by ``checkpoint`` as ``conductor ask --conductor CHECKPOINT`` plans it, and the
    conductor policy's options."""
    from ..conductor.checkpoint import trained_conductor

    return trained_conductor(spec, str(checkpoint))


async def evaluate_fit(spec: PoolSpec, tasks: list[Task], baselines: list[tuple[str, Policy]], conductors: dict[str, Path], out: Path, *,
                       cache, on_record=None, on_start=None, threads: Optional[int] = None,
                       settings: Optional[dict[str, dict[str, Any]]] = None) -> list[EvalRecord]:
    """Baselines, then each conductor (label -> checkpoint), into the eval folder ``out``; all records.
    ``threads``: for the conductor's llama.cpp copy, as the pool's local workers have them. ``settings``: per label,
    ``[conductor]`` settings that differ from the pool file's (``unfamiliar``: the same conductor with and without its gate)."""
    records = await run_eval(tasks, baselines, spec, out, cache=cache, on_record=on_record, on_start=on_start)
    for label, checkpoint in conductors.items():
        own = (settings or {}).get(label)
        pool = spec.model_copy(update={"conductor": spec.conductor.model_copy(update=own)}) if own else spec
        planned, options = with_checkpoint(pool, checkpoint)
        planned = planned.with_local_threads(threads) if threads else planned
        records = await run_eval(tasks, [(label, make_policy("conductor", **options))], planned, out, cache=cache, on_record=on_record,
                                 on_start=on_start)
    wanted = {label for label, _ in baselines} | set(conductors)
    return _latest([r for r in _all(out) if r.policy in wanted]) if conductors else records


def _all(out: Path) -> list[EvalRecord]:
    from ..evaluation import RESULTS_FILE, load_records

    return load_records(out / RESULTS_FILE)


def _latest(records: list[EvalRecord]) -> list[EvalRecord]:
    """One record per key (a resumed folder holds each once; this guards against a rerun's duplicates)."""
    return list({r.key: r for r in records}.values())


def report(records: list[EvalRecord], conductors: list[str], baselines: list[str]) -> str:
    """Markdown: per question set, each policy's accuracy, tokens and steps, and every conductor's paired
    difference to each baseline (and to the first conductor: what GRPO adds over the copy)."""
    lines = []
    for task in dict.fromkeys(r.task for r in records):
        rows = [r for r in records if r.task == task]
        summary = {s.policy: s for s in summarize(rows)}
        n = max((s.n for s in summary.values()), default=0)
        title = "held-out questions of the training groups" if task == HELD_OUT else "kinds never trained on"
        lines += [f"### {title} ({task}, {n} questions)", "", "| policy | accuracy | tokens/q | steps |", "|---|---|---|---|"]
        for label in baselines + conductors:
            s = summary.get(label)
            if s is not None:
                lines.append(f"| {label} | {100 * s.accuracy:.1f} | {s.tokens:,.0f} | {s.steps:.2f} |")
        against = baselines + conductors[:1]
        lines += ["", "| conductor | " + " | ".join(f"vs {b}" for b in against) + " |", "|---" * (len(against) + 1) + "|"]
        for label in conductors:
            mine = [r for r in rows if r.policy == label]
            cells = [_versus(mine, [r for r in rows if r.policy == b], b) if b != label else "—" for b in against]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines += [""]
    return "\n".join(lines)


def _versus(mine: list[EvalRecord], theirs: list[EvalRecord], name: str) -> str:
    if not mine or not theirs:
        return "—"
    return interval_text(compare(mine, theirs, name=name))


def per_group(records: list[EvalRecord], label: str) -> dict[str, float]:
    """Accuracy per group of one policy (for the report's per-kind lines)."""
    out: dict[str, list[int]] = {}
    for r in records:
        if r.policy == label:
            out.setdefault(r.domain, []).append(int(r.correct))
    return {g: sum(v) / len(v) for g, v in out.items()}


def group_line(records: list[EvalRecord], labels: list[str], task: Optional[str] = None) -> str:
    """One line per group: each policy's accuracy there (percent)."""
    rows = [r for r in records if task is None or r.task == task]
    table = {label: per_group(rows, label) for label in labels}
    groups = sorted({g for t in table.values() for g in t})
    return "\n".join(f"- {g}: " + ", ".join(f"{label} {100 * table[label].get(g, 0.0):.0f}" for label in labels) for g in groups)
