"""GRPO training of a conductor on TRL's ``GRPOTrainer``, with the reward executing workflows on a pool.

``train(cfg)`` builds the model (optionally LoRA), an optional supervised format warm-up, the
dataset of runtime prompts, the async workflow reward, and runs GRPO. It writes into the run dir:
``metrics.jsonl`` / ``metrics.csv`` (one row per logged step), TensorBoard events when installed,
checkpoints every ``run.save_steps`` (``--resume`` continues from the latest), and ``final/``: the
exported conductor (full model or LoRA adapter) with ``openconductor.json`` describing the prompt,
which ``conductor ask --conductor RUN_DIR/final`` loads.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from pathlib import Path
from typing import Any, Callable, Optional

from ..model_files import resolve_model
from ..pool import PoolSpec, load_pool
from ..conductor.manifest import ConductorManifest, PoolInfo, PromptInfo, has_manifest, read_manifest
from .config import TrainConfig, TrainConfigError
from ..cache import ResponseCache
from .distributed import distributed, processes_record
from .data import Item, TrainRow, build_rows, load_items, shown_aliases, shown_names, with_bare_questions
from .reward import WorkflowReward, replay_store
from .search.warmup_targets import warmup_targets

log = logging.getLogger(__name__)
STOP_FILE = "STOP"  # `touch RUN/STOP`: stop after the current step, save, export


def grpo_args(cfg: TrainConfig):
    """The ``GRPOConfig`` a run uses (no GPU needed to build it): the config's GRPO settings plus the run's."""
    from trl import GRPOConfig

    r = cfg.run
    kwargs: dict[str, Any] = dict(cfg.settings)
    if kwargs.get("deepspeed"):
        kwargs["deepspeed"] = str(cfg.path(kwargs["deepspeed"]))
    report_to = [x for x in r.report_to if _installed(x)]
    kwargs.update(
        output_dir=str(cfg.output_dir),
        save_steps=r.save_steps,
        save_total_limit=r.save_total_limit,
        logging_steps=r.logging_steps,
        report_to=report_to or "none",
        remove_unused_columns=False,
        log_completions=False,
        disable_tqdm=True,  # our own bar shows the live reward
        use_cpu=not _has_accelerator(),
    )
    return GRPOConfig(**kwargs)


def _installed(name: str) -> bool:
    import importlib.util

    module = {"tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio"}.get(name, name)
    return importlib.util.find_spec(module) is not None


def _has_accelerator() -> bool:
    import torch

    return torch.cuda.is_available()


def accelerator_device() -> str:
    """Where training and held-out generation run: the GPU when torch sees one."""
    return "cuda" if _has_accelerator() else "cpu"


# ------------------------------------------------------------------------------------------ the model


def load_model(cfg: TrainConfig):
    """(model, tokenizer). ``model.tiny`` builds a random model from a config (tests)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    source = resolve_model(cfg.model.name)
    tokenizer = AutoTokenizer.from_pretrained(source)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    dtype = getattr(torch, cfg.model.dtype)
    if cfg.model.tiny is not None:
        tiny = dict(cfg.model.tiny)
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**tiny), dtype=dtype)
    else:
        model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    if cfg.model.lora is not None:
        from peft import LoraConfig, get_peft_model

        lo = cfg.model.lora
        model = get_peft_model(
            model,
            LoraConfig(
                r=lo.r, lora_alpha=lo.alpha, lora_dropout=lo.dropout, target_modules=lo.target_modules,
                layers_to_transform=lo.layers, task_type="CAUSAL_LM",
            ),
        )
    return model, tokenizer


def _base_source(cfg: TrainConfig) -> str:
    return str(Path(resolve_model(cfg.model.name)).resolve()) if Path(resolve_model(cfg.model.name)).exists() else cfg.model.name


# ------------------------------------------------------------------------------------------ callbacks


def _callbacks(cfg: TrainConfig):
    """The run's trainer callbacks: metrics files, the live bar, the time limit and STOP file."""
    from .callbacks import LiveBar, MetricsWriter, TimeLimit

    return [MetricsWriter(cfg.output_dir), LiveBar(), TimeLimit(cfg.run.max_minutes, cfg.output_dir / STOP_FILE)]


