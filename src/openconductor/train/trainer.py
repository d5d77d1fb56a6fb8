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
import csv
import dataclasses
import json
import logging
import math
import random
import time
from pathlib import Path
from typing import Any, Optional

from ..pool import PoolSpec, load_pool
from ..workflow import Step, Workflow
from .config import TrainConfig
from .data import build_rows, load_items, prompt_for
from .models import resolve_model
from .reward import WorkflowReward

log = logging.getLogger(__name__)

MANIFEST = "openconductor.json"


def grpo_args(cfg: TrainConfig):
    """The ``GRPOConfig`` a run uses (no GPU needed to build it)."""
    from trl import GRPOConfig

    g, r = cfg.grpo, cfg.run
    report_to = [x for x in r.report_to if _installed(x)]
    kwargs: dict[str, Any] = dict(
        output_dir=str(cfg.output_dir),
        num_generations=g.num_generations,
        per_device_train_batch_size=g.per_device_train_batch_size,
        gradient_accumulation_steps=g.gradient_accumulation_steps,
        learning_rate=g.learning_rate,
        lr_scheduler_type=g.lr_scheduler_type,
        warmup_steps=g.warmup_ratio,  # transformers 5: a value below 1 is a ratio of the total steps
        beta=g.beta,
        temperature=g.temperature,
        top_p=g.top_p,
        max_completion_length=g.max_completion_length,
        max_steps=g.max_steps,
        num_train_epochs=g.num_train_epochs,
        loss_type=g.loss_type,
        scale_rewards=g.scale_rewards,
        num_iterations=g.num_iterations,
        epsilon=g.epsilon,
        seed=g.seed,
        bf16=g.bf16,
        gradient_checkpointing=g.gradient_checkpointing,
        use_vllm=g.use_vllm,
        vllm_mode=g.vllm_mode,
        vllm_server_host=g.vllm_server_host,
        vllm_server_port=g.vllm_server_port,
        vllm_gpu_memory_utilization=g.vllm_gpu_memory_utilization,
        save_steps=r.save_steps,
        save_total_limit=r.save_total_limit,
        logging_steps=r.logging_steps,
        report_to=report_to or "none",
        remove_unused_columns=False,
        log_completions=False,
        disable_tqdm=True,  # our own bar shows the live reward
        use_cpu=not _has_accelerator(),
    )
    if g.deepspeed:
        kwargs["deepspeed"] = str(cfg.path(g.deepspeed))
    kwargs.update(g.extra)
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


# ------------------------------------------------------------------------------------ format warm-up


def format_targets(n: int, n_workers: int, max_steps: int, seed: int) -> list[str]:
    """Short valid workflows (1 step, sometimes 2) in the paper's three-list format, workers uniformly random.

    They teach the output format only: every worker id is equally likely, so routing is left to GRPO.
    """
    rng = random.Random(f"format|{seed}")
    first = ["Solve the task and state the final answer.", "Answer the question and give the final answer."]
    later = ["Check the previous answer and give the final answer.", "Improve the previous answer and give the final answer."]
    out = []
    for _ in range(n):
        k = min(max_steps, rng.choices([1, 2], weights=[0.75, 0.25])[0])
        steps = tuple(
            Step(rng.randrange(n_workers), rng.choice(first) if i == 0 else rng.choice(later), () if i == 0 else "all")
            for i in range(k)
        )
        out.append(Workflow(steps, reasoning="One agent answers." if k == 1 else "Draft, then check.").render())
    return out


