"""The supervised copy: the model learns to write given target plans for given prompts (loss on the targets only).

One loop for every caller: ``conductor train``'s format warm-up (``trainer.prepare``), the fit's copy of its
per-question targets (through the same ``prepare``) and the copy across generated pools (``sim_general``).

A conductor prompt is mostly its pool (every worker's description); the question is a short tail. The rows of
one batch therefore share a long token prefix (the whole prompt, where one prompt has several targets): it runs
once per batch, its cache (with its autograd graph) is repeated for the batch, and each row runs only its own
tail (the rest of its prompt and its target plan). The loss is the targets' mean token negative log-likelihood.
Exact: the same log-probs as a row run alone (``rollout.shared_prompt_logps``, which this reuses).
"""

from __future__ import annotations

import logging
import os
import random
import time
from typing import Callable, Optional, Sequence

from pydantic import BaseModel, ConfigDict, Field

log = logging.getLogger(__name__)

# (prompts, their target plans): the rows of one pool; a batch never mixes groups.
Group = tuple[Sequence[list[dict]], Sequence[str]]


class SFTSettings(BaseModel):
    """How long and how fast the copy learns. ``shuffle``: visit the batches in a seeded random order each epoch
    (so that pools interleave) rather than in the order given; ``max_batches`` stops after that many optimiser
    steps in all (with the shuffle, a sample of every pool); ``max_seconds`` after the first step that ends past
    that much time."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    epochs: int = Field(1, ge=1)
    learning_rate: float = Field(5e-4, gt=0)
    batch_size: int = Field(4, ge=1)
    seed: int = 0
    shuffle: bool = True
    max_batches: Optional[int] = Field(None, ge=1)
    max_seconds: Optional[float] = Field(None, ge=0)


def batch_loss(model, tokenizer, prompts: Sequence[list[dict]], targets: Sequence[str]):
    """Mean target-token NLL of one batch; the prompts' common token prefix runs once (any rows work)."""
    import torch

    from .rollout import shared_prompt_logps

    eos = tokenizer.eos_token or ""
    prompt_ids = [list(tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]) for p in prompts]
    target_ids = [tokenizer(t + eos, add_special_tokens=False)["input_ids"] for t in targets]
    # The cache is built from the prefix less its last token, so it needs two or more.
    shared = max(2, len(os.path.commonprefix(prompt_ids)))
    tails = [p[shared:] + t for p, t in zip(prompt_ids, target_ids)]
    width = max(len(t) for t in tails)
    pad = tokenizer.pad_token_id
    device = model.device
    ids = torch.tensor([prompt_ids[0][:shared] + t + [pad] * (width - len(t)) for t in tails], device=device)
    mask = torch.tensor([[1] * shared + [1] * len(t) + [0] * (width - len(t)) for t in tails], device=device)
    wanted = torch.tensor([[0] * (len(p) - shared) + [1] * len(t) + [0] * (width - len(p) + shared - len(t))
                           for p, t in zip(prompt_ids, target_ids)], device=device, dtype=torch.float32)
    logps, _ = shared_prompt_logps(model, ids, mask, width)
    return -(logps * wanted).sum() / wanted.sum()


def copy_targets(model, tokenizer, groups: Sequence[Group], settings: SFTSettings, *,
                 on_epoch: Optional[Callable[[int], None]] = None) -> list[float]:
    """Supervised steps (AdamW) over ``groups``, in batches of ``settings.batch_size`` within a group. ``on_epoch``
    is called with the number of epochs done after each whole one (the fit saves there, so that an interrupted copy
    goes on from the last). Returns the losses, one a step."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    optim = torch.optim.AdamW(params, lr=settings.learning_rate)
    model.train()
    size = settings.batch_size
    batches = [(g, start) for g, (prompts, _) in enumerate(groups) for start in range(0, len(prompts), size)]
    rng = random.Random(f"copy-plans|{settings.seed}")
    total = settings.epochs * len(batches) if settings.max_batches is None else min(settings.max_batches, settings.epochs * len(batches))
    limit = settings.max_seconds
    losses: list[float] = []
    started = time.monotonic()
    for epoch in range(settings.epochs):
        if settings.shuffle:
            rng.shuffle(batches)
        for g, start in batches:
            if len(losses) >= total or (limit is not None and losses and time.monotonic() - started >= limit):
                if len(losses) < total:
                    log.info("copy: time box of %.0f s reached after %d of %d batches", limit, len(losses), total)
                return losses
            prompts, targets = groups[g]
            loss = batch_loss(model, tokenizer, prompts[start : start + size], targets[start : start + size])
            loss.backward()
            optim.step()
            optim.zero_grad()
            losses.append(float(loss.detach()))
            if len(losses) % 10 == 0:
                log.info("copy epoch %d batch %d/%d: loss %.3f (%.1f s a batch)", epoch + 1, len(losses), total, losses[-1],
                         (time.monotonic() - started) / len(losses))
        if on_epoch is not None:
            on_epoch(epoch + 1)
    return losses