# ------------------------------------------------------------------------------------------ training


def conductor_trainer_class():
    """TRL's ``GRPOTrainer`` whose loss log-probs run each distinct prompt once (``train/rollout.py``)."""
    from trl import GRPOTrainer

    from .rollout import shared_prompt_logps

    class ConductorGRPOTrainer(GRPOTrainer):
        def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None,
                                               compute_entropy=False, compute_aux_loss=False, **extra):
            if compute_aux_loss or any(v is not None for v in extra.values()):  # MoE / multimodal: TRL's own path
                return super()._get_per_token_logps_and_entropies(
                    model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, compute_aux_loss, **extra
                )
            with self.accelerator.autocast():
                logps, entropy = shared_prompt_logps(
                    model, input_ids, attention_mask, logits_to_keep, temperature=self.temperature, compute_entropy=compute_entropy
                )
            return logps, entropy, None

    return ConductorGRPOTrainer


WARMUP_TARGETS = "warmup_targets.jsonl"
Targets = tuple[list[TrainRow], list[str], Optional[dict]]  # the warm-up's rows, their target texts, a summary for its manifest


def init_checkpoint(ref: str, option: str = "model.init") -> Path:
    """The directory of a trained conductor to start from (a path or builtin:NAME), refused with what to do when it
    holds no trained weights (``option``: how the user gave it, for the message)."""
    from ..pool import PoolConfigError
    from ..conductor.checkpoint import checkpoint_path

    try:
        path = checkpoint_path(ref)
    except PoolConfigError as exc:
        raise TrainConfigError(f"{option}: {exc}") from exc
    if weights_file(path) is None:
        raise TrainConfigError(f"{option} = {ref!r}: no trained conductor there (adapter_model.safetensors or model.safetensors); "
                               "name a conductor's directory or builtin:NAME")
    return path


