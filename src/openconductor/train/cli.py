"""``conductor train CONFIG``, ``plot RUN_DIR``, ``train-eval CONFIG``, ``train-select RUN_DIR`` and ``export-gguf CHECKPOINT``.

Thin: parse flags, call the training modules. Heavy imports (torch, TRL) happen inside the commands.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Optional

import typer

from ..cli_shared import console, err, fail, require


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
    from .distributed import distributed
    from .trainer import train

    try:
        final = train(cfg, resume=resume, warmup_only=warmup_only)
    except TrainConfigError as exc:
        fail(str(exc))
    if not distributed().is_main_process:  # under accelerate launch: one process says it
        return
    console.print(f"[bold green]exported[/] {final}\nuse it: conductor ask --pool {cfg.pool_path} --conductor {final} \"QUESTION\"")
    console.print(f"curves: conductor plot {cfg.output_dir}")


def _dry_run(cfg) -> None:
    from .dry_run import plan_search

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


# The rows of a run dir, by --only name: (label, where its checkpoint is). The labels are the rows' names in
# the JSON files the checkpoint rule reads (`train-select`) and in the documented tables.
RUN_ROWS = {"untrained": "untrained SmolLM2-135M conductor", "warmup": "after format warm-up only", "final": "after GRPO (trained)"}


def eval_command(
    config: Path = typer.Argument(..., help="The training config (its pool and held-out questions are used)."),
    run: Optional[Path] = typer.Option(None, "--run", help="A training run dir: adds the untrained model, RUN/warmup and RUN/final (or --trained) as rows."),
    conductor: list[str] = typer.Option([], "--conductor", help="LABEL=PATH of a conductor checkpoint (repeatable)."),
    only: list[str] = typer.Option([], "--only", help="With --run: the rows to run, of untrained, warmup, final (repeatable; default all)."),
    trained: Optional[Path] = typer.Option(None, "--trained", help="With --run: the checkpoint of the trained row (default RUN/final)."),
    n: Optional[int] = typer.Option(None, help="Held-out questions to use (default: data.n_eval)."),
    n_eval: Optional[int] = typer.Option(None, "--n-eval", help="Generate this many held-out questions (sets data.n_eval)."),
    set_: list[str] = typer.Option([], "--set", help="Override a config value, as for `conductor train` (e.g. data.eval_seed=2000)."),
    chains: list[int] = typer.Option([], "--chains", help="Also score a fixed K-step chain on the best single worker (repeatable)."),
    moa: bool = typer.Option(True, "--moa/--no-moa", help="Score the Mixture-of-Agents row."),
    temperature: float = typer.Option(0.0, help="Conductor sampling temperature (0 = greedy)."),
    batch_size: int = typer.Option(8, "--batch-size", help="Held-out prompts generated at once (larger on a GPU)."),
    threads: Optional[int] = typer.Option(None, "--threads", help="torch CPU threads."),
    out: Optional[Path] = typer.Option(None, "--out", "--json", help="Write the rows as JSON here (default with --run: RUN/eval.json, or RUN/eval_nN.json with --n-eval)."),
):
    """Held-out table: conductors vs the best single worker, an oracle per-domain router and MoA, with
    paired-bootstrap intervals (the rows `conductor train-select` chooses a checkpoint from)."""
    require("train", "torch", "transformers")
    import dataclasses
    import time

    from .config import TrainConfigError, load_train_config
    from .evaluate import comparison_table, evaluate_conductors, reward_table

    overrides = _overrides(set_)
    if n_eval:
        overrides["data.n_eval"] = n_eval
    try:
        cfg = load_train_config(config, overrides or None)
    except TrainConfigError as exc:
        fail(str(exc))
    conductors = _conductors(cfg, conductor, run, only, trained)
    if threads:
        import torch

        torch.set_num_threads(threads)
    start = time.time()
    rows = evaluate_conductors(cfg, conductors, n=n, temperature=temperature, batch_size=batch_size, chains=tuple(chains), moa=moa,
                    on_row=lambda r: err.print(f"[dim]  done: {r.system} ({time.time() - start:.0f}s)[/]"))
    # Columns per domain the rows hold: the task names when training on tasks.
    domains = sorted({d for r in rows for d in r.per_domain_acc}) or sorted(cfg.data.domains)
    simulated = all(w.provider == "simulated" for w in _pool(cfg).workers)
    print(f"{'SIMULATED ' if simulated else ''}pool {cfg.pool}; {len(domains)} domains; held-out n={n or cfg.data.n_eval}; greedy={temperature == 0}")
    for table in (comparison_table(rows, domains), reward_table(rows, domains), _domain_table(rows, domains)):
        print(table + "\n")
    out = out or (run / (f"eval_n{n_eval}.json" if n_eval else "eval.json") if run is not None else None)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=2))
        err.print(f"[dim]({time.time() - start:.0f}s; rows saved to {out})[/]")


def _conductors(cfg, pairs: list[str], run: Optional[Path], only: list[str], trained: Optional[Path]) -> dict[str, str]:
    """Label -> checkpoint of every conductor row: the --conductor pairs, then a run dir's rows."""
    out = {}
    for item in pairs:
        label, _, path = item.partition("=")
        if not path:
            fail(f"--conductor expects LABEL=PATH, got {item!r}")
        out[label] = path
    unknown = sorted(set(only) - set(RUN_ROWS))
    if unknown:
        fail(f"--only takes {', '.join(RUN_ROWS)}; got {', '.join(unknown)}")
    if run is None:
        if only or trained:
            fail("--only and --trained choose rows of a run dir: pass --run RUN_DIR")
        return out
    wanted = set(only or RUN_ROWS)
    if "untrained" in wanted:
        out[RUN_ROWS["untrained"]] = cfg.model.name
    for key, path in (("warmup", run / "warmup"), ("final", trained or run / "final")):
        if key in wanted and path.is_dir():
            out[RUN_ROWS[key]] = str(path)
    return out


