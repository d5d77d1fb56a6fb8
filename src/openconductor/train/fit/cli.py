"""What ``conductor fit`` prints: on a terminal, bars and text whose commands never break across lines; when stdout
is not a terminal (a log file, a pipe, CI), one JSON object a line and no bars, the last one the result
(``{"event": "result", ...}``: status, what ships, the commands as argument lists)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from ...cli_shared import console, err
from ...spec import default_pool_path

EXIT_STOPPED, EXIT_REFUSED, EXIT_INTERRUPTED = 3, 4, 130


def machine_readable() -> bool:
    return not sys.stdout.isatty()


def say(text: str, style: Optional[str] = None) -> None:
    """A line that is never wrapped: a command in it stays one line to copy."""
    console.print(text, style=style, markup=False, highlight=False, soft_wrap=True)


def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}, default=str) + "\n")
    sys.stdout.flush()


def dry_run(settings, calibrate: bool = False) -> None:
    from .run import plan_fit
    from .timing import calibrate as time_calls

    if calibrate:
        time_calls(settings)
    plan = plan_fit(settings)
    if machine_readable():
        return emit("dry_run", **plan)
    say(f"conductor fit {settings.pool}: what it would spend on an empty replay store (output tokens: {plan['output_tokens_per_call']})")
    seconds = plan["time"]["seconds"]
    for name, e in {**plan["stages"], "total": plan["total"]}.items():
        took = plan["time"]["total_seconds"] if name == "total" else seconds.get(name)
        say(f"  {name:<9} {e['runs']:>6,} runs  {e['calls']:>6,} calls  {e['tokens']:>10,} tokens  ${e['cost_usd']:.4f}  {_minutes(took)}")
        if name == "targets":
            for stage in ("copy", "fidelity"):  # the copy's model runs on this machine: no worker calls
                say(f"  {stage:<9} {'':>33}{'':>19}{_minutes(seconds.get(stage))}")
    say("calls per worker: " + ", ".join(f"{w} {n:,}" for w, n in plan["total"]["per_worker"].items()))
    say(f"time: calls {plan['time']['calls_timed']}; copy {plan['time']['copy_timed']}")
    for text in plan["left_out"]:
        say(text, style="yellow")


def _minutes(seconds: Optional[float]) -> str:
    return "time ?" if seconds is None else f"~{seconds / 60:.1f} min"


def run(settings) -> None:
    from .distributed import fit_state, follow
    from .progress import JsonHooks, RichHooks
    from .run import plan_fit, run_fit

    if not fit_state().is_main_process:  # under accelerate launch: this process only joins the main one's GRPO
        return follow(settings)

    estimate = settings.out / "estimate.json"
    if not (settings.out / "fit.json").exists():  # the dry run's estimate before anything was spent, to compare at the end
        settings.out.mkdir(parents=True, exist_ok=True)
        estimate.write_text(json.dumps(plan_fit(settings), indent=1))
    machine = machine_readable()
    try:
        with (JsonHooks(sys.stdout) if machine else RichHooks(console)) as hooks:
            result = run_fit(settings, hooks)
    except KeyboardInterrupt:
        state = json.loads((settings.out / "fit.json").read_text()) if (settings.out / "fit.json").exists() else {}
        stage = state.get("interrupted", {}).get("stage", "?")
        (emit("result", status="interrupted", stage=stage) if machine else
         err.print(f"interrupted during {stage}: every finished stage is kept; run the same command to go on", highlight=False, soft_wrap=True))
        raise typer.Exit(EXIT_INTERRUPTED) from None
    (_json_result if machine else _text_result)(settings, result, estimate)


def use_lines(settings, result) -> dict[str, Any]:
    """The commands that use what the fit made, as argument lists (and the pool file line)."""
    pool = [] if settings.pool == "default" else ["--pool", str(settings.pool)]
    served = ["conductor", "serve", "--pool", str(default_pool_path()) if settings.pool == "default" else str(settings.pool)]
    out: dict[str, Any] = {}
    if result.lookup is not None:
        out["lookup_ask"] = ["conductor", "ask", *pool, "--policy", f"lookup:{result.lookup}", "QUESTION"]
        out["lookup_serve"] = [*served, "--lookup", str(result.lookup)]
        out["lookup_server_preset"] = {"policy": "lookup", "policy_options": {"table": str(Path(result.lookup).resolve())}}
    if result.checkpoint is not None:
        out["pool_file_line"] = f'[conductor] checkpoint = "{result.checkpoint.resolve()}"'
        out["conductor_ask"] = ["conductor", "ask", *pool, "--conductor", str(result.checkpoint), "QUESTION"]
        out["conductor_serve"] = [*served, "--conductor", str(result.checkpoint)]
    return out


def _status(result) -> str:
    return "stopped" if result.stopped else "refused" if result.refused else "done"


def _json_result(settings, result, estimate: Path) -> None:
    verdict = result.verdict.model_dump() if result.verdict is not None else None
    emit("result", status=_status(result), why=result.stopped or result.refused, ship=verdict["ship"] if verdict else None, verdict=verdict,
         checkpoint=str(result.checkpoint) if result.checkpoint else None, report=str(settings.out / "report.md"), use=use_lines(settings, result),
         spend=result.spend.as_dict())
    if result.stopped or result.refused:
        raise typer.Exit(EXIT_STOPPED if result.stopped else EXIT_REFUSED)


def _text_result(settings, result, estimate: Path) -> None:
    spent = result.spend
    say(f"spent: {spent.calls:,} real worker calls, {spent.tokens:,} tokens, ${spent.cost_usd:.4f} (all runs of this fit)")
    if estimate.exists():
        _estimate_vs_spend(json.loads(estimate.read_text()), json.loads((settings.out / "fit.json").read_text()))
    use = use_lines(settings, result)
    if result.stopped:
        err.print(f"stopped: {result.stopped}. What was paid for is kept in {settings.out / 'replay.sqlite3'}; "
                  "run the same command with a higher cap to continue.", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_STOPPED)
    say(result.report)
    if result.refused:
        err.print(f"not done: {result.refused}", markup=False, highlight=False, soft_wrap=True)
        say("meanwhile the per-task lookup the copy learns from is ready:  " + " ".join(use["lookup_ask"]))
        raise typer.Exit(EXIT_REFUSED)
    if result.verdict is not None and result.verdict.ship == "lookup":
        say(f"the fit ships the lookup: {result.verdict.why}.", style="yellow")
        say("use it:  " + " ".join(use["lookup_ask"]))
        say("or serve it:  " + " ".join(use["lookup_serve"]))
        say(f"(the conductor is still in {result.checkpoint}, with a model card that says so)")
        return
    say(f"conductor: {result.checkpoint}")
    say(f"name it in the pool file:  {use['pool_file_line']}")
    say("or use it once:  " + " ".join(use["conductor_ask"]))
    say("or serve it:  " + " ".join(use["conductor_serve"]))
    from ...conductor.familiar import FAMILIAR_FILE

    if (result.checkpoint / FAMILIAR_FILE).exists():
        say('questions unlike all it trained on can run the best fixed workflow instead:  [conductor] unfamiliar = "best-fixed"')


def _estimate_vs_spend(estimate: dict, state: dict) -> None:
    """Per stage: what the dry run estimated before anything ran, and what the fit then spent."""
    say("stage       estimated calls / spent   estimated tokens / spent")
    for name, planned in {**estimate["stages"], "total": estimate["total"]}.items():
        spent = state["spend"] if name == "total" else state["stages"].get(name, {}).get("spend", {})
        calls, tokens = spent.get("calls"), spent.get("tokens")
        say(f"  {name:<9} {planned['calls']:>8,} / {calls if calls is not None else '—':<8} {planned['tokens']:>12,} / "
            f"{tokens if tokens is not None else '—'}  ({_ratio(calls or 0, planned['calls'])} of the calls)")


def _ratio(spent: float, planned: float) -> str:
    return f"{spent / planned:.0%}" if planned else "—"
