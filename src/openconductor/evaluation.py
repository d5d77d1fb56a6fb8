"""``conductor eval``: tasks × policies × repeats on one pool, graded, resumable, summarised.

Every (task, policy, question, repeat) becomes one line of ``results.jsonl`` in the output folder the
moment it finishes, with the id of its Run in the trace store; a re-run skips the lines already there,
so an interrupted eval resumes and a finished one just re-renders its report (table, JSON, PNG).
``setup.json`` fingerprints what the results were made with (the pool's content, each policy, every
question, the seed and limits): a re-run with anything different is refused, never mixed in; adding
policies, questions or repeats extends the run.
Runs go through the same ``solve`` as ``conductor ask``; worker calls go through the response cache.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from pydantic import BaseModel, Field

from .budget import Limits
from .executor import solve
from .policies import Policy, make_policy
from .policies.baselines import worker_index
from .pool import Pool, PoolSpec
from .records import Run
from .tasks import Question, Task, agrade, check_graders

RESULTS_FILE = "results.jsonl"
SETUP_FILE = "setup.json"
SUMMARY_FILE = "summary.json"
TABLE_FILE = "table.md"
PLOT_FILE = "pareto.png"


class EvalError(ValueError):
    """Bad eval input: an unknown policy spec, a results file from another setup, ..."""


# ------------------------------------------------------------------------------------------ policies

# The positional argument of "name:ARG" for each policy.
POSITIONAL = {"single": "worker", "self-reflection": "worker", "moa": "aggregator", "router": "model", "fixed": "workflow"}
WORKER_KEYS = ("worker", "aggregator")


def _value(text: str) -> Any:
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def parse_policy_specs(specs: Iterable[str], pool: PoolSpec) -> list[tuple[str, Policy]]:
    """``name``, ``name:ARG`` or ``name:key=value,key=value``; ``single:*`` means one per worker.

    Returns (label, policy) pairs; the label is what the table and results file call the policy.
    """
    out: list[tuple[str, Policy]] = []
    for spec in specs:
        name, _, arg = spec.partition(":")
        name = name.strip()
        if name == "single" and arg == "*":
            from .pool import TOOL_PROVIDERS

            for w in pool.workers:  # language models only: a tool alone answers nothing (name it to try)
                if w.provider != "conductor" and w.provider not in TOOL_PROVIDERS:
                    out.append((f"single:{w.name}", _make(name, {"worker": w.name}, spec)))
            continue
        options: dict[str, Any] = {}
        if arg:
            if "=" in arg:
                for part in arg.split(","):
                    key, eq, value = part.partition("=")
                    if not eq:
                        raise EvalError(f"policy {spec!r}: expected key=value pairs, got {part!r}")
                    key = key.strip()
                    # A worker is named as written (a name such as "true" or "1e3" is not a value to convert).
                    options[key] = value.strip() if key in WORKER_KEYS else _value(value.strip())
            elif name in POSITIONAL:
                options[POSITIONAL[name]] = arg
            else:
                raise EvalError(f"policy {spec!r}: {name!r} takes key=value options, not a bare argument")
        out.append((_label(spec, name, options), checked_policy(name, options, pool, spec)))
    labels = [label for label, _ in out]
    if len(set(labels)) != len(labels):
        raise EvalError(f"a policy is listed twice: {labels}")
    return out


def checked_policy(name: str, options: dict[str, Any], pool: PoolSpec, spec: Optional[str] = None) -> Policy:
    """The policy ``name`` with ``options``, its workers checked against ``pool`` now: a typo'd worker or
    workflow fails before any question runs, not as a row of failed runs. EvalError says which."""
    spec = spec or name
    if name == "fixed" and "workflow" not in options:
        declared = ", ".join(sorted(pool.workflows)) or "none in this pool"
        raise EvalError(f"the fixed policy needs a workflow: --policy fixed:NAME (declared: {declared}) or fixed:PATH.toml")
    policy = _make(name, options, spec)
    try:
        for key in WORKER_KEYS:
            if key in options:
                worker_index(pool, options[key])
        if hasattr(policy, "resolve"):  # a fixed workflow
            policy.resolve(pool)
    except ValueError as exc:
        raise EvalError(f"policy {spec!r}: {exc}") from exc
    return policy


def _label(spec: str, name: str, options: dict) -> str:
    """The spec as written, except a router is named by its model file's stem, not its whole path."""
    if name == "router" and "model" in options:
        stem = Path(str(options["model"])).stem
        return "router" if stem == "router" else f"router:{stem}"
    return spec


