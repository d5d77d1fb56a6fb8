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

from ..cache import ResponseCache
from ..model_files import resolve_model
from ..pool import PoolSpec, load_pool
from ..providers.transformers_local import MANIFEST
from ..workflow import Step, Workflow, parse
from .config import TrainConfig, TrainConfigError
from .data import build_rows, load_items, prompt_for, with_bare_questions
from .reward import WorkflowReward

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


def _callbacks(cfg: TrainConfig, reward: WorkflowReward):
    from transformers import TrainerCallback

    out_dir = cfg.output_dir

    class MetricsWriter(TrainerCallback):
        """Every logged step → metrics.jsonl and metrics.csv (columns grow as new metrics appear)."""

        def __init__(self):
            self.rows: list[dict] = []
            self.start = time.time()

        def on_train_begin(self, args, state, control, **kwargs):
            # Rows of an earlier run in this dir past the step we start from (a fresh start: all of them; a
            # resume: those after its checkpoint) would be mixed into this run's curves; drop them.
            path = out_dir / "metrics.jsonl"
            if path.exists():
                kept = [r for r in _read_jsonl(path) if r.get("step", 0) <= state.global_step]
                path.write_text("".join(json.dumps(r) + "\n" for r in kept))
                self._write_csv(kept)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not logs or "reward" not in logs and not any(k.startswith("rewards/") for k in logs):
                return
            row = {"step": state.global_step, "elapsed_s": round(time.time() - self.start, 2), **{k: v for k, v in logs.items() if isinstance(v, (int, float))}}
            self.rows.append(row)
            with (out_dir / "metrics.jsonl").open("a") as fh:
                fh.write(json.dumps(row) + "\n")
            self._write_csv(_read_jsonl(out_dir / "metrics.jsonl"))

        def _write_csv(self, rows: list[dict]) -> None:
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
        """Stop cleanly (save, then export) after ``run.max_minutes`` of training, or at the end of the
        step during which a file named ``STOP`` appeared in the run dir (``touch RUN/STOP``: a run
        stopped early keeps its last step, unlike an interrupt)."""

        def __init__(self, minutes: Optional[float], stop_file: Path):
            self.deadline = None if minutes is None else time.time() + 60 * minutes
            self.stop_file = stop_file

        def on_step_end(self, args, state, control, **kwargs):
            why = None
            if self.deadline is not None and time.time() > self.deadline:
                why = "run.max_minutes reached"
            elif self.stop_file.exists():
                why = f"{self.stop_file} exists"
            if why:
                log.warning("%s at step %d; saving and stopping", why, state.global_step)
                control.should_training_stop = True
                control.should_save = True

    return [MetricsWriter(), LiveBar(), TimeLimit(cfg.run.max_minutes, cfg.output_dir / STOP_FILE)]


def _read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


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