def _pool(cfg):
    from ..pool import load_pool

    return load_pool(cfg.pool_path)


def _domain_table(rows, domains: list[str]) -> str:
    lines = ["| system | " + " | ".join(f"acc {d}" for d in domains) + " | final-step worker share |", "|---|" + "---|" * (len(domains) + 1)]
    for r in rows:
        shares = ", ".join(f"{k} {v:.2f}" for k, v in r.worker_share.items())
        lines.append(f"| {r.system} | " + " | ".join(f"{r.per_domain_acc.get(d, 0.0):.2f}" for d in domains) + f" | {shares} |")
    return "\n".join(lines)


def select_command(
    run: Path = typer.Argument(..., help="A training run dir whose validation/ holds one rows file per candidate (train-eval --out)."),
    validation: Optional[Path] = typer.Option(None, "--validation", help="The rows files' dir (default RUN/validation)."),
    system: str = typer.Option(RUN_ROWS["final"], "--system", help="The row that scores each candidate."),
):
    """Choose the checkpoint to test: the highest validation accuracy, ties to the later one (the warm-up
    first, checkpoints by step, final last). Prints each candidate's score, then the chosen path on stdout."""
    from .evaluate import choose_checkpoint

    try:
        name, scored = choose_checkpoint(validation or run / "validation", system)
    except (FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    for stem, accuracy, steps in scored:
        err.print(f"validation {stem}: accuracy {100 * accuracy:.1f}, steps {steps:.2f}", highlight=False)
    print(run / name)


def export_gguf_command(
    checkpoint: Path = typer.Argument(..., help="A conductor checkpoint dir (conductor train's final/ or warmup/)."),
    base: Optional[str] = typer.Option(None, "--base", help="The gguf: model it was trained from (default: its manifest's model)."),
):
    """Write CHECKPOINT/conductor.gguf so ask/serve plan with llama.cpp."""
    require("train", "torch", "transformers", "peft", "gguf")
    from ..conductor.manifest import ManifestError, has_manifest, read_manifest
    from ..conductor.checkpoint import load_checkpoint
    from ..conductor.gguf_export import export_trained

    if not checkpoint.is_dir():
        fail(f"checkpoint dir not found: {checkpoint}")
    try:
        manifest = read_manifest(checkpoint)
    except ManifestError as exc:
        fail(str(exc))
    base = base or manifest.model
    if not base or not base.startswith("gguf:"):
        fail(f"{checkpoint}: pass --base gguf:<package or file> (the model it was trained from); got {base!r}")
    model, _ = load_checkpoint(checkpoint)
    file = export_trained(model, base, checkpoint)
    if file is None:
        fail(f"could not write a GGUF for {checkpoint} (see the warning above)")
    if has_manifest(checkpoint):
        manifest.model_copy(update={"model": base, "gguf": file.name}).write(checkpoint)
    console.print(f"wrote {file}\nuse it: conductor ask --conductor {checkpoint} \"QUESTION\"")


def fit_command(
    pool: str = typer.Argument(..., help="A pool file, or `default` for the offline local pool."),
    task: list[str] = typer.Option([], "--task", help="A task to train on (repeatable; default: the training kinds of openconductor/tasks/kinds.py)."),
    questions: Optional[Path] = typer.Option(None, "--questions", help="Train on your own JSONL of {question, answer[, kind]} instead of tasks."),
    eval_task: list[str] = typer.Option([], "--eval-task", help="A task evaluated but never trained on (repeatable): how the conductor does on kinds it never saw."),
    out: Optional[Path] = typer.Option(None, "--out", help="The output folder (default runs/fit-<pool name>); a rerun into it skips finished stages."),
    per_task: int = typer.Option(8, "--per-task", help="Training questions per task (every finalist runs on each)."),
    eval_n: int = typer.Option(4, "--eval-n", help="Held-out questions per task (and per --eval-task); 0: no evaluation."),
    profile_n: int = typer.Option(2, "--profile-n", help="Questions per task for the profile and each screening round."),
    screen_rounds: int = typer.Option(2, "--screen-rounds", help="Successive-halving rounds of the search."),
    finalists: int = typer.Option(3, "--finalists", help="Plans per task that run on every training question."),
    grpo_steps: int = typer.Option(0, "--grpo-steps", help="GRPO steps after the copy (0: none)."),
    recipe: Optional[Path] = typer.Option(None, "--recipe", help="A training config whose model, prompt, warm-up and GRPO settings to use."),
    init: Optional[str] = typer.Option(None, "--init", help="Start the copy from this trained conductor (a directory or builtin:NAME, "
                                       "of the recipe's model and LoRA shape) instead of fresh weights."),
    max_calls: Optional[int] = typer.Option(None, "--max-calls", help="Stop cleanly once the fit has made this many real worker calls (all its runs together)."),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", help="Stop cleanly once the fit has spent this many dollars (the pool's prices)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the calls, tokens, cost and time the fit would spend, and stop (no worker is called without --calibrate)."),
    output_share: float = typer.Option(0.25, "--output-share", help="The dry run's output tokens per call, as a share of each worker's max_tokens (until a profile has measured them)."),
    seed: int = typer.Option(0, "--seed"),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, help="Threads per local llama.cpp model (default: every core; use 1 on a machine busy with other jobs)."),
    fidelity_bar: float = typer.Option(0.95, "--fidelity-bar", min=0, max=1, help="The share of training questions the copy must plan as "
                                       "its target; under it the fit copies on, then stops and says what to raise."),
    max_copy_epochs: Optional[int] = typer.Option(None, "--max-copy-epochs", min=1, help="Copy on up to this many epochs while under the bar "
                                                  "(default: 3x the recipe's)."),
    copy_epochs: Optional[int] = typer.Option(None, "--copy-epochs", min=1, help="The copy's epochs (default: the recipe's, 4)."),
    copy_lr: Optional[float] = typer.Option(None, "--copy-lr", help="The copy's learning rate (default: the recipe's, 1e-3)."),
    calibrate: bool = typer.Option(False, "--calibrate", help="With --dry-run: time one real call of each model (through the fit's replay "
                                   "store, so the fit replays it) for the time estimate."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log every workflow failure."),
):
    """Make a conductor for a pool: profile its workers, search plans per task, copy them into a small model
    (per question), optionally GRPO, evaluate against every single worker, the best fixed workflow and the
    per-task lookup table, and write a checkpoint the pool file can name."""
    from pydantic import ValidationError

    from .fit.context import FitSettings

    logging.basicConfig(level=logging.INFO if verbose else logging.ERROR, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = FitSettings(pool=pool, out=out or Path("runs") / f"fit-{Path(pool).stem if pool != 'default' else 'local'}", tasks=task,
                               questions=questions, eval_tasks=eval_task, per_task=per_task, eval_n=eval_n, profile_n=profile_n,
                               screen_rounds=screen_rounds, finalists=finalists, grpo_steps=grpo_steps, recipe=recipe, init=init, max_calls=max_calls,
                               max_cost=max_cost, output_share=output_share, seed=seed, threads=threads,
                               fidelity_bar=fidelity_bar, max_copy_epochs=max_copy_epochs, copy_epochs=copy_epochs, copy_lr=copy_lr)
    except ValidationError as exc:
        fail(f"conductor fit: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}")
    _fit_command(settings, dry_run, calibrate)


def _fit_command(settings, dry_run: bool, calibrate: bool) -> None:
    from ..pool import PoolConfigError, load_pool
    from .fit import cli as fitcli
    from .config import TrainConfigError

    try:
        if settings.init:  # refused now, not after the profile and the search have been paid for
            from .fit.context import recipe as fit_recipe
            from .trainer import check_init

            check_init(fit_recipe(settings, load_pool(settings.pool_path)))
        if dry_run:
            return fitcli.dry_run(settings, calibrate=calibrate)
        require("train", "torch", "transformers", "trl", "peft")
        fitcli.run(settings)
    except (TrainConfigError, PoolConfigError, FileNotFoundError) as exc:
        fail(str(exc))


def decisions_command(
    pool: Optional[Path] = typer.Argument(None, help="Pool file (default: the packaged offline pool)."),
    task: str = typer.Option("codegen", "--task", help="Training questions (generated ones: never a benchmark's)."),
    limit: int = typer.Option(12, "--limit", help="How many questions."),
    seed: int = typer.Option(0, "--seed", help="The task's seed (codegen: which problems)."),
    coder: Optional[str] = typer.Option(None, "--coder", help="The worker that answers round 1 and revises (default: the strongest)."),
    escalate_to: Optional[str] = typer.Option(None, "--escalate-to", help="The worker escalation asks (default: the next strongest)."),
    replay: Optional[Path] = typer.Option(None, "--replay", help="Replay store of worker calls (SQLite), so a rerun costs no model call."),
    out: Optional[Path] = typer.Option(None, "--out", help="Append one JSON row per question (prompt, target, outcomes) to this file."),
):
    """Targets for the decision after round 1 by search: per question, round 1, then accept / revise / escalate, each graded."""
    from ..cli_shared import load_pool_or_default
    from ..tasks import TaskError, load_task
    from .decisions import run_search

    spec, _ = load_pool_or_default(pool, trained=False)
    try:
        questions = load_task(task, limit=limit, seed=seed)
    except TaskError as exc:
        fail(str(exc))
    try:
        _, summary = run_search(spec, questions, coder=coder, escalate_to=escalate_to, replay=replay, out=out, seed=seed)
    except (ValueError, RuntimeError) as exc:
        fail(str(exc))
    console.print_json(json.dumps(summary))


def register(app: typer.Typer) -> None:
    app.command("train")(train_command)
    app.command("fit")(fit_command)
    app.command("plot")(plot_command)
    app.command("train-eval")(eval_command)
    app.command("train-select")(select_command)
    app.command("export-gguf")(export_gguf_command)
    app.command("train-decisions")(decisions_command)


if __name__ == "__main__":
    # `python -m openconductor.train.cli train|plot|train-eval ...`: the training commands without the
    # rest of the CLI (which imports the server's and providers' dependencies), e.g. on a GPU box
    # that only has the training stack.
    _app = typer.Typer(add_completion=False, no_args_is_help=True)
    register(_app)
    _app()