def _make(name: str, options: dict, spec: str) -> Policy:
    try:
        return make_policy(name, **options)
    except TypeError as exc:
        raise EvalError(f"policy {spec!r}: bad option(s) {sorted(options)}: {exc}") from exc
    except ValueError as exc:
        raise EvalError(f"policy {spec!r}: {exc}") from exc


# ------------------------------------------------------------------------------------------- records


class EvalRecord(BaseModel):
    """One graded run: a line of results.jsonl."""

    task: str
    policy: str
    question_id: str
    repeat: int
    question: str  # the exact text the policy was asked (question + answer-format instruction)
    domain: str = ""
    run_id: str
    seed: int
    status: str
    final_answer: str
    correct: bool
    score: float
    extracted: Optional[str] = None
    reason: str = ""
    steps: int
    calls: int
    tokens: int
    worker_tokens: int
    conductor_tokens: int
    cost_usd: float
    wall_s: float
    workers_used: list[str] = Field(default_factory=list)  # per step, in order
    plan_fallback: Optional[str] = None
    error: Optional[str] = None
    finished_at: float = Field(default_factory=time.time)

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.task, self.policy, self.question_id, self.repeat)


def load_records(path: Path) -> list[EvalRecord]:
    if not path.exists():
        return []
    records = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(EvalRecord.model_validate_json(line))
        except ValueError as exc:
            # A last line cut short by a crash is dropped (it is re-run); anything else is someone else's file.
            if n == len(lines):
                continue
            raise EvalError(f"{path}:{n}: not an eval record: {exc}") from exc
    return records


def _drop_partial_line(path: Path) -> None:
    """A crash mid-write leaves a last line without its newline; cut it so appends start clean."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        path.write_bytes(data[: data.rfind(b"\n") + 1])


def question_seed(base: int, task: str, question_id: str, repeat: int) -> int:
    """The sampling seed of one (question, repeat): the same for every policy, stable across runs."""
    digest = hashlib.sha256(f"{base}|{task}|{question_id}|{repeat}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % (2**31 - 1)


async def record_from_run(task: Task, question: Question, label: str, repeat: int, seed: int, run: Run) -> EvalRecord:
    if run.final_answer:
        try:
            result = await agrade(question, run.final_answer)
            correct, score, extracted, reason = result.correct, result.score, result.extracted, result.reason
        except Exception as exc:  # a malformed reference or a grader bug: this record scores 0, the eval goes on
            logging.getLogger(__name__).warning("grading %s/%s failed, scored 0: %s: %s", task.name, question.id, type(exc).__name__, exc)
            correct, score, extracted, reason = False, 0.0, None, f"grader failed: {type(exc).__name__}: {str(exc)[:300]}"
    else:
        correct, score, extracted, reason = False, 0.0, None, f"no answer (run {run.status})"
    totals = run.totals
    return EvalRecord(
        task=task.name, policy=label, question_id=question.id, repeat=repeat, question=task.text(question),
        domain=str(question.metadata.get("domain") or task.domain), run_id=run.id, seed=seed, status=run.status,
        final_answer=run.final_answer, correct=correct, score=score, extracted=extracted, reason=reason,
        steps=len(run.steps), calls=totals.calls, tokens=totals.usage.total_tokens,
        worker_tokens=totals.worker_usage.total_tokens, conductor_tokens=totals.conductor_usage.total_tokens,
        cost_usd=totals.usage.cost_usd, wall_s=totals.wall_s, workers_used=[s.worker_name for s in run.steps],
        plan_fallback=run.plan.fallback if run.plan else None, error=run.error,
    )


# ---------------------------------------------------------------------------------------------- setup


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


class Setup(BaseModel):
    """What an eval folder's results were made with (``setup.json``), as digests of content, not names."""

    pool: str  # the pool's name, for messages
    pool_digest: str  # its workers and every setting of theirs (the conductor section belongs to the conductor policy)
    settings: dict[str, Any]  # sampling seed, per-request limits
    policies: dict[str, str] = Field(default_factory=dict)  # label -> digest of Policy.fingerprint
    questions: dict[str, dict[str, str]] = Field(default_factory=dict)  # task -> question id -> digest of text, reference, grader


