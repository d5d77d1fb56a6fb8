"""Search-and-copy across generated pools: the warm-up of a general conductor for world-v3 pools (SIMULATED).

For the training pool (``examples/pools/simulated_paper_v3.toml``) and ``pools`` generated training pools
(``sim/pools.py``, training families only), the plan search (``sim/plan_search.py``) finds the best plans per
bucket (subtopic x level) on that pool; then every example asks one question of a bucket with the pool
*described* (``show = "descriptions"``: the pool's ids mean different workers in every pool, so only the
descriptions say who is who) and its target is that pool's best plan for the question's bucket. Each
target's one line of reasoning names the question's level and subtopic and the workers of the plan
by name ("hard geometry: plan euclid-14b, solve atlas-pro, check sentinel-70b"), so that the ids are
written after the conductor has said, in words, whom it picked and why; a name is next to its id in
the prompt's pool list.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import logging
import time
from pathlib import Path
from typing import Optional

from ..conductor.prompt import conductor_messages
from ..pool import PoolSpec
from ..sim.plan_search import SearchSettings
from ..sim.world_v3 import Profile, make_questions
from .config import TrainConfigError
from .sim_general_search import (CopyData, CopySettings, PromptShape, add_search_arguments, build, held_out_texts, search_settings, shown_pool, summary, training_pools)
from .data import TrainRow
from .supervised_copy import SFTSettings, copy_targets
from .trainer import init_checkpoint, init_source

log = logging.getLogger(__name__)


def _copy_key(cfg, settings: CopySettings, test_n: int) -> dict:
    from .sim_general_search import data_key

    return data_key(settings, cfg.pool_path, test_n=test_n, eval_seed=cfg.data.eval_seed)


def _write_rows(data: CopyData, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "copy_targets.jsonl", "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in data.rows)


def search_run(cfg, settings: CopySettings, *, test_n: int = 1000) -> Path:
    """The plan search alone (CPU): writes RUN/copy_data.json.gz (``sim_general_search.py``) and RUN/copy_targets.jsonl."""
    from . import sim_general_search

    shape = PromptShape.of(cfg)
    data = build(settings, cfg.pool_path, shape, exclude=held_out_texts(test_n, cfg.data.eval_seed))
    _write_rows(data, cfg.output_dir)
    log.info("search: %d examples over %d pools in %.0f s", len(data.rows), len(data.groups), data.seconds)
    return sim_general_search.save(data, cfg.output_dir / sim_general_search.FILE_NAME, _copy_key(cfg, settings, test_n))


def copy_run(cfg, settings: CopySettings, *, test_n: int = 1000, epochs: int = 1, lr: float = 1e-3, batch_size: int = 16,
             max_batches: Optional[int] = None, max_minutes: Optional[float] = None, data_file: Optional[Path] = None,
             init: Optional[Path] = None) -> Path:
    """Search (or load ``data_file``, written by ``search_run``), copy and export: RUN/warmup is the conductor
    (``cfg``: a TrainConfig for the model, prompt, training pool, eval seed and run dir; ``max_batches`` /
    ``max_minutes``: stop the copy after that many steps / that much time; ``init``: a trained conductor's
    directory to start from instead of a fresh adapter, e.g. to move a shipped one onto new targets or a new
    view of the pool). Returns the exported dir."""
    import torch

    from .trainer import accelerator_device, export, load_model, load_weights

    if cfg.run.torch_threads:
        torch.set_num_threads(cfg.run.torch_threads)
    out = cfg.output_dir
    if data_file is not None:
        from . import sim_general_search

        shape = PromptShape.of(cfg)
        data = sim_general_search.load(data_file, _copy_key(cfg, settings, test_n), cfg.pool_path, shape)
        log.info("copy data %s: %d examples over %d pools (searched in %.0f s)", data_file, len(data.rows), len(data.groups), data.seconds)
    else:
        data = build(settings, cfg.pool_path, PromptShape.of(cfg),
                     exclude=held_out_texts(test_n, cfg.data.eval_seed))
        log.info("search: %d examples over %d pools in %.0f s", len(data.rows), len(data.groups), data.seconds)
    _write_rows(data, out)
    model, tokenizer = load_model(cfg)
    if init is not None:
        load_weights(model, init)
    model.to(accelerator_device())  # the copy runs where the model is
    started = time.monotonic()
    sft = SFTSettings(epochs=epochs, learning_rate=lr, batch_size=batch_size, seed=cfg.data.seed, max_batches=max_batches,
                      max_seconds=None if max_minutes is None else 60 * max_minutes)
    losses = copy_targets(model, tokenizer, data.groups, sft)
    extra = {"stage": "search-and-copy across generated pools", "copy": summary(data, settings, round(time.monotonic() - started, 1)),
             "copy_run": {"epochs": epochs, "lr": lr, "batch_size": batch_size, "max_batches": max_batches, "max_minutes": max_minutes,
                          "batches": len(losses), "device": str(model.device), "copy_data": str(data_file) if data_file else None,
                          "init": init_source(init) if init is not None else None},
             "warmup_losses": losses}
    return export(model, tokenizer, out / "warmup", cfg, extra=extra)


def union_pool(pools: list[PoolSpec]) -> tuple[PoolSpec, list[list[int]]]:
    """One pool holding every training pool's workers (a name taken twice gets a ``~k`` suffix, and keeps its
    own as ``options.identity`` so the simulated world answers as in its pool: the reward runs each row's
    plan on a view of it), and each pool's indices in it, in that pool's order."""
    workers, indices, taken = [], [], set()
    for spec in pools:
        own = []
        for w in spec.workers:
            name, k = w.name, 1
            while name in taken:
                name, k = f"{w.name}~{k}", k + 1
            taken.add(name)
            own.append(len(workers))
            renamed = {"name": name} if name != w.name else {}
            if renamed and w.provider == "simulated":  # only the simulated world reads an identity
                renamed["options"] = {**w.options, "identity": w.options.get("identity") or w.name}
            workers.append(w.model_copy(update=renamed))
        indices.append(own)
    union = pools[0].model_copy(update={"name": "sim-training-pools", "workers": workers, "strongest": None})
    return union.for_execution(), indices


def grpo_rows(cfg, pools: list[PoolSpec], indices: list[list[int]], per_pool: int, seed: int, exclude: frozenset[str]) -> list[TrainRow]:
    """GRPO rows across pools: each asks a training-side question with its own pool described (as at run time)
    and runs on that pool's workers in the union. Questions that every worker of the pool answers right alone
    are skipped (any plan earns the same reward: no signal)."""
    from ..sim.world_v3 import solo_correct

    questions = make_questions(per_pool * len(pools) * 4, seed, exclude=exclude)
    by_pool: list[list[TrainRow]] = []
    for p, (spec, own) in enumerate(zip(pools, indices)):
        profiles = [Profile.from_spec(w) for w in spec.workers]
        mine = questions[p * per_pool * 4 : (p + 1) * per_pool * 4]  # each pool its own questions
        kept = [q for q in mine if not all(solo_correct(q.text, pr) for pr in profiles)][:per_pool]
        shown = [shown_pool(spec, p, 10_000 + i, cfg.data.rename_workers) for i in range(len(kept))]  # not the copy's names
        by_pool.append([TrainRow(prompt=conductor_messages(q.text, view, max_steps=cfg.prompt.max_steps, show=cfg.prompt.show, fine_grained=False,
                                                        examples=cfg.prompt.examples, style=cfg.prompt.style),
                                 question=q.text, reference=q.reference, task="simulated", domain=q.domain, workers=own,
                                 names=[w.name for w in view.workers]) for q, view in zip(kept, shown)])
    # Pools in rotation, so that every stretch of training sees many of them.
    return [r for group in itertools.zip_longest(*by_pool) for r in group if r is not None]


def grpo_run(cfg, settings: CopySettings, *, per_pool: int = 16, test_n: int = 1000) -> Path:
    """GRPO across the training pools from RUN/warmup (``copy_run``), paid by ``cfg.reward`` (accuracy alone in the
    shipped recipes; ``reward.token_weight`` prices tokens too); exports RUN/final."""
    from .trainer import build_trainer, check_same_prompt, export, load_model, load_weights

    from ..conductor.manifest import read_manifest

    warmup = read_manifest(cfg.output_dir / "warmup")
    if warmup.ranking != settings.ranking:
        raise ValueError(f"{cfg.output_dir / 'warmup'} was copied with the pools' profiles per {warmup.ranking}, and GRPO was asked for "
                         f"--ranking {settings.ranking}: pass --ranking {warmup.ranking}, or copy again")
    # A warm-up trained on another prompt (e.g. a shipped conductor started from without its `prompt.show`) is refused.
    check_same_prompt(cfg.output_dir / "warmup", cfg)
    pools = training_pools(settings, cfg.pool_path)
    union, indices = union_pool(pools)
    exclude = held_out_texts(test_n, cfg.data.eval_seed)
    rows = grpo_rows(cfg, pools, indices, per_pool, settings.question_seed + 1, exclude)
    model, tokenizer = load_model(cfg)
    load_weights(model, cfg.output_dir / "warmup")
    trainer, reward = build_trainer(cfg, model=model, tokenizer=tokenizer, pool_spec=union, warmup=False, rows=rows)
    started = time.monotonic()
    trainer.train()
    extra = {"stage": "GRPO across generated pools after search-and-copy", "grpo_rows": len(rows), "pools": len(pools),
             "copy": {"settings": {"ranking": settings.ranking}},  # how its pools are shown (ConductorManifest.ranking)
             "train_seconds": round(time.monotonic() - started, 1), "global_step": trainer.state.global_step}
    return export(trainer.model, trainer.processing_class, cfg.output_dir / "final", cfg, extra=extra)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description="Search-and-copy a general conductor over generated SIMULATED pools (world v3).")
    ap.add_argument("config")
    add_search_arguments(ap)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-batches", type=int, default=None, help="stop the copy after this many batches (a time box)")
    ap.add_argument("--copy-max-minutes", type=float, default=None, help="stop the copy after this much time (a time box)")
    ap.add_argument("--output-dir", default=None)
    ap.add_argument("--stage", choices=["search", "copy", "grpo", "both"], default="copy",
                    help="search: the plan search alone, into RUN/copy_data.json.gz; copy: search (or --copy-data) then copy; "
                         "grpo: GRPO from RUN/warmup; both: copy then GRPO")
    ap.add_argument("--copy-data", default=None, help="the copy data a `--stage search` wrote: the copy loads it instead of searching")
    ap.add_argument("--init", default=None,
                    help="copy from this trained conductor (a directory or builtin:NAME, with this config's model and LoRA) instead of a fresh adapter")
    ap.add_argument("--grpo-per-pool", type=int, default=16)
    ap.add_argument("--set", action="append", default=[], help="override a config value, e.g. grpo.max_steps=20")
    return ap


def _check_args(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """What the flags cannot be together (each an ``ap.error``, which exits)."""
    if args.max_batches is not None and args.max_batches < 1:
        ap.error(f"--max-batches must be at least 1 (got {args.max_batches}); leave it out to copy every epoch in full")
    if args.copy_max_minutes is not None and args.copy_max_minutes <= 0:
        ap.error(f"--copy-max-minutes must be above 0 (got {args.copy_max_minutes}); leave it out to copy every epoch in full")
    if args.copy_data and args.stage not in ("copy", "both"):
        ap.error(f"--copy-data is read by --stage copy or both (got --stage {args.stage})")
    if args.init and args.stage not in ("copy", "both"):
        ap.error(f"--init is read by --stage copy or both (got --stage {args.stage}); GRPO starts from RUN/warmup")
    if args.rank_questions < 1:
        ap.error(f"--rank-questions must be at least 1 (got {args.rank_questions})")
    if args.token_weight < 0:
        ap.error(f"--token-weight must be 0 or more (got {args.token_weight})")
    if args.token_weight != SearchSettings.token_weight and args.stage == "grpo":
        ap.error("--token-weight prices the copy's targets; GRPO's price is reward.token_weight (--set reward.token_weight=...)")
    if args.training_pool_token_weight is not None and args.training_pool_token_weight < 0:
        ap.error(f"--training-pool-token-weight must be 0 or more (got {args.training_pool_token_weight})")
    # Both shape only the training pool's own searched plans, which GRPO and a ranks-only copy never use.
    for flag, value, does, under_grpo in (
            ("--training-pool-token-weight", args.training_pool_token_weight, "prices",
             "the copy's targets; GRPO's price is reward.token_weight (--set reward.token_weight=...)"),
            ("--training-pool-search", args.training_pool_search, "sizes", "the copy's search; --stage grpo searches nothing")):
        if value is not None and args.stage == "grpo":
            ap.error(f"{flag} {does} {under_grpo}")
        if value is not None and args.targets == "ranks":
            ap.error(f"{flag} {does} the training pool's own searched plans: --targets ranks copies none (use mixed or search)")


def main(argv: Optional[list[str]] = None) -> int:
    from .config import load_train_config

    ap = _parser()
    args = ap.parse_args(argv)
    _check_args(ap, args)
    init = None
    if args.init:
        try:
            init = init_checkpoint(args.init, "--init").resolve()
        except TrainConfigError as exc:
            ap.error(str(exc))
    data_file = Path(args.copy_data).resolve() if args.copy_data else None
    if data_file is not None and not data_file.is_file():
        ap.error(f"--copy-data {args.copy_data}: no such file (write it with --stage search)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    overrides = {k: json.loads(v) if v[:1].isdigit() or v in ("true", "false") else v for k, _, v in (x.partition("=") for x in args.set)}
    if args.output_dir:
        overrides["run.output_dir"] = str(Path(args.output_dir).resolve())  # from here, not from the config's folder
    cfg = load_train_config(args.config, overrides)
    settings = search_settings(args)
    if args.stage == "grpo" and args.ranking is None:  # GRPO shows the pools as its warm-up was copied on them
        from ..conductor.manifest import read_manifest

        settings = dataclasses.replace(settings, ranking=read_manifest(cfg.output_dir / "warmup").ranking)
    if args.stage == "search":
        print(search_run(cfg, settings))
    if args.stage in ("copy", "both"):
        print(copy_run(cfg, settings, epochs=args.epochs, lr=args.lr, batch_size=args.batch_size, max_batches=args.max_batches,
                       max_minutes=args.copy_max_minutes, data_file=data_file, init=init))
    if args.stage in ("grpo", "both"):
        try:
            print(grpo_run(cfg, settings, per_pool=args.grpo_per_pool))
        except TrainConfigError as exc:  # checked before the model loads: nothing is spent
            ap.error(str(exc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