def prepare(cfg: TrainConfig, *, model=None, tokenizer=None, pool_spec: Optional[PoolSpec] = None, warmup: bool = True):
    """The run dir, the model after the optional warm-up (done now, or loaded from RUN/warmup), and the
    dataset rows: returns (pool spec, model, tokenizer, rows)."""
    import torch

    from .warmup import format_targets, warmup_format

    if cfg.run.torch_threads:
        torch.set_num_threads(cfg.run.torch_threads)
    spec = pool_spec or load_pool(cfg.pool_path)
    if model is None:
        model, tokenizer = load_model(cfg)
    if _has_accelerator() and model.device.type == "cpu":
        # GRPOTrainer would move it later; the format warm-up should already run on the GPU.
        model.to(accelerator_device())
    out_dir = cfg.output_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    # A stop asked of an earlier run in this dir is not this one's; one asked during the warm-up is.
    (out_dir / STOP_FILE).unlink(missing_ok=True)
    (out_dir / "train_config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=2, default=str))

    items = load_items(cfg)
    rows = build_rows(cfg, spec, items)
    w = cfg.warmup_sft
    if warmup and w.examples and (out_dir / "warmup" / MANIFEST).exists():
        _load_weights(model, out_dir / "warmup")  # a warm-up done before (an interrupted or repeated run)
    elif warmup and w.examples:
        extra: dict[str, Any] = {"stage": "format warm-up"}
        if w.candidates:
            shown, targets, extra["selection"] = _selected_targets(cfg, spec, rows)
        else:
            targets = format_targets(w.examples, len(spec.workers), cfg.prompt.max_steps, cfg.data.seed, fine_grained=cfg.prompt.fine_grained,
                                     code_runners=_code_runners(cfg, spec))
            # Each prompt gets `targets_per_prompt` consecutive targets: they share its forward pass.
            shown = [rows[(i // w.targets_per_prompt) % len(rows)] for i in range(w.examples)]
            # Randomized pools show fewer workers: keep every target's ids within the prompt's pool.
            targets = [_clip_ids(t, len(row["workers"])) for t, row in zip(targets, shown)]
        suffixed = shown
        if w.bare_share:
            shown = with_bare_questions(cfg, spec, shown, items, w.bare_share)
            extra["bare_examples"] = sum(new is not old for new, old in zip(shown, suffixed))
        _check_rollouts_admit(cfg, shown, targets)
        # What the warm-up was taught, kept beside the model (each prompt's question, domain and target;
        # "bare": asked without the task's answer-format instruction).
        with open(out_dir / WARMUP_TARGETS, "w") as f:
            for row, old, target in zip(shown, suffixed, targets):
                f.write(json.dumps({"domain": row["domain"], "question": row["question"], "target": target, "bare": row is not old}) + "\n")
        losses = warmup_format(model, tokenizer, [row["prompt"] for row in shown], targets, epochs=w.epochs, lr=w.learning_rate, batch_size=w.batch_size)
        export(model, tokenizer, out_dir / "warmup", cfg, extra={**extra, "warmup_losses": losses})
    return spec, model, tokenizer, rows


def build_trainer(cfg: TrainConfig, *, model=None, tokenizer=None, pool_spec: Optional[PoolSpec] = None, warmup: bool = True):
    """Everything up to ``trainer.train()``: returns (trainer, reward)."""
    import os

    from datasets import Dataset
    from trl import GRPOTrainer

    from ..decoding import generate_batch
    from .rollout import SharedPromptRollout

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    spec, model, tokenizer, rows = prepare(cfg, model=model, tokenizer=tokenizer, pool_spec=pool_spec, warmup=warmup)
    settings = cfg.settings
    replay = _replay_store(cfg)
    if replay is not None:
        log.info("replay store %s: %d worker calls stored", replay.path, len(replay))
    reward = WorkflowReward(spec, cfg.reward, cfg.prompt, discount=cfg.recursion.discount, cache=replay)
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
            formats={chat(row["prompt"]): row_format(cfg, row) for row in rows} if cfg.rollout.constrained else None,
        )
    trainer_class = conductor_trainer_class() if shared else GRPOTrainer
    trainer = trainer_class(
        model=model,
        reward_funcs=[reward.workflow_reward],
        args=grpo_args(cfg),
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        callbacks=_callbacks(cfg, reward),
        rollout_func=rollout,
    )
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # the live bar and metrics files replace the raw log dicts
    return trainer, reward


def _load_weights(model, path: Path) -> None:
    """Load an exported stage (adapter or full weights) into the model being trained."""
    from safetensors.torch import load_file

    if (path / "adapter_model.safetensors").exists():
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(model, load_file(str(path / "adapter_model.safetensors")))
    else:
        model.load_state_dict(load_file(str(path / "model.safetensors")), strict=False)
    log.info("loaded the format warm-up from %s", path)


def _check_rollouts_admit(cfg: TrainConfig, shown: list[dict], targets: list[str]) -> None:
    """Constrained rollouts must be able to write what the warm-up teaches: a target longer than the
    rollout format's bounds would be cut mid-subtask on every GRPO sample (and at run time)."""
    if not cfg.rollout.constrained:
        return
    for row, target in zip(shown, targets):
        fmt = row_format(cfg, row)
        if not fmt.complete(fmt.advance(fmt.start(), target)):
            raise TrainConfigError(
                f"a warm-up target does not fit the constrained rollout format (rollout.reason_chars = {cfg.rollout.reason_chars}, "
                f"subtask_chars = {cfg.rollout.subtask_chars}): raise them (and grpo.max_completion_length) to admit it:\n{target}"
            )


def row_format(cfg: TrainConfig, row: dict):
    """The output format a dataset row's prompt asks for (its pool size; round 2 may accept)."""
    return cfg.rollout.format(len(row["workers"]), cfg.prompt.max_steps, fine_grained=cfg.prompt.fine_grained, recursive=row["round"] == 2)


def _selected_targets(cfg: TrainConfig, spec: PoolSpec, rows: list[dict]) -> tuple[list[dict], list[str], dict]:
    """Warm-up targets by rejection sampling: random workflows run on the pool and graded by the run's
    reward; the ``targets_per_prompt`` best are kept. ``selection = "question"`` draws ``candidates`` per
    prompt and ranks them on that prompt's question (step/cost terms zeroed); ``"domain"`` searches
    ``candidates`` per domain across many of its training questions (``_domain_search``).
    Returns (the row of each target, the targets, a summary for the warm-up's manifest)."""
    w = cfg.warmup_sft
    n_prompts = -(-w.examples // w.targets_per_prompt)
    # First-round rows only: a recursive round's best move may be to accept, which no candidate is.
    first = [row for row in rows if row.get("round", 1) == 1]
    prompts = [first[i % len(first)] for i in range(n_prompts)]
    if w.selection == "domain":
        priced = {name: getattr(w, name) for name in ("step_weight", "token_weight") if getattr(w, name) is not None}
        reward = dataclasses.replace(cfg.reward, **priced)
    else:
        reward = dataclasses.replace(cfg.reward, step_weight=0.0, cost_weight=0.0, token_weight=0.0)
    grader = WorkflowReward(spec, reward, cfg.prompt, cache=_replay_store(cfg))

    async def select() -> tuple[list[list[tuple[dict, str, float]]], dict]:
        try:
            if w.selection == "domain":
                return await _domain_search(cfg, spec, grader, prompts, first)
            return await _per_question(cfg, spec, grader, prompts)
        finally:
            await grader.aclose()

    started = time.monotonic()
    kept, summary = asyncio.run(select())
    # Consecutive targets per prompt (they share its forward pass), cut to `examples`.
    picked = [one for best in kept for one in best][: w.examples]
    summary = {"selection": w.selection, "prompts": n_prompts, "candidates": w.candidates, "kept_per_prompt": w.targets_per_prompt, **summary,
               "mean_reward_kept": sum(score for _, _, score in picked) / len(picked), "seconds": round(time.monotonic() - started, 1)}
    log.info("warm-up targets selected (%s): mean reward %.3f over the candidates, %.3f kept (%.0f s)",
             w.selection, summary["mean_reward_candidates"], summary["mean_reward_kept"], summary["seconds"])
    return [row for row, _, _ in picked], [text for _, text, _ in picked], summary


async def _grade(grader: WorkflowReward, pairs: list[tuple[dict, str]]) -> list[float]:
    """The reward of each (row, workflow text), run on the pool."""
    columns = {key: [row[key] for row, _ in pairs] for key in pairs[0][0] if key != "prompt"}
    return await grader.workflow_reward([row["prompt"] for row, _ in pairs], [text for _, text in pairs], **columns)


async def _per_question(cfg: TrainConfig, spec: PoolSpec, grader: WorkflowReward, prompts: list[dict]):
    """``candidates`` random workflows per prompt, each run once on that prompt's question."""
    from .warmup import format_targets, keep_best

    w = cfg.warmup_sft
    drawn = format_targets(len(prompts) * w.candidates, len(spec.workers), cfg.prompt.max_steps, cfg.data.seed, fine_grained=cfg.prompt.fine_grained,
                           code_runners=_code_runners(cfg, spec))
    candidates = [[_clip_ids(t, len(row["workers"])) for t in drawn[i * w.candidates : (i + 1) * w.candidates]] for i, row in enumerate(prompts)]
    flat = await _grade(grader, [(row, t) for row, texts in zip(prompts, candidates) for t in texts])
    scores = [flat[i * w.candidates : (i + 1) * w.candidates] for i in range(len(prompts))]
    scored = [[(row, text, score) for text, score in zip(texts, marks)] for row, texts, marks in zip(prompts, candidates, scores)]
    return keep_best(scored, scores, w.targets_per_prompt, cfg.data.seed), {"mean_reward_candidates": sum(flat) / len(flat)}


async def _domain_search(cfg: TrainConfig, spec: PoolSpec, grader: WorkflowReward, prompts: list[dict], first: list[dict]):
    """Per domain, ``candidates`` random workflows are screened on ``max(2, search_questions // 8)`` of its
    training questions (``screen_rounds`` > 1: successive halving, ``_screen``); the best eighth are
    ranked by mean reward on up to ``search_questions`` others (not the screen's: the questions that
    picked a finalist would flatter it), and the ``targets_per_prompt`` best become the targets of every
    prompt of that domain. One question's lucky outcome picks nothing here (the weakness of per-question
    selection: long chains win by having more chances to repair). Fixed pools only (the config check):
    ids must mean the same worker on every row."""
    from .warmup import format_targets, keep_best, single_worker_plans

    rng = random.Random(f"domain-search|{cfg.data.seed}")
    kept_by_domain: dict[str, list[tuple[str, float]]] = {}
    report = []
    screened: list[float] = []
    domains = list(dict.fromkeys(row["domain"] for row in prompts))
    unknown = sorted(set(cfg.warmup_sft.domains) - set(domains))
    if unknown:
        raise TrainConfigError(f"warmup_sft.domains names {unknown}, which are not domains of the warm-up's prompts (a task's own name, "
                               f"e.g. letter_counting for rg:letter_counting); they are: {domains}")
    for g, domain in enumerate(domains):
        w = cfg.warmup_sft.for_domain(domain)
        questions = [row for row in first if row["domain"] == domain]
        drawn = format_targets(w.candidates, len(spec.workers), cfg.prompt.max_steps, cfg.data.seed * 7919 + g, fine_grained=cfg.prompt.fine_grained,
                               code_runners=_code_runners(cfg, spec))
        if w.single_worker_plans:
            drawn += single_worker_plans(spec)
        texts = list(dict.fromkeys(drawn))
        if len(texts) < w.targets_per_prompt:
            size = cfg.warmup_sft.domains.get(domain)
            setting = f"warmup_sft.domains.{domain}.candidates" if size and size.candidates else "warmup_sft.candidates"
            raise TrainConfigError(f"warmup_sft: only {len(texts)} distinct workflows among {w.candidates} candidates for domain {domain!r}, "
                                   f"fewer than targets_per_prompt = {w.targets_per_prompt}; raise {setting}")
        per_round = max(2, w.search_questions // 8)
        screen = rng.sample(questions, min(len(questions), per_round))
        rest = [row for row in questions if row not in screen]
        ranking = rng.sample(rest, min(len(rest), w.search_questions)) or screen  # a domain of <= 2 questions: the screen
        n_final = max(w.targets_per_prompt, len(texts) // 8)
        # Later rounds' questions come from neither the first screen nor the ranking (drawn in that order,
        # so a one-round search draws what it always drew).
        spare = [row for row in rest if row not in ranking]
        finalists, marks, spare = await _screen(grader, texts, screen, spare, rounds=w.screen_rounds, per_round=per_round, keep=n_final, rng=rng)
        screened += marks
        final = await _mean_rewards(grader, finalists, ranking)
        # Its own random stream: drawing more questions here must not move later domains' draws.
        ranked, by_text, contenders = await _rank(grader, finalists, final, spare, rounds=w.rank_rounds, per_round=len(ranking),
                                                  seed=cfg.data.seed, rng=random.Random(f"rank-rounds|{cfg.data.seed}|{domain}"))
        best = ranked[: w.targets_per_prompt]
        top = by_text[ranked[0]]
        if w.keep_within is not None:
            # A small search keeps weak plans beside its one good one; copy only those near the best (and not
            # beaten in a ranking round), repeated to fill the prompt's targets (the warm-up's size stays).
            near = [t for t in best if t in contenders and by_text[t] >= top - w.keep_within]
            best = [near[i % len(near)] for i in range(w.targets_per_prompt)]
        kept_by_domain[domain] = [(t, by_text[t]) for t in best]
        report.append({"domain": domain, "screened_on": len(screen), "screen_rounds": w.screen_rounds, "ranked_on": len(ranking),
                       "rank_rounds": w.rank_rounds, "candidates": len(texts),
                       "best": top, "kept_mean": sum(by_text[t] for t in best) / len(best),
                       "kept_steps": [len(parse(t).steps) for t in best], "kept_distinct": len(set(best)),
                       "kept": [{"workflow": t, "mean_reward": round(by_text[t], 4)} for t in dict.fromkeys(best)],
                       "finalists": [{"workflow": t, "mean_reward": round(by_text[t], 4), "contender": t in contenders} for t in ranked]})
        log.info("domain search %s: %d candidates, best %.3f after %d ranking round(s) of %d questions", domain, len(texts), top,
                 w.rank_rounds, len(ranking))
    kept = [[(row, text, score) for text, score in kept_by_domain[row["domain"]]] for row in prompts]
    return kept, {"mean_reward_candidates": sum(screened) / len(screened), "domains": report}


async def _screen(grader: WorkflowReward, texts: list[str], screen: list[dict], spare: list[dict], *, rounds: int, per_round: int,
                  keep: int, rng: random.Random) -> tuple[list[str], list[float], list[dict]]:
    """Successive halving: every text on ``screen``; each later round the best half (never fewer than
    ``keep``) on ``per_round`` new questions from ``spare``, ranked by the mean over all its questions so
    far. Returns the ``keep`` best texts, the first round's mean rewards (all candidates) and the spare
    questions no round used."""
    first = await _mean_rewards(grader, texts, screen)
    # Every survivor has run on the same questions, so ranking by total reward is ranking by the mean.
    totals = {t: m * len(screen) for t, m in zip(texts, first)}
    alive = list(texts)
    for _ in range(rounds - 1):
        new = rng.sample(spare, min(len(spare), per_round))
        if len(alive) <= keep or not new:
            break
        spare = [row for row in spare if row not in new]
        alive = sorted(alive, key=lambda t: -totals[t])[: max(keep, -(-len(alive) // 2))]
        for t, m in zip(alive, await _mean_rewards(grader, alive, new)):
            totals[t] += m * len(new)
    return sorted(alive, key=lambda t: -totals[t])[:keep], first, spare


async def _rank(grader: WorkflowReward, finalists: list[str], final: list[float], spare: list[dict], *, rounds: int, per_round: int,
                seed: int, rng: random.Random) -> tuple[list[str], dict[str, float], set[str]]:
    """The finalists best first, after ``rounds - 1`` more ranking rounds. Each round draws ``per_round``
    new questions; the better half of all finalists (at least 2), ranked by the mean over every ranking
    question each has run, must have run every round's questions: whoever is behind catches up, and the
    half is re-ranked until it has. So a finalist that lost its place on the first questions comes back
    when the leaders' means fall on the new ones, as a leader's first-round luck tends to (on the
    offline pool two code wordings 1 question apart of 16 were 18 points apart on held-out arithmetic).
    Returns (texts in rank order: the last round's better half, then the rest; each text's mean reward;
    that half).
    Ties in a seeded random order, as ``keep_best`` breaks them."""
    from .warmup import keep_best

    totals = {t: m * per_round for t, m in zip(finalists, final)}
    counts = dict.fromkeys(finalists, per_round)
    ran = dict.fromkeys(finalists, 0)  # extra rounds each text has run
    batches: list[list[dict]] = []

    def mean(t: str) -> float:
        # Rounded: a text that caught up on two batches at once sums its rewards in another order than one
        # that ran them round by round, and exact ties must stay ties (keep_within = 0, the seeded tie-break).
        return round(totals[t] / counts[t], 9)

    def order() -> list[str]:
        return keep_best([finalists], [[mean(t) for t in finalists]], len(finalists), seed)[0]

    cut = len(finalists)
    for _ in range(rounds - 1):
        new = rng.sample(spare, min(len(spare), per_round))
        if len(finalists) <= 1 or not new:
            break
        spare = [row for row in spare if row not in new]
        batches.append(new)
        cut = max(2, -(-len(finalists) // 2))
        while behind := [t for t in order()[:cut] if ran[t] < len(batches)]:
            for t in behind:
                missed = [row for batch in batches[ran[t]:] for row in batch]
                [caught_up] = await _mean_rewards(grader, [t], missed)
                totals[t] += caught_up * len(missed)
                counts[t] += len(missed)
                ran[t] = len(batches)
    ranked = order()
    return ranked, {t: mean(t) for t in finalists}, set(ranked[:cut])


async def _mean_rewards(grader: WorkflowReward, texts: list[str], questions: list[dict]) -> list[float]:
    """Each workflow's mean reward over the questions (the workflows' subtasks name no question)."""
    flat = await _grade(grader, [(row, t) for t in texts for row in questions])
    n = len(questions)
    return [sum(flat[i * n : (i + 1) * n]) / n for i in range(len(texts))]


def _replay_store(cfg: TrainConfig) -> Optional[ResponseCache]:
    """The run's replay store of real worker calls (``reward.replay``), or None."""
    return ResponseCache(cfg.path(cfg.reward.replay), match="context") if cfg.reward.replay else None


def _code_runners(cfg: TrainConfig, spec: PoolSpec) -> tuple[int, ...]:
    """Ids of the pool's code-running tools, for write-run warm-up shapes; none on randomized pools,
    where an id means a different worker on every row."""
    if cfg.randomize.enabled:
        return ()
    return tuple(i for i, w in enumerate(spec.workers) if w.provider == "python")


def _clip_ids(text: str, n: int) -> str:
    wf = parse(text)
    steps = tuple(Step(s.worker % n, s.subtask, s.access) for s in wf.steps)
    return Workflow(steps, wf.reasoning).render()


def train(cfg: TrainConfig, *, resume: bool = False, warmup_only: bool = False) -> Path:
    """Run GRPO end to end; returns the exported model dir (``warmup_only``: stop after the warm-up,
    returning RUN/warmup; a later run in the same dir starts GRPO from it)."""
    if warmup_only:
        if not cfg.warmup_sft.examples:
            raise TrainConfigError("--warmup-only needs a warm-up: warmup_sft.examples = 0 turns it off")
        prepare(cfg)
        return cfg.output_dir / "warmup"
    trainer, reward = build_trainer(cfg)
    last = _latest_checkpoint(cfg.output_dir) if resume else None
    if resume and last is None:
        log.warning("--resume: no checkpoint in %s; starting fresh", cfg.output_dir)
    start = time.time()
    trainer.train(resume_from_checkpoint=str(last) if last else None)
    extra = {"train_seconds": round(time.time() - start, 1), "global_step": trainer.state.global_step}
    if reward.cache is not None:  # what the replay store saved: calls answered from it vs executed
        extra["replay"] = {k: v for k, v in reward.cache.metrics().items() if k != "per_worker"}
        reward.cache.close()
    return export(trainer.model, trainer.processing_class, cfg.output_dir / "final", cfg, extra=extra)


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
    gguf = None
    if cfg.run.gguf:
        from .gguf_export import export_trained

        gguf = export_trained(model, cfg.model.name, target)  # before merging: it reads the adapter
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
        "pool": str(cfg.pool_path),
        "model": cfg.model.name,
        "gguf": gguf.name if gguf else None,  # llama.cpp copy of the same weights (ask/serve prefer it)
        **(extra or {}),
    }
    (target / MANIFEST).write_text(json.dumps(manifest, indent=2, default=lambda x: x if not isinstance(x, float) or math.isfinite(x) else None))
    return target
