"""``conductor train CONFIG``, ``conductor plot RUN_DIR``, ``conductor train-eval CONFIG`` and ``conductor export-gguf CHECKPOINT``.

Thin: parse flags, call the training modules. Heavy imports (torch, TRL) happen inside the commands.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Optional

import typer

from ..clikit import console, err, fail, require


def _overrides(values: list[str]) -> dict:
    out = {}
    for item in values:
        if "=" not in item:
            fail(f"--set expects KEY=VALUE (e.g. grpo.max_steps=10), got {item!r}")
        key, raw = item.split("=", 1)
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def train_command(
    config: Path = typer.Argument(..., help="Training config (TOML/YAML), e.g. examples/train_cpu_smollm2.toml."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the latest checkpoint in the run dir."),
    warmup_only: bool = typer.Option(False, "--warmup-only", help="Stop after the supervised warm-up (RUN/warmup); a later run in the same dir starts GRPO from it."),
    set_: list[str] = typer.Option([], "--set", help="Override a config value: --set grpo.max_steps=10 (repeatable)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log every workflow failure and warm-up batch."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the workflow runs and worker calls the target search would make, and stop (no model is called)."),
):
    """Train a conductor with GRPO: the reward executes each sampled workflow on the pool and grades it."""
    from .config import TrainConfigError, load_train_config

    if dry_run:
        try:
            return _dry_run(load_train_config(config, _overrides(set_)))
        except TrainConfigError as exc:
            fail(str(exc))
    require("train", "torch", "transformers", "trl", "peft")

    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # The trainer's own milestones (one line per searched domain, the kept targets) show without -v: a
    # search on a real pool runs for many minutes and was otherwise silent until the export.
    logging.getLogger("openconductor.train.trainer").setLevel(logging.INFO)
    try:
        cfg = load_train_config(config, _overrides(set_))
    except TrainConfigError as exc:
        fail(str(exc))
    from .trainer import train

    try:
        final = train(cfg, resume=resume, warmup_only=warmup_only)
    except TrainConfigError as exc:
        fail(str(exc))
    console.print(f"[bold green]exported[/] {final}\nuse it: conductor ask --pool {cfg.pool_path} --conductor {final} \"QUESTION\"")
    console.print(f"curves: conductor plot {cfg.output_dir}")


def _dry_run(cfg) -> None:
    from .dryrun import plan_search

    plan = plan_search(cfg)
    if not plan.runs:
        console.print("no target search ([search] candidates = 0 or no warm-up): the run calls workers only in GRPO's rewards")
        return
    bound = "" if plan.exact else " (rank rounds: their catch-up runs depend on the outcomes; counted as if every plan scored alike)"
    console.print(f"[bold]target search[/]: {plan.runs} workflow runs{bound}, {plan.steps} steps; at most {plan.calls} worker calls on an empty "
                  f"replay store ({plan.replayed_first_steps} first steps repeat and are replayed)")
    console.print("runs per domain: " + ", ".join(f"{d} {n}" for d, n in plan.per_domain.items()), highlight=False)
    console.print("calls per worker: " + ", ".join(f"{w} {n}" for w, n in plan.per_worker.most_common()), highlight=False)


def plot_command(
    run_dir: Path = typer.Argument(..., help="A training run dir (holds metrics.jsonl, or only warmup/ after --warmup-only)."),
    out: Optional[Path] = typer.Option(None, "--out", help="PNG path (default RUN_DIR/curves.png)."),
):
    """Write PNG learning curves (reward, format errors, accuracy, steps, routing) from a run's metrics."""
    require("train", "matplotlib")
    from .plot import PlotError, plot_run

    try:
        path = plot_run(run_dir, out)
    except PlotError as exc:
        fail(str(exc))
    console.print(f"wrote {path}")


def eval_command(
    config: Path = typer.Argument(..., help="The training config (its pool and held-out questions are used)."),
    conductor: list[str] = typer.Option([], "--conductor", help="LABEL=PATH of a conductor checkpoint (repeatable)."),
    n: Optional[int] = typer.Option(None, help="Held-out questions (default: data.n_eval)."),
    temperature: float = typer.Option(0.0, help="Conductor sampling temperature (0 = greedy)."),
    as_json: Optional[Path] = typer.Option(None, "--json", help="Also write the rows as JSON here."),
):
    """Held-out table: conductors vs the best single worker and an oracle single-step router."""
    require("train", "torch", "transformers")
    import dataclasses

    from .config import TrainConfigError, load_train_config
    from .evaluate import evaluate, markdown_table

    try:
        cfg = load_train_config(config)
    except TrainConfigError as exc:
        fail(str(exc))
    pairs = {}
    for item in conductor:
        label, _, path = item.partition("=")
        if not path:
            fail(f"--conductor expects LABEL=PATH, got {item!r}")
        pairs[label] = path
    rows = evaluate(cfg, pairs, n=n, temperature=temperature, on_row=lambda r: err.print(f"[dim]done: {r.system}[/]"))
    # Columns per domain the rows hold: the task names when training on tasks.
    console.print(markdown_table(rows, sorted({d for r in rows for d in r.per_domain_acc}) or sorted(cfg.data.domains)))
    if as_json:
        as_json.write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=2))


def export_gguf_command(
    checkpoint: Path = typer.Argument(..., help="A conductor checkpoint dir (conductor train's final/ or warmup/)."),
    base: Optional[str] = typer.Option(None, "--base", help="The gguf: model it was trained from (default: its manifest's model)."),
):
    """Write CHECKPOINT/conductor.gguf so ask/serve plan with llama.cpp."""
    require("train", "torch", "transformers", "peft", "gguf")
    from ..providers.transformers_local import MANIFEST, load_checkpoint, read_manifest
    from .gguf_export import export_trained

    if not checkpoint.is_dir():
        fail(f"checkpoint dir not found: {checkpoint}")
    manifest = read_manifest(checkpoint)
    base = base or manifest.get("model")
    if not base or not base.startswith("gguf:"):
        fail(f"{checkpoint}: pass --base gguf:<package or file> (the model it was trained from); got {base!r}")
    model, _ = load_checkpoint(checkpoint)
    file = export_trained(model, base, checkpoint)
    if file is None:
        fail(f"could not write a GGUF for {checkpoint} (see the warning above)")
    if manifest:
        (checkpoint / MANIFEST).write_text(json.dumps({**manifest, "model": base, "gguf": file.name}, indent=2))
    console.print(f"wrote {file}\nuse it: conductor ask --conductor {checkpoint} \"QUESTION\"")


def register(app: typer.Typer) -> None:
    app.command("train")(train_command)
    app.command("plot")(plot_command)
    app.command("train-eval")(eval_command)
    app.command("export-gguf")(export_gguf_command)


if __name__ == "__main__":
    # `python -m openconductor.train.cli train|plot|train-eval ...`: the training commands without the
    # rest of the CLI (which imports the server's and providers' dependencies), e.g. on a GPU box
    # that only has the training stack.
    _app = typer.Typer(add_completion=False, no_args_is_help=True)
    register(_app)
    _app()
