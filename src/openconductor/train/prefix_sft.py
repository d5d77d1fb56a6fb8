"""The supervised copy of searched plans, many questions per pool prompt.

A conductor prompt is mostly its pool (every worker's description); the question is a short tail. The
examples of one pool therefore share a long token prefix: it runs once per batch, its cache (with its
autograd graph) is repeated for the batch, and each row runs only its own tail (the rest of its prompt
and its target plan). The loss is the target's mean token negative log-likelihood; prompts are not
trained on. Exact: the same log-probs as a row run alone (``shared_prompt_logps``, which this reuses).
"""

from __future__ import annotations

import logging
import random
import time
from typing import Optional, Sequence

log = logging.getLogger(__name__)


def batch_loss(model, tokenizer, prompts: Sequence[list[dict]], targets: Sequence[str]):
    """Mean target-token NLL of one batch whose prompts share a prefix (any rows work; sharing makes it cheap)."""
    import torch

    from ..decoding import _common_prefix
    from .rollout import shared_prompt_logps

    eos = tokenizer.eos_token or ""
    prompt_ids = [list(tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]) for p in prompts]
    target_ids = [tokenizer(t + eos, add_special_tokens=False)["input_ids"] for t in targets]
    shared = max(2, _common_prefix(prompt_ids))
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


def copy_plans(model, tokenizer, groups: Sequence[tuple[Sequence[list[dict]], Sequence[str]]], *, epochs: int, lr: float,
               batch_size: int, seed: int = 0, max_batches: Optional[int] = None, max_seconds: Optional[float] = None) -> list[float]:
    """Supervised steps over ``groups`` (each: the prompts of one pool and their target plans); batches
    never mix pools, and their order is shuffled (seeded) so that pools interleave. ``max_batches`` stops
    after that many steps in all (a time box: the shuffle makes the steps taken a sample of every pool);
    ``max_seconds`` after the first step that ends past that much time. Returns the losses."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    optim = torch.optim.AdamW(params, lr=lr)
    model.train()
    batches = [(g, start) for g, (prompts, _) in enumerate(groups) for start in range(0, len(prompts), batch_size)]
    if max_batches is not None and max_batches < 1:
        raise ValueError(f"max_batches must be at least 1 (got {max_batches}); leave it unset to run every epoch in full")
    rng = random.Random(f"copy-plans|{seed}")
    losses: list[float] = []
    total = epochs * len(batches) if max_batches is None else min(max_batches, epochs * len(batches))
    started = time.monotonic()
    for epoch in range(epochs):
        rng.shuffle(batches)
        for g, start in batches:
            if len(losses) >= total or (max_seconds is not None and losses and time.monotonic() - started >= max_seconds):
                if len(losses) < total:
                    log.info("copy: time box of %.0f s reached after %d of %d batches", max_seconds, len(losses), total)
                return losses
            prompts, targets = groups[g]
            loss = batch_loss(model, tokenizer, prompts[start : start + batch_size], targets[start : start + batch_size])
            loss.backward()
            optim.step()
            optim.zero_grad()
            losses.append(float(loss.detach()))
            if len(losses) % 10 == 0:
                log.info("copy epoch %d batch %d/%d: loss %.3f (%.1f s a batch)", epoch + 1, len(losses), total, losses[-1],
                         (time.monotonic() - started) / len(losses))
    return losses