def eval_setup(tasks: list[Task], policies: list[tuple[str, Policy]], spec: PoolSpec, *, seed: int, limits: Limits) -> Setup:
    workers = spec.model_dump(mode="json", include={"workers", "strongest"})
    return Setup(
        pool=spec.name, pool_digest=_digest(workers), settings={"seed": seed, "limits": limits.model_dump()},
        policies={label: _digest(policy.fingerprint(spec)) for label, policy in policies},
        questions={t.name: {q.id: _digest([t.text(q), q.reference, q.grader, q.grader_options]) for q in t.questions} for t in tasks},
    )


def _differences(old: Setup, new: Setup) -> list[str]:
    found = []
    if old.pool_digest != new.pool_digest:
        same = " (same name, other workers or settings)" if old.pool == new.pool else ""
        found.append(f"the pool: {old.pool!r} there, {new.pool!r} now{same}")
    for key in sorted(set(old.settings) | set(new.settings)):
        if old.settings.get(key) != new.settings.get(key):
            found.append(f"{key}: {old.settings.get(key)} there, {new.settings.get(key)} now")
    for label in sorted(set(old.policies) & set(new.policies)):
        if old.policies[label] != new.policies[label]:
            found.append(f"policy {label!r} is set up differently (its options, model or the pool's [conductor] section)")
    for task in sorted(set(old.questions) & set(new.questions)):
        changed = [q for q, d in new.questions[task].items() if old.questions[task].get(q, d) != d]
        if changed:
            found.append(f"{len(changed)} question(s) of task {task!r} differ, e.g. {changed[0]!r} (other data, task options or generator seed)")
    return found


def check_setup(out: Path, setup: Setup, records: list["EvalRecord"]) -> Setup:
    """The setup to record in ``out``: this one merged with the one already there. Raises EvalError if
    the results already in ``out`` were made with anything this run does differently."""
    hint = f"choose another --out, or pass --fresh to move the old files aside and start over in {out}"
    path = out / SETUP_FILE
    if not records:
        return setup
    if not path.exists():
        raise EvalError(f"{out} holds {len(records)} result(s) without a {SETUP_FILE} (written by an older openconductor), "
                        f"so they cannot be checked against this pool, these policies and questions; {hint}")
    try:
        old = Setup.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise EvalError(f"{path} is not an eval setup ({exc}); {hint}") from exc
    differ = _differences(old, setup)
    if differ:
        raise EvalError(f"{out} holds results of another setup, which this run would mix into its table: "
                        + "; ".join(differ) + f". To keep both, {hint}")
    questions = {t: {**old.questions.get(t, {}), **qs} for t, qs in setup.questions.items()}
    return setup.model_copy(update={"policies": {**old.policies, **setup.policies}, "questions": {**old.questions, **questions}})