def check_same_prompt(directory: Path, cfg: TrainConfig) -> None:
    """Refuse to go on with GRPO from the conductor in ``directory`` when it was trained on prompts built otherwise
    than ``cfg.prompt`` builds them: GRPO samples from the policy, so it would train on prompts the conductor never
    saw, without a word. The message names the ``--set`` that makes them the same. (A supervised warm-up or copy
    may move a conductor onto a new prompt; only GRPO straight from a conductor is held to this.)"""
    wanted = dataclasses.asdict(cfg.prompt)
    recorded = read_manifest(directory).prompt.model_dump()
    differs = {k: v for k, v in recorded.items() if v is not None and k in wanted and wanted[k] != v}
    if differs:
        raise TrainConfigError(f"{directory} was trained on prompts built with "
                               + ", ".join(f"prompt.{k}={json.dumps(v)}" for k, v in differs.items())
                               + " and this config builds them with " + ", ".join(f"prompt.{k}={json.dumps(wanted[k])}" for k in differs)
                               + ": pass " + " ".join(f"--set prompt.{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in differs.items()))


def check_grpo_start(cfg: TrainConfig) -> None:
    """``conductor train`` with ``model.init`` and no warm-up is GRPO straight from that conductor: held to the prompts
    it was trained on (``check_same_prompt``), before the model loads. (``conductor fit`` copies before its GRPO.)"""
    if cfg.model.init and not cfg.warmup_sft.examples:
        check_same_prompt(init_checkpoint(cfg.model.init), cfg)


def check_init(cfg: TrainConfig) -> Optional[Path]:
    """``model.init``'s directory, checked before anything is spent: it holds trained weights, and an adapter has the
    run's LoRA shape where the config spells the shape out (``load_weights`` checks again when it loads)."""
    if not cfg.model.init:
        return None
    path = init_checkpoint(cfg.model.init)
    lora = cfg.model.lora
    if lora is not None and isinstance(lora.target_modules, list) and (path / "adapter_config.json").is_file():
        from types import SimpleNamespace

        _check_same_lora(path, SimpleNamespace(r=lora.r, lora_alpha=lora.alpha, target_modules=lora.target_modules, layers_to_transform=lora.layers))
    return path


def init_source(init: Path) -> dict:
    """What a run started from, for its manifest: the directory and a digest of its weights."""
    import hashlib

    weights = weights_file(init)
    if weights is None:
        raise FileNotFoundError(f"{init}: no trained conductor there (adapter_model.safetensors or model.safetensors)")
    return {"path": str(init), "sha256": hashlib.sha256(weights.read_bytes()).hexdigest()}


def prepare(cfg: TrainConfig, *, model=None, tokenizer=None, pool_spec: Optional[PoolSpec] = None, warmup: bool = True,
            items: Optional[list[Item]] = None, targets: Optional[Targets] = None, rows: Optional[list[TrainRow]] = None,
            on_epoch: Optional[Callable[[int], None]] = None):
    """The run dir, the model after the optional warm-up (done now, or loaded from RUN/warmup), and the
    dataset rows: returns (pool spec, model, tokenizer, rows). ``items``: the training questions (default: the
    config's data); ``targets``: the warm-up's (rows, target texts, summary) chosen by the caller (``conductor
    fit``'s per-question targets) instead of by the config's ``[search]``; ``rows``: the dataset rows given by
    the caller instead (e.g. one pool per row across generated pools)."""
    import torch

    if cfg.run.torch_threads:
        torch.set_num_threads(cfg.run.torch_threads)
    spec = pool_spec or load_pool(cfg.pool_path)
    if model is None:
        model, tokenizer = load_model(cfg)
        if cfg.model.init:  # a warm-up or GRPO of this run, when there is one, is loaded over it below
            load_weights(model, init_checkpoint(cfg.model.init))
    state = distributed()
    if _has_accelerator() and model.device.type == "cpu":
        # GRPOTrainer would move it later; the format warm-up should already run on the GPU (this process's).
        model.to(state.device)
    if rows is None:
        rows = build_rows(cfg, spec, items if items is not None else load_items(cfg))
    if state.is_main_process:  # a stop asked of an earlier run in this dir is not this one's; one asked during the warm-up is
        cfg.output_dir.mkdir(parents=True, exist_ok=True)
        (cfg.output_dir / STOP_FILE).unlink(missing_ok=True)
        (cfg.output_dir / "train_config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=2, default=str))
    _warm_up(cfg, model, tokenizer, spec, rows, warmup, items, targets, on_epoch)
    return spec, model, tokenizer, rows


def _warm_up(cfg: TrainConfig, model, tokenizer, spec: PoolSpec, rows: list[TrainRow], warmup: bool, items: Optional[list[Item]],
             targets: Optional[Targets], on_epoch: Optional[Callable[[int], None]]) -> None:
    """The supervised format warm-up (``prepare``), or loading the one done before in this run dir."""
    from .supervised_copy import copy_targets
    from .warmup import taught_wordings

    out_dir = cfg.output_dir
    w = cfg.warmup_sft
    if warmup and w.examples and has_manifest(out_dir / "warmup"):
        load_weights(model, out_dir / "warmup")  # a warm-up done before (an interrupted or repeated run)
    elif warmup and w.examples:
        extra: dict[str, Any] = {"stage": "format warm-up"}
        if cfg.model.init:
            extra["init"] = init_source(init_checkpoint(cfg.model.init))
        shown, texts, selection = targets if targets is not None else warmup_targets(cfg, spec, rows)
        if selection is not None:
            extra["selection"] = selection
        suffixed = shown
        if w.bare_share:
            shown = with_bare_questions(cfg, spec, shown, items, w.bare_share)
            extra["bare_examples"] = sum(new is not old for new, old in zip(shown, suffixed))
        _check_rollouts_admit(cfg, spec, shown, texts)
        extra["wordings"] = taught_wordings(texts)
        # What the warm-up was taught, kept beside the model (each prompt's question, domain and target;
        # "bare": asked without the task's answer-format instruction).
        with open(out_dir / WARMUP_TARGETS, "w") as f:
            for row, old, target in zip(shown, suffixed, texts):
                f.write(json.dumps({"domain": row.domain, "question": row.question, "target": target, "bare": row is not old}) + "\n")
        losses = copy_targets(model, tokenizer, [([row.prompt for row in shown], texts)], w.sft(), on_epoch=on_epoch)
        export(model, tokenizer, out_dir / "warmup", cfg, extra={**extra, "warmup_losses": losses}, pool=spec)


def build_trainer(cfg: TrainConfig, *, model=None, tokenizer=None, pool_spec: Optional[PoolSpec] = None, warmup: bool = True,
                  items: Optional[list[Item]] = None, cache: Optional[ResponseCache] = None, rows: Optional[list[TrainRow]] = None):
    """Everything up to ``trainer.train()``: returns (trainer, reward). ``items`` and ``rows`` as for ``prepare``;
    ``cache``: the replay store to use instead of the config's ``reward.replay`` (``conductor fit``'s metered one)."""
    import os

    from datasets import Dataset
    from trl import GRPOTrainer

    from ..decoding import generate_batch
    from .rollout import SharedPromptRollout

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    with distributed().main_process_first():  # under accelerate launch the main process warms up; the others then load it
        spec, model, tokenizer, rows = prepare(cfg, model=model, tokenizer=tokenizer, pool_spec=pool_spec, warmup=warmup, items=items, rows=rows)
    wordings = rollout_wordings(cfg)
    settings = cfg.settings
    replay = cache if cache is not None else replay_store(cfg)
    if replay is not None:
        log.info("replay store %s: %d worker calls stored", replay.path, len(replay))
    reward = WorkflowReward(spec, cfg.reward, cfg.prompt, discount=cfg.recursion.discount, cache=replay, owns_cache=cache is None)
    if cfg.recursion.blend_fraction > 0:

        async def sampler(batch: list[list[dict]]) -> list[str]:
            return await asyncio.to_thread(
                generate_batch, model, tokenizer, batch, max_new_tokens=settings["max_completion_length"], temperature=settings["temperature"]
            )

        reward.recursive_sampler = sampler
    shared = cfg.rollout.mode == "shared-prompt"
    rollout = None
    if shared:
        chat = lambda prompt: tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)  # noqa: E731
        rollout = SharedPromptRollout(
            tokenizer, max_new_tokens=settings["max_completion_length"], temperature=settings["temperature"],
            top_p=settings.get("top_p", 1.0), seed=settings.get("seed", 0),
            formats={chat(row.prompt): row_format(cfg, row, spec, wordings) for row in rows} if cfg.rollout.constrained else None,
        )
    trainer_class = conductor_trainer_class() if shared else GRPOTrainer
    trainer = trainer_class(
        model=model,
        reward_funcs=[reward.workflow_reward],
        args=grpo_args(cfg),
        train_dataset=Dataset.from_list([row.columns() for row in rows]),
        processing_class=tokenizer,
        callbacks=_callbacks(cfg),
        rollout_func=rollout,
    )
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # the live bar and metrics files replace the raw log dicts
    return trainer, reward


def weights_file(checkpoint: Path) -> Optional[Path]:
    """A trained conductor's weights: its LoRA adapter, else full weights; None when it has neither."""
    return next((f for f in (checkpoint / "adapter_model.safetensors", checkpoint / "model.safetensors") if f.is_file()), None)


def load_weights(model, path: Path) -> None:
    """Load an exported stage (adapter or full weights) into the model being trained. Refused, naming what
    differs, where it does not fit: peft and ``strict=False`` would load part of it, or nothing, without a word."""
    from safetensors.torch import load_file

    lora = getattr(model, "peft_config", {}).get("default")
    weights = weights_file(path)
    if weights is None:
        raise TrainConfigError(f"{path}: no trained weights there (adapter_model.safetensors or model.safetensors)")
    if weights.name == "adapter_model.safetensors":
        if lora is None:
            raise TrainConfigError(f"{path} is a LoRA adapter and this run trains without one: set model.lora as in its adapter_config.json")
        _check_same_lora(path, lora)
        from peft import set_peft_model_state_dict

        loaded = set_peft_model_state_dict(model, load_file(str(weights)))
        mismatched = [k for k in [*loaded.unexpected_keys, *loaded.missing_keys] if "lora_" in k]
        if mismatched:
            raise TrainConfigError(f"{path}: its adapter and this run's LoRA (model.lora) differ, e.g. in {mismatched[0]}: "
                                   f"train with the LoRA settings it was trained with (its adapter_config.json)")
    else:
        if lora is not None:
            raise TrainConfigError(f"{path} holds full weights (model.safetensors) and this run trains a LoRA adapter on the base model: "
                                   f"leave model.lora out to train from them")
        loaded = model.load_state_dict(load_file(str(weights)), strict=False)
        if loaded.unexpected_keys:
            raise TrainConfigError(f"{path}: its weights do not fit this run's model (model.name), e.g. {loaded.unexpected_keys[0]}")
    log.info("loaded the weights of %s", path)


def _check_same_lora(path: Path, lora) -> None:
    """The adapter's shape and scaling (alpha / r is in no weight) against the run's LoRA."""
    saved = json.loads((path / "adapter_config.json").read_text())
    ours = {"r": lora.r, "lora_alpha": lora.lora_alpha, "target_modules": sorted(lora.target_modules or []),
            "layers_to_transform": lora.layers_to_transform}
    theirs = {"r": saved.get("r"), "lora_alpha": saved.get("lora_alpha"), "target_modules": sorted(saved.get("target_modules") or []),
              "layers_to_transform": saved.get("layers_to_transform")}
    differ = [f"{k}: {theirs[k]} there, {ours[k]} here" for k in ours if theirs[k] != ours[k]]
    if differ:
        raise TrainConfigError(f"{path}: its adapter and this run's LoRA (model.lora) differ ({'; '.join(differ)}): "
                               f"train with the LoRA settings it was trained with")


def _check_rollouts_admit(cfg: TrainConfig, spec: PoolSpec, shown: list[TrainRow], targets: list[str]) -> None:
    """Constrained rollouts must be able to write what the warm-up teaches: a target longer than the
    rollout format's bounds would be cut mid-subtask on every GRPO sample (and at run time)."""
    if not cfg.rollout.constrained:
        return
    for row, target in zip(shown, targets):
        fmt = row_format(cfg, row, spec)
        if not fmt.complete(fmt.advance(fmt.start(), target)):
            raise TrainConfigError(
                f"a warm-up target does not fit the constrained rollout format (rollout.reason_chars = {cfg.rollout.reason_chars}, "
                f"subtask_chars = {cfg.rollout.subtask_chars}): raise them (and grpo.max_completion_length) to admit it:\n{target}"
            )


def row_format(cfg: TrainConfig, row: TrainRow, spec: PoolSpec, wordings: tuple[str, ...] = ()):
    """The output format a dataset row's prompt asks for (its pool size; round 2 may accept; with
    ``prompt.ids_follow_names``, the shown workers' names, to which the ids are bound; ``wordings``: the only subtasks)."""
    names = shown_names(row.names, row.workers, spec) if cfg.prompt.ids_follow_names else ()
    return cfg.rollout.format(len(row.workers), cfg.prompt.max_steps, fine_grained=cfg.prompt.fine_grained, recursive=row.round == 2,
                              names=names, name_slots=cfg.prompt.name_slots, aliases=shown_aliases(cfg.prompt, row.workers, spec),
                              wordings=wordings)


def rollout_wordings(cfg: TrainConfig) -> tuple[str, ...]:
    """With ``rollout.subtasks = "trained"``, the subtasks the run's warm-up taught (its manifest's ``wordings``); else ()."""
    if cfg.rollout.subtasks != "trained":
        return ()
    warm = cfg.output_dir / "warmup"
    recorded = read_manifest(warm).wordings if has_manifest(warm) else None
    if not recorded:
        raise TrainConfigError(f"rollout.subtasks = 'trained' holds GRPO to the warm-up's wordings, and {warm} records none: "
                               "run the warm-up in this output dir (warmup_sft.examples > 0; a warm-up made before manifests "
                               "recorded wordings gets them from scripts/record_wordings.py), or set rollout.subtasks = 'free'")
    return tuple(recorded)



def train(cfg: TrainConfig, *, resume: bool = False, warmup_only: bool = False, items: Optional[list[Item]] = None,
          cache: Optional[ResponseCache] = None, pool_spec: Optional[PoolSpec] = None,
          on_step: Optional[Callable[[int], None]] = None) -> Path:
    """Run GRPO end to end; returns the exported model dir (``warmup_only``: stop after the warm-up,
    returning RUN/warmup; a later run in the same dir starts GRPO from it). ``items``, ``cache`` and
    ``pool_spec`` as for ``build_trainer``; ``on_step(n)`` counts GRPO steps as they finish (1 after each; a resumed
    run first reports the steps its checkpoint had done)."""
    if warmup_only:
        if not cfg.warmup_sft.examples:
            raise TrainConfigError("--warmup-only needs a warm-up: warmup_sft.examples = 0 turns it off")
        with distributed().main_process_first():
            prepare(cfg, items=items)
        return cfg.output_dir / "warmup"
    check_grpo_start(cfg)  # before the model loads and any worker is called
    trainer, reward = build_trainer(cfg, items=items, cache=cache, pool_spec=pool_spec)
    if on_step is not None:
        from .callbacks import OnStep

        trainer.add_callback(OnStep(on_step))
    last = _latest_checkpoint(cfg.output_dir) if resume else None
    if resume and last is None:
        log.warning("--resume: no checkpoint in %s; starting fresh", cfg.output_dir)
    start = time.time()
    trainer.train(resume_from_checkpoint=str(last) if last else None)
    extra: dict[str, Any] = {"train_seconds": round(time.time() - start, 1), "global_step": trainer.state.global_step,
                             **processes_record(trainer, reward.calls)}
    if wordings := rollout_wordings(cfg):  # GRPO wrote only these: the final model is held to them too
        extra["wordings"] = list(wordings)
    if reward.cache is not None:  # what the replay store saved: calls answered from it vs executed
        extra["replay"] = {k: v for k, v in reward.cache.metrics().items() if k != "per_worker"}
        if cache is None:  # a store the caller passed stays open for the caller
            reward.cache.close()
    # Under DeepSpeed ZeRO-3 each process holds a shard: gathered by every process, written by the main one.
    weights = trainer.accelerator.get_state_dict(trainer.model_wrapped) if trainer.is_deepspeed_enabled else None
    final = cfg.output_dir / "final"
    if trainer.accelerator.is_main_process:
        export(trainer.model, trainer.processing_class, final, cfg, extra=extra, pool=reward.pool_spec, state_dict=weights)
    trainer.accelerator.wait_for_everyone()
    return final


def _latest_checkpoint(out_dir: Path) -> Optional[Path]:
    def step(path: Path) -> int:
        number = path.name.split("-")[-1]
        return int(number) if number.isascii() and number.isdigit() else -1

    found = sorted(out_dir.glob("checkpoint-*"), key=step)
    return found[-1] if found else None


def export(model, tokenizer, target: Path, cfg: TrainConfig, extra: Optional[dict] = None, pool: Optional[PoolSpec] = None,
           state_dict: Optional[dict] = None) -> Path:
    """Save a conductor the runtime loads: LoRA adapter (or merged/full model) + tokenizer + manifest
    (``pool``: the pool it was trained on, default the config's; ``state_dict``: the weights gathered from
    ZeRO-3 shards, saved instead of the model's own)."""
    target.mkdir(parents=True, exist_ok=True)
    is_peft = hasattr(model, "peft_config")
    mode = cfg.run.export
    if mode == "auto":
        mode = "adapter" if is_peft else "full"
    gguf = None
    if cfg.run.gguf:
        from ..conductor.gguf_export import export_trained

        gguf = export_trained(model, cfg.model.name, target)  # before merging: it reads the adapter
    if mode == "merged" and is_peft:
        model = model.merge_and_unload()
    if mode == "adapter" and not is_peft:
        mode = "full"
    model.save_pretrained(target, safe_serialization=True, **({"state_dict": state_dict} if state_dict is not None else {}))
    tokenizer.save_pretrained(target)
    spec = pool or load_pool(cfg.pool_path)
    ConductorManifest(
        kind=mode,
        base_model=_base_source(cfg) if mode == "adapter" else None,
        prompt=PromptInfo(**dataclasses.asdict(cfg.prompt)),
        pool=PoolInfo(name=spec.name, workers=[w.name for w in spec.workers], path=str(cfg.pool_path)),
        model=cfg.model.name,
        gguf=gguf.name if gguf else None,  # llama.cpp copy of the same weights (ask/serve prefer it)
        **(extra or {}),
    ).write(target)
    return target