def warmup_format(model, tokenizer, prompts: list[list[dict]], targets: list[str], *, epochs: int, lr: float, batch_size: int) -> list[float]:
    """Supervised steps on (runtime prompt → valid workflow text); loss on the completion only."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    optim = torch.optim.AdamW(params, lr=lr)
    model.train()
    losses = []
    for _ in range(epochs):
        for start in range(0, len(prompts), batch_size):
            ids, labels = [], []
            for messages, target in zip(prompts[start : start + batch_size], targets[start : start + batch_size]):
                prompt_ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
                target_ids = tokenizer(target + (tokenizer.eos_token or ""), add_special_tokens=False)["input_ids"]
                ids.append(list(prompt_ids) + target_ids)
                labels.append([-100] * len(prompt_ids) + target_ids)
            width = max(len(x) for x in ids)
            pad = tokenizer.pad_token_id
            # On the model's device: a GPU run moves the model there before the warm-up.
            device = model.device
            input_ids = torch.tensor([x + [pad] * (width - len(x)) for x in ids], device=device)
            label_t = torch.tensor([y + [-100] * (width - len(y)) for y in labels], device=device)
            mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in ids], device=device)
            loss = model(input_ids=input_ids, attention_mask=mask, labels=label_t).loss
            loss.backward()
            optim.step()
            optim.zero_grad()
            losses.append(float(loss.detach()))
            log.info("format warm-up batch %d: loss %.3f", len(losses), losses[-1])
    return losses


# ---------------------------------------------------------------------------------------- generation


def generate(model, tokenizer, batch: list[list[dict]], *, max_new_tokens: int, temperature: float, seed: Optional[int] = None) -> list[str]:
    """Sample one completion per prompt (left-padded batch); greedy when temperature is 0."""
    import torch

    if seed is not None:
        torch.manual_seed(seed)
    texts = [tokenizer.apply_chat_template(m, add_generation_prompt=True, tokenize=False) for m in batch]
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    try:
        enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    finally:
        tokenizer.padding_side = side
    enc = {k: v.to(model.device) for k, v in enc.items()}
    sampling = dict(do_sample=True, temperature=temperature, top_k=0, top_p=1.0) if temperature > 0 else dict(do_sample=False)
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id, **sampling)
    return [tokenizer.decode(row[enc["input_ids"].shape[1] :], skip_special_tokens=True) for row in out]


# ------------------------------------------------------------------------------------------ callbacks


def _callbacks(cfg: TrainConfig, reward: WorkflowReward):
    from transformers import TrainerCallback

    out_dir = cfg.output_dir

    class MetricsWriter(TrainerCallback):
        """Every logged step → metrics.jsonl and metrics.csv (columns grow as new metrics appear)."""

        def __init__(self):
            self.rows: list[dict] = []
            self.start = time.time()

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not logs or "reward" not in logs and not any(k.startswith("rewards/") for k in logs):
                return
            row = {"step": state.global_step, "elapsed_s": round(time.time() - self.start, 2), **{k: v for k, v in logs.items() if isinstance(v, (int, float))}}
            self.rows.append(row)
            with (out_dir / "metrics.jsonl").open("a") as fh:
                fh.write(json.dumps(row) + "\n")
            rows = _read_jsonl(out_dir / "metrics.jsonl")
            keys = ["step", "elapsed_s"] + sorted({k for r in rows for k in r} - {"step", "elapsed_s"})
            with (out_dir / "metrics.csv").open("w", newline="") as fh:
                writer = csv.DictWriter(fh, fieldnames=keys)
                writer.writeheader()
                writer.writerows(rows)

    class LiveBar(TrainerCallback):
        """A progress bar with the live reward, format-error rate and accuracy."""

        def __init__(self):
            self.bar = None

        def on_train_begin(self, args, state, control, **kwargs):
            from tqdm.auto import tqdm

            self.bar = tqdm(total=state.max_steps, initial=state.global_step, desc="GRPO", dynamic_ncols=True)

        def on_step_end(self, args, state, control, **kwargs):
            if self.bar is not None:
                self.bar.update(state.global_step - self.bar.n)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if self.bar is not None and logs and "reward" in logs:
                post = {"reward": f"{logs['reward']:.3f}"}
                for key, short in (("format_error_rate", "fmt_err"), ("accuracy", "acc"), ("steps_per_workflow", "steps")):
                    if key in logs:
                        post[short] = f"{logs[key]:.2f}"
                self.bar.set_postfix(post)

        def on_train_end(self, args, state, control, **kwargs):
            if self.bar is not None:
                self.bar.close()

    class TimeLimit(TrainerCallback):
        """Stop cleanly (then export) after ``run.max_minutes`` of training."""

        def __init__(self, minutes: Optional[float]):
            self.deadline = None if minutes is None else time.time() + 60 * minutes

        def on_step_end(self, args, state, control, **kwargs):
            if self.deadline is not None and time.time() > self.deadline:
                log.warning("run.max_minutes reached at step %d; stopping", state.global_step)
                control.should_training_stop = True
                control.should_save = True

    return [MetricsWriter(), LiveBar(), TimeLimit(cfg.run.max_minutes)]


def _read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ------------------------------------------------------------------------------------------ training


def build_trainer(cfg: TrainConfig, *, model=None, tokenizer=None, pool_spec: Optional[PoolSpec] = None, warmup: bool = True):
    """Everything up to ``trainer.train()``: returns (trainer, reward)."""
    import os

    import torch
    from datasets import Dataset
    from trl import GRPOTrainer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    if cfg.run.torch_threads:
        torch.set_num_threads(cfg.run.torch_threads)
    spec = pool_spec or load_pool(cfg.path(cfg.pool))
    if model is None:
        model, tokenizer = load_model(cfg)
    if _has_accelerator() and model.device.type == "cpu":
        # GRPOTrainer would move it later; the format warm-up should already run on the GPU.
        model.to(accelerator_device())
    out_dir = cfg.output_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "train_config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=2, default=str))

    items = load_items(cfg)
    rows = build_rows(cfg, spec, items)
    w = cfg.warmup_sft
    if warmup and w.examples and not (out_dir / "warmup" / MANIFEST).exists():
        targets = format_targets(w.examples, len(spec.workers), cfg.prompt.max_steps, cfg.data.seed)
        prompts = [rows[i % len(rows)]["prompt"] for i in range(w.examples)]
        # Randomized pools show fewer workers: keep every target's ids within the prompt's pool.
        targets = [_clip_ids(t, len(rows[i % len(rows)]["workers"])) for i, t in enumerate(targets)]
        losses = warmup_format(model, tokenizer, prompts, targets, epochs=w.epochs, lr=w.learning_rate, batch_size=w.batch_size)
        export(model, tokenizer, out_dir / "warmup", cfg, extra={"stage": "format warm-up", "warmup_losses": losses})

    reward = WorkflowReward(spec, cfg.reward, cfg.prompt, discount=cfg.recursion.discount)
    if cfg.recursion.blend_fraction > 0:

        async def sampler(batch: list[list[dict]]) -> list[str]:
            return await asyncio.to_thread(
                generate, model, tokenizer, batch, max_new_tokens=cfg.grpo.max_completion_length, temperature=cfg.grpo.temperature
            )

        reward.recursive_sampler = sampler
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=grpo_args(cfg),
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        callbacks=_callbacks(cfg, reward),
    )
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # the live bar and metrics files replace the raw log dicts
    return trainer, reward


def _clip_ids(text: str, n: int) -> str:
    from ..workflow import parse

    wf = parse(text)
    steps = tuple(Step(s.worker % n, s.subtask, s.access) for s in wf.steps)
    return Workflow(steps, wf.reasoning).render()


def train(cfg: TrainConfig, *, resume: bool = False) -> Path:
    """Run GRPO end to end; returns the exported model dir."""
    trainer, reward = build_trainer(cfg)
    last = _latest_checkpoint(cfg.output_dir) if resume else None
    if resume and last is None:
        log.warning("--resume: no checkpoint in %s; starting fresh", cfg.output_dir)
    start = time.time()
    trainer.train(resume_from_checkpoint=str(last) if last else None)
    final = export(trainer.model, trainer.processing_class, cfg.output_dir / "final", cfg, extra={"train_seconds": round(time.time() - start, 1), "global_step": trainer.state.global_step})
    return final


def _latest_checkpoint(out_dir: Path) -> Optional[Path]:
    found = sorted(out_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]) if p.name.split("-")[-1].isdigit() else -1)
    return found[-1] if found else None


def export(model, tokenizer, target: Path, cfg: TrainConfig, extra: Optional[dict] = None) -> Path:
    """Save a conductor the runtime loads: LoRA adapter (or merged/full model) + tokenizer + manifest."""
    target.mkdir(parents=True, exist_ok=True)
    is_peft = hasattr(model, "peft_config")
    mode = cfg.run.export
    if mode == "auto":
        mode = "adapter" if is_peft else "full"
    if mode == "merged" and is_peft:
        model = model.merge_and_unload()
    if mode == "adapter" and not is_peft:
        mode = "full"
    model.save_pretrained(target, safe_serialization=True)
    tokenizer.save_pretrained(target)
    manifest = {
        "format": "openconductor-conductor/1",
        "kind": mode,
        "base_model": _base_source(cfg) if mode == "adapter" else None,
        "prompt": dataclasses.asdict(cfg.prompt),
        "pool": str(cfg.path(cfg.pool)),
        **(extra or {}),
    }
    (target / MANIFEST).write_text(json.dumps(manifest, indent=2, default=lambda x: x if not isinstance(x, float) or math.isfinite(x) else None))
    return target
