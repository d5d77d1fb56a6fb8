"""The `conductor` command. Thin: parses flags and calls the modules that do the work."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .budget import Limits
from .clikit import console, fail, load_pool_or_default
from .executor import Event, solve
from .policies import make_policy, policy_names
from .pool import Pool, PoolConfigError
from .records import Run
from .traces import TraceNotFound, TraceStore

app = typer.Typer(help="openconductor: an LM conductor that plans workflows over a pool of LLMs.", no_args_is_help=True)

SAMPLE_QUESTION = "A train travels 60 km in 45 minutes. What is its average speed in km/h?"


def build_policy(name: str, worker: Optional[str], rounds: int):
    options: dict = {}
    if name in ("single", "self-reflection") and worker:
        options["worker"] = worker
    if name == "moa" and worker:
        options["aggregator"] = worker
    if name == "self-reflection":
        options["rounds"] = rounds
    try:
        return make_policy(name, **options)
    except ValueError as exc:
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
        parts.append(Text(f"workflow ({len(run.steps)} steps) — {run.plan.workflow and run.plan.workflow.get('reasoning', '')}", style="bold"))
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
    body.append(step.subtask + "\n", style="italic")
    output = step.output or partial
    if step.error:
        body.append(step.error + "\n", style="red")
    if output:
        body.append(output.strip()[:1500])
    if step.nested is not None and step.nested.plan is not None:
        body.append(f"\n↳ recursive round: {len(step.nested.steps)} step(s)" if step.nested.steps else "\n↳ recursive round accepted the answer", style="magenta")
    return Panel(body, title=title, border_style=STATUS_STYLE.get(step.status, "white"), title_align="left")


def summary(run: Run) -> Table:
    t = run.totals
    table = Table(show_header=False, box=None)
    table.add_row("status", run.status + (f" (limits hit: {', '.join(run.limits_hit)})" if run.limits_hit else ""))
    table.add_row("calls", str(t.calls))
    table.add_row("tokens", f"{t.usage.total_tokens} (workers {t.worker_usage.total_tokens}, conductor {t.conductor_usage.total_tokens})")
    if t.usage.cost_usd:
        table.add_row("cost", f"${t.usage.cost_usd:.5f}")
    table.add_row("seconds", f"{t.wall_s:.1f}")
    table.add_row("trace", run.id)
    return table


# ------------------------------------------------------------------------------------------- commands


@app.command()
def ask(
    question: str = typer.Argument(SAMPLE_QUESTION, help="The question (a sample one if omitted)."),
    pool_file: Optional[Path] = typer.Option(None, "--pool", help="Pool file (TOML/YAML). Default: the offline local pool."),
    policy: str = typer.Option("conductor", help=f"Policy: {', '.join(policy_names())}."),
    worker: Optional[str] = typer.Option(None, help="Worker for single/self-reflection, aggregator for moa."),
    rounds: int = typer.Option(2, help="Revision rounds for self-reflection."),
    max_calls: Optional[int] = typer.Option(None, help="Cap on worker calls (lowers the pool's limit)."),
    max_tokens: Optional[int] = typer.Option(None, help="Cap on tokens for the whole request."),
    max_cost: Optional[float] = typer.Option(None, help="Cap on cost in USD for the whole request."),
    seed: Optional[int] = typer.Option(None, help="Sampling seed (reproducible runs on local models)."),
    as_json: bool = typer.Option(False, "--json", help="Print one machine-readable Run and nothing else."),
    trace: bool = typer.Option(True, help="Save the run to the trace store."),
    conductor_dir: Optional[Path] = typer.Option(None, "--conductor", help="A trained conductor checkpoint dir (conductor train's final/) as the conductor backend."),
):
    """Plan a workflow for QUESTION and run it on the pool."""
    spec, conductor_options = load_pool_or_default(pool_file, conductor_dir)
    limits = spec.limits.tightened(Limits(max_calls=max_calls or spec.limits.max_calls, max_tokens=max_tokens, max_cost_usd=max_cost, max_depth=spec.limits.max_depth))
    chosen = build_policy(policy, worker, rounds)
    if conductor_options and policy == "conductor":
        chosen = make_policy("conductor", **conductor_options)
    store = TraceStore() if trace else None

    async def go() -> Run:
        handlers = [store.handler()] if store else []
        view = None if as_json else LiveView()
        if view:
            handlers.append(view.on_event)

        def on_event(event: Event) -> None:
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

    if not as_json:
        console.print(f"[bold]question:[/] {question}\n[dim]pool {spec.name}: {', '.join(w.name for w in spec.workers)} · policy {chosen.name}[/]")
    run = asyncio.run(go())
    if as_json:
        sys.stdout.write(run.model_dump_json() + "\n")
    else:
        console.print(Panel(run.final_answer or "(no answer)", title="final answer", border_style="bold green"))
        console.print(summary(run))
    raise typer.Exit(0 if run.status in ("ok", "limit") else 1)


@app.command()
def traces(
    limit: int = typer.Option(20, help="How many recent runs."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
):
    """List recent runs from the trace store."""
    store = TraceStore()
    rows = store.list(limit)
    if as_json:
        sys.stdout.writelines(json.dumps(row) + "\n" for row in rows)
        return
    table = Table("when", "policy", "status", "steps", "calls", "tokens", "s", "question")
    table.add_column("id", no_wrap=True, min_width=16)
    for row in rows:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(row["created_at"]))
        table.add_row(when, row["policy"], row["status"], str(row["steps"]), str(row["calls"]), str(row["tokens"]), f"{row['wall_s']:.1f}", row["question"][:60], row["id"])
    console.print(table)
    console.print(f"[dim]{store.path}[/]")


@app.command("trace")
def show_trace(run_id: str, as_json: bool = typer.Option(False, "--json", help="Print the whole Run as JSON.")):
    """Show one run: its workflow, every step's context and output, totals."""
    try:
        run = TraceStore().get(run_id)
    except TraceNotFound as exc:
        fail(str(exc.args[0]))
    if as_json:
        sys.stdout.write(run.model_dump_json(indent=2) + "\n")
        return
    console.print(f"[bold]question:[/] {run.question}\n[dim]policy {run.policy} · pool {run.pool}[/]")
    if run.plan:
        console.print(Panel(run.plan.raw or "", title="conductor output", border_style="blue"))
        for error in run.plan.errors:
            console.print(f"[yellow]rejected plan:[/] {error}")
    for step in run.steps:
        console.print(step_panel(step))
    console.print(Panel(run.final_answer or "(no answer)", title="final answer", border_style="bold green"))
    console.print(summary(run))


@app.command()
def pool(pool_file: Optional[Path] = typer.Argument(None, help="Pool file; default: the offline local pool.")):
    """Show a pool as the conductor sees it, with each worker's settings."""
    spec, _ = load_pool_or_default(pool_file)
    table = Table("id", "name", "provider", "model", "max_tokens", "concurrency", "$/1M in", "$/1M out")
    for i, w in enumerate(spec.workers):
        table.add_row(str(i), w.name, w.provider, w.model, str(w.max_tokens), str(w.concurrency), f"{w.price_input_per_m:g}", f"{w.price_output_per_m:g}")
    console.print(table)
    console.print(f"limits: {json.dumps(spec.limits.model_dump())}")


def main() -> None:  # pragma: no cover
    app()


# Registered by their own modules (kept at the end so each part adds a few lines only).
from .eval_cli import register as _register_eval  # noqa: E402
from .server.cli import serve as _serve  # noqa: E402
from .train.cli import register as _register_train  # noqa: E402

app.command("serve")(_serve)
_register_train(app)  # train, plot, train-eval
_register_eval(app)  # eval, tasks, router-train