def start_fresh(out: Path) -> Optional[Path]:
    """Move an earlier run's files out of the way (into ``out/replaced-<time>/``); nothing is deleted."""
    files = [out / name for name in (RESULTS_FILE, SETUP_FILE, SUMMARY_FILE, TABLE_FILE, PLOT_FILE) if (out / name).exists()]
    if not files:
        return None
    target = out / time.strftime("replaced-%Y%m%d-%H%M%S")
    target.mkdir(parents=True, exist_ok=False)
    for f in files:
        f.rename(target / f.name)
    return target


# -------------------------------------------------------------------------------------------- running

ProgressFn = Callable[[EvalRecord], None]


async def run_eval(
    tasks: list[Task],
    policies: list[tuple[str, Policy]],
    spec: PoolSpec,
    out: Path,
    *,
    repeats: int = 1,
    concurrency: int = 4,
    seed: int = 0,
    limits: Optional[Limits] = None,
    cache=None,
    store=None,
    on_record: Optional[ProgressFn] = None,
    on_start: Optional[Callable[[int, int], None]] = None,
) -> list[EvalRecord]:
    """Run every (task, policy, question, repeat) not yet in ``out/results.jsonl``; return all records.

    Raises EvalError, before any run, if ``out`` holds results of another setup (``check_setup``).
    """
    if repeats < 1 or concurrency < 1:
        raise EvalError("repeats and concurrency must be >= 1")
    check_graders([q for t in tasks for q in t.questions])
    out.mkdir(parents=True, exist_ok=True)
    path = out / RESULTS_FILE
    _drop_partial_line(path)
    earlier = load_records(path)
    setup = check_setup(out, eval_setup(tasks, policies, spec, seed=seed, limits=limits or spec.limits), earlier)
    (out / SETUP_FILE).write_text(setup.model_dump_json(indent=1), encoding="utf-8")
    done = {r.key: r for r in earlier}
    jobs = [
        (task, q, label, policy, r)
        for task in tasks
        for r in range(repeats)
        for q in task.questions
        for label, policy in policies
        if (task.name, label, q.id, r) not in done
    ]
    wanted = {(t.name, label, q.id, r) for t in tasks for q in t.questions for label, _ in policies for r in range(repeats)}
    if on_start:
        on_start(len(jobs), len(wanted) - len(jobs))
    write_lock = asyncio.Lock()
    gate = asyncio.Semaphore(concurrency)
    fresh: list[EvalRecord] = []

    async with Pool(spec, cache=cache) as pool:

        async def one(task: Task, q: Question, label: str, policy: Policy, repeat: int) -> None:
            s = question_seed(seed, task.name, q.id, repeat)
            async with gate:
                run = await solve(
                    task.text(q), policy, pool, limits=limits, seed=s,
                    metadata={"eval": {"task": task.name, "question_id": q.id, "policy": label, "repeat": repeat}},
                )
            # agrade keeps the event loop free: code runs in the sandbox, the rest in the grading process.
            record = await record_from_run(task, q, label, repeat, s, run)
            if store is not None:
                store.save(run)
            async with write_lock:
                with path.open("a", encoding="utf-8") as fh:
                    fh.write(record.model_dump_json() + "\n")
                fresh.append(record)
            if on_record:
                on_record(record)

        await asyncio.gather(*(one(*job) for job in jobs))

    return [r for r in list(done.values()) + fresh if r.key in wanted]


# ------------------------------------------------------------------------------------------- summary


class SummaryRow(BaseModel):
    task: str
    policy: str
    n: int
    accuracy: float
    stderr: float
    mean_score: float
    tokens: float  # per question, workers + conductor
    conductor_tokens: float
    calls: float
    cost_usd: float
    steps: float
    latency_s: float
    plan_fallbacks: int
    errors: int


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _stderr(values: list[float]) -> float:
    n = len(values)
    if n < 2:
        return 0.0
    m = _mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1) / n)


