"""Shared-prompt rollouts and log-probs: what makes GRPO on a CPU affordable.

GRPO samples ``num_generations`` completions of the *same* prompt, and the conductor's prompt (pool,
instructions, examples, question: ~400-600 tokens) is several times longer than its plan (~60-120
tokens). TRL's stock path runs the whole prompt once per completion, twice (to sample, then to score).
Here each distinct prompt is run once: its key/value cache is repeated for its group, and only the
completions are computed per row.

* ``SharedPromptRollout``: sampling (TRL's ``rollout_func`` hook) with ``decoding.sample_group``: one prefill per
  distinct prompt, then batched token-by-token decoding of the group on the repeated cache.
* ``shared_prompt_logps``: the per-token log-probs (and entropies) the GRPO loss needs, with gradients
  flowing into the prompt's cache exactly as in the full forward; used by ``ConductorGRPOTrainer``.

Both are exact: ``tests/test_train_rollout.py`` checks the log-probs against TRL's own computation.

Sampling can be *constrained* to the conductor's output language (``decoding.py``, with the format's
automaton from ``workflow.WorkflowFormat``): every plan parses. The loss still scores the sampled tokens
under the unconstrained model, as GRPO with a grammar-constrained sampler (e.g. vLLM's guided decoding) does.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from ..decoding import TokenConstraint, sample_group
from ..workflow import WorkflowFormat


class SharedPromptRollout:
    """TRL ``rollout_func``: tokenizes the chat prompts and samples each distinct prompt's group at once."""

    def __init__(self, tokenizer, *, max_new_tokens: int, temperature: float = 1.0, top_p: float = 1.0, seed: int = 0,
                 formats: Optional[dict[str, WorkflowFormat]] = None):
        """``formats``: a prompt's format by its chat text (constrained sampling); prompts not in it are free."""
        self.tokenizer = tokenizer
        self.max_new_tokens, self.temperature, self.top_p = max_new_tokens, temperature, top_p
        self.generator = torch.Generator().manual_seed(seed)
        eos = tokenizer.eos_token_id
        self.eos_ids = [eos] if isinstance(eos, int) else list(eos or [])
        self.formats = formats or {}
        self.constraint = TokenConstraint(tokenizer, self.eos_ids) if self.formats else None

    def text(self, prompt: list[dict]) -> str:
        return self.tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)

    def __call__(self, prompts: list, trainer) -> dict[str, Any]:
        model = trainer.model
        texts = [self.text(p) for p in prompts]
        groups: dict[str, list[int]] = {}
        for i, text in enumerate(texts):
            groups.setdefault(text, []).append(i)
        prompt_ids: list[list[int]] = [[] for _ in prompts]
        completion_ids: list[list[int]] = [[] for _ in prompts]
        was_training = model.training
        model.eval()
        try:
            for text, rows in groups.items():
                ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
                samples = sample_group(
                    model, ids, len(rows), max_new_tokens=self.max_new_tokens, eos_ids=self.eos_ids,
                    temperature=self.temperature, top_p=self.top_p, generator=self.generator,
                    constraint=self.constraint, fmt=self.formats.get(text),
                )
                for row, completion in zip(rows, samples):
                    prompt_ids[row], completion_ids[row] = ids, completion
        finally:
            model.train(was_training)
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": None}


def shared_prompt_logps(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    *,
    temperature: float = 1.0,
    compute_entropy: bool = False,
) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
    """Per-token log-probs (and entropies) of the last ``logits_to_keep`` tokens of each row, from logits
    divided by ``temperature`` (as TRL scores them).

    Rows are ``[left-padded prompt | right-padded completion]`` as TRL builds them. Rows with the same
    prompt share one prompt forward, whose cache (with its autograd graph) is repeated for the group.
    """
    batch, width = input_ids.shape
    prompt_width = width - logits_to_keep
    device = input_ids.device
    groups: dict[tuple[int, ...], list[int]] = {}
    for i in range(batch):
        prompt = input_ids[i, :prompt_width][attention_mask[i, :prompt_width].bool()]
        groups.setdefault(tuple(prompt.tolist()), []).append(i)
    pieces_lp, pieces_ent, order = [], [], []
    for prompt, rows in groups.items():
        rows_t = torch.tensor(rows, device=device)
        prompt_t = torch.tensor([prompt], device=device)
        # The prompt minus its last token builds the cache; that token then predicts the first completion token.
        cache = model(input_ids=prompt_t[:, :-1], use_cache=True, logits_to_keep=1).past_key_values
        if cache is None:
            raise RuntimeError("the model returned no cache (gradient checkpointing turns it off): shared-prompt log-probs need it")
        cache.batch_repeat_interleave(len(rows))
        completion = input_ids[rows_t, prompt_width:]
        completion_mask = attention_mask[rows_t, prompt_width:]
        step_in = torch.cat([prompt_t[:, -1:].expand(len(rows), 1), completion[:, :-1]], dim=1)
        mask = torch.cat([torch.ones(len(rows), len(prompt), dtype=attention_mask.dtype, device=device), completion_mask[:, :-1]], dim=1)
        logits = model(input_ids=step_in, attention_mask=mask, past_key_values=cache, use_cache=True).logits.float()
        logp = torch.log_softmax(logits / temperature, dim=-1)
        pieces_lp.append(logp.gather(-1, completion.unsqueeze(-1)).squeeze(-1))
        if compute_entropy:
            pieces_ent.append(-(logp.exp() * logp).sum(-1))
        order += rows
    index = torch.tensor(order, device=device)
    zeros = torch.zeros(batch, logits_to_keep, device=device)
    logps = zeros.index_copy(0, index, torch.cat(pieces_lp))
    entropy = zeros.index_copy(0, index, torch.cat(pieces_ent)) if compute_entropy else None
    return logps, entropy