def summarize(records: list[EvalRecord]) -> list[SummaryRow]:
    groups: dict[tuple[str, str], list[EvalRecord]] = defaultdict(list)
    for r in records:
        groups[(r.task, r.policy)].append(r)
    rows = []
    for (task, policy), rs in groups.items():
        correct = [1.0 if r.correct else 0.0 for r in rs]
        rows.append(
            SummaryRow(
                task=task, policy=policy, n=len(rs), accuracy=_mean(correct), stderr=_stderr(correct),
                mean_score=_mean([r.score for r in rs]), tokens=_mean([r.tokens for r in rs]),
                conductor_tokens=_mean([r.conductor_tokens for r in rs]), calls=_mean([r.calls for r in rs]),
                cost_usd=_mean([r.cost_usd for r in rs]), steps=_mean([r.steps for r in rs]),
                latency_s=_mean([r.wall_s for r in rs]), plan_fallbacks=sum(1 for r in rs if r.plan_fallback),
                errors=sum(1 for r in rs if r.status in ("error", "plan_failed")),
            )
        )
    return rows


def markdown_table(rows: list[SummaryRow]) -> str:
    lines = [
        "| task | policy | n | accuracy ± s.e. | tokens/q | calls/q | cost/q ($) | steps | latency (s) | fallbacks | errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.task} | {r.policy} | {r.n} | {100 * r.accuracy:.1f} ± {100 * r.stderr:.1f} | {r.tokens:.0f} | "
            f"{r.calls:.2f} | {r.cost_usd:.5f} | {r.steps:.2f} | {r.latency_s:.1f} | {r.plan_fallbacks} | {r.errors} |"
        )
    return "\n".join(lines)


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of points no other point beats on both fewer tokens and higher accuracy."""
    front = []
    for i, (x, y) in enumerate(points):
        dominated = any((x2 <= x and y2 >= y) and (x2 < x or y2 > y) for j, (x2, y2) in enumerate(points) if j != i)
        if not dominated:
            front.append(i)
    return sorted(front, key=lambda i: points[i][0])


def plot(rows: list[SummaryRow], path: Path, title: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = sorted({r.task for r in rows})
    fig, axes = plt.subplots(1, len(tasks), figsize=(6.4 * len(tasks), 4.6), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        rs = [r for r in rows if r.task == task]
        points = [(max(r.tokens, 1.0), 100 * r.accuracy) for r in rs]
        for r, (x, y) in zip(rs, points):
            ax.errorbar([x], [y], yerr=[100 * r.stderr], fmt="o", capsize=3)
            ax.annotate(r.policy, (x, y), textcoords="offset points", xytext=(5, 4), fontsize=8)
        front = pareto_front(points)
        ax.plot([points[i][0] for i in front], [points[i][1] for i in front], "--", color="grey", linewidth=1, label="Pareto front")
        ax.set_xscale("log")
        ax.set_xlabel("tokens per question (workers + conductor, log)")
        ax.set_ylabel("accuracy (%)")
        ax.set_title(f"{task}" + (f" — {title}" if title else ""), fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(records: list[EvalRecord], out: Path, *, meta: Optional[dict] = None, title: str = "") -> list[SummaryRow]:
    """summary.json, table.md and pareto.png in ``out``; returns the summary rows."""
    rows = summarize(records)
    order = {p: i for i, p in enumerate(dict.fromkeys(r.policy for r in records))}
    rows.sort(key=lambda r: (r.task, order.get(r.policy, 0)))
    (out / SUMMARY_FILE).write_text(json.dumps({"meta": meta or {}, "rows": [r.model_dump() for r in rows]}, indent=2))
    (out / TABLE_FILE).write_text(markdown_table(rows) + "\n")
    if rows:
        try:
            plot(rows, out / PLOT_FILE, title)
        except ImportError as exc:  # the plot needs matplotlib (the eval extra); the table and JSON do not
            logging.getLogger(__name__).warning("no %s: %s is not installed (pip install 'openconductor[eval]')", PLOT_FILE, exc.name)
    return rows
