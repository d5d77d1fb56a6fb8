"""Sampling from a local transformers model, optionally constrained to the conductor's output language.

* ``sample_group``: ``n`` completions of one prompt: one prefill, its key/value cache repeated for the
  group, then batched token-by-token decoding (the training rollouts' sampler, ``train/rollout.py``).
* ``generate_batch``: one completion per chat prompt (greedy at temperature 0); the prompts' longest
  common token prefix runs once (held-out evaluation, recursion).

Sampling can be *constrained* to a ``workflow.WorkflowFormat`` (the same language as the runtime's GBNF
grammar): each sampled token is checked against the format's automaton and a token that would leave it
is redrawn from the remaining probability mass, so every plan parses. The transformers provider plans
with it (``providers/transformers_local.py``), and so do the training rollouts.
"""

from __future__ import annotations

import weakref
from typing import Optional

import torch

from .workflow import WorkflowFormat


def _grow_in_place(cache, extra: int) -> None:
    """Give each layer of a ``DynamicCache`` room for ``extra`` more tokens, written in place: decoding
    then appends without re-copying the whole cache every token (measured 25 % faster per step here).
    Sampling only (no autograd through the cache)."""
    for layer in cache.layers:
        keys, values = layer.keys, layer.values
        b, h, n, d = keys.shape
        kbuf, vbuf = keys.new_empty(b, h, n + extra, d), values.new_empty(b, h, n + extra, values.shape[-1])
        kbuf[:, :, :n], vbuf[:, :, :n] = keys, values
        layer.keys, layer.values = kbuf[:, :, :n], vbuf[:, :, :n]
        filled = [n]

        # A weak reference: a closure holding the layer that holds the closure is a cycle, and each chunk's
        # grown cache (about 1.3 GB by its shape for 32 SmolLM2 prompts) then waited for the cyclic GC: 2,000 prompts held 22 GB.
        def update(key_states, value_states, *args, _layer=weakref.ref(layer), _k=kbuf, _v=vbuf, _filled=filled, **kwargs):
            start, end = _filled[0], _filled[0] + key_states.shape[-2]
            _k[:, :, start:end], _v[:, :, start:end] = key_states, value_states
            _filled[0] = end
            owner = _layer()
            owner.keys, owner.values = _k[:, :, :end], _v[:, :, :end]
            return owner.keys, owner.values

        layer.update = update


class TokenConstraint:
    """Token-level view of a ``WorkflowFormat`` for one tokenizer (token texts decoded once)."""

    _texts: dict[int, list[str]] = {}

    def __init__(self, tokenizer, eos_ids: list[int]):
        key = id(tokenizer)
        if key not in self._texts:
            self._texts[key] = [tokenizer.decode([i]) for i in range(len(tokenizer))]
        self.texts, self.eos_ids = self._texts[key], set(eos_ids)

    def first_valid(self, fmt: WorkflowFormat, state, order: list[int]) -> Optional[tuple[int, object]]:
        """The first token of ``order`` that keeps ``state`` inside the format (and its next state), or None.
        With ``order`` drawn from the probabilities without replacement, that token is a draw from the
        probabilities restricted to the format's valid tokens."""
        for token in order:
            nxt = self._next(fmt, state, token)
            if nxt is not None:
                return token, nxt
        return None

    def fallback(self, probs: torch.Tensor, fmt: WorkflowFormat, state, generator, greedy: bool) -> tuple[int, object]:
        """When every drawn token left the format (e.g. a subtask at its length bound that the model wants to
        go on): a token among every valid one of the vocabulary. ``probs``: one row, on the CPU."""
        # The model's vocabulary and the tokenizer's may differ in size (padded embeddings, added tokens).
        valid = [(t, n) for t in range(min(len(self.texts), probs.numel())) if (n := self._next(fmt, state, t)) is not None]
        if not valid:
            raise RuntimeError("constrained sampling found no token that continues the workflow format")
        weights = torch.tensor([float(probs[t]) for t, _ in valid], device=generator.device if generator is not None else None) + 1e-12
        if greedy:
            return valid[int(weights.argmax())]
        return valid[int(torch.multinomial(weights, 1, generator=generator))]

    def _next(self, fmt: WorkflowFormat, state, token: int):
        if token in self.eos_ids or token >= len(self.texts):
            return None  # only a complete plan ends (``_choose`` gives it EOS); an id past the tokenizer's has no text
        text = self.texts[token]
        return fmt.advance(state, text) if text else None


def _choose(logits, temperature, top_p, generator, constraint, formats, states) -> tuple[torch.Tensor, list]:
    """One token per row: plain sampling, or constrained to each row's format."""
    if constraint is None:
        return _sample(logits, temperature, top_p, generator), states
    greedy = temperature <= 0
    probs = torch.softmax(logits / temperature, dim=-1) if not greedy else torch.softmax(logits, dim=-1)
    eos = next(iter(constraint.eos_ids))
    tokens, new_states = [eos] * len(states), [None] * len(states)
    live = [row for row, state in enumerate(states) if state is not None and not formats[row].complete(state)]
    # A finished row (state None) pads with EOS, and a complete plan ends with it.
    if not live:
        return torch.tensor(tokens, device=logits.device), new_states
    # Every live row's candidate tokens in one call and one copy to the CPU: the format check walks rows
    # in Python, so a per-row draw (and, on a GPU, a per-row copy) made sampling 256 rows cost ~45 s a step.
    sub = probs[live]
    if greedy:
        order = sub.topk(min(256, sub.size(-1)), dim=-1).indices.tolist()
    else:
        # 32 draws without replacement per row by the Gumbel-top-k trick (exact, and one topk instead of
        # torch.multinomial's slow no-replacement path: 10 ms a token for 16 rows on this CPU).
        k = min(32, int((sub > 0).sum(-1).min()))
        gumbel = -torch.log(-torch.log(torch.rand(sub.shape, generator=generator, device=sub.device).clamp_min(1e-20)))
        order = (torch.log(sub) + gumbel).topk(k, dim=-1).indices.tolist()
    for i, row in enumerate(live):
        picked = constraint.first_valid(formats[row], states[row], order[i])
        if picked is None:
            picked = constraint.fallback(probs[row].float().cpu(), formats[row], states[row], generator, greedy)
        tokens[row], new_states[row] = picked
    return torch.tensor(tokens, device=logits.device), [None if t in constraint.eos_ids else st for t, st in zip(tokens, new_states)]


@torch.no_grad()
def sample_group(
    model,
    prompt_ids: list[int],
    n: int,
    *,
    max_new_tokens: int,
    eos_ids: list[int],
    temperature: float = 1.0,
    top_p: float = 1.0,
    generator: Optional[torch.Generator] = None,
    constraint: Optional[TokenConstraint] = None,
    fmt: Optional[WorkflowFormat] = None,
) -> list[list[int]]:
    """``n`` completions of one prompt (each cut after its first EOS, which it keeps); with ``constraint``
    and ``fmt``, every completion is a string of that format."""
    device = model.device
    if generator is not None and generator.device.type != device.type:
        # Draws happen where the logits are: a seeded generator there, seeded from the caller's.
        generator = torch.Generator(device=device).manual_seed(int(torch.randint(0, 2**62, (1,), generator=generator)))
    out = model(input_ids=torch.tensor([prompt_ids], device=device), use_cache=True, logits_to_keep=1)
    cache = out.past_key_values
    cache.batch_repeat_interleave(n)
    _grow_in_place(cache, max_new_tokens)
    logits = out.logits[:, -1, :].float().expand(n, -1)
    eos = torch.tensor(eos_ids, device=device)
    done = torch.zeros(n, dtype=torch.bool, device=device)
    formats = [fmt] * n
    states = [fmt.start() if fmt is not None else None] * n
    tokens: list[torch.Tensor] = []
    for _ in range(max_new_tokens):
        nxt, states = _choose(logits, temperature, top_p, generator, constraint if fmt is not None else None, formats, states)
        nxt = torch.where(done, nxt.new_full(nxt.shape, eos_ids[0]), nxt)
        tokens.append(nxt)
        done |= torch.isin(nxt, eos)
        if bool(done.all()):
            break
        logits = model(input_ids=nxt[:, None], past_key_values=cache, use_cache=True, logits_to_keep=1).logits[:, -1, :].float()
    rows = torch.stack(tokens, dim=1).tolist() if tokens else [[] for _ in range(n)]
    out_rows = []
    for row in rows:
        cut = next((i + 1 for i, t in enumerate(row) if t in eos_ids), len(row))
        out_rows.append(row[:cut])
    return out_rows


def _sample(logits: torch.Tensor, temperature: float, top_p: float, generator: Optional[torch.Generator]) -> torch.Tensor:
    if temperature <= 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        keep = sorted_p.cumsum(dim=-1) - sorted_p < top_p
        sorted_p = sorted_p * keep
        choice = torch.multinomial(sorted_p / sorted_p.sum(-1, keepdim=True), 1, generator=generator)
        return order.gather(-1, choice).squeeze(-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


@torch.no_grad()
def generate_batch(
    model,
    tokenizer,
    conversations: list[list[dict]],
    *,
    max_new_tokens: int,
    temperature: float = 0.0,
    top_p: float = 1.0,
    seed: Optional[int] = None,
    batch_size: int = 16,
    formats: Optional[list[WorkflowFormat]] = None,
) -> list[str]:
    """One completion per chat prompt (greedy at temperature 0), for held-out evaluation and recursion;
    with ``formats`` (one per prompt) each completion is constrained to its format.

    The prompts of a batch share their longest common token prefix (the conductor's instructions and
    pool): it is run once and its cache repeated; the rest of each prompt is left-padded with explicit
    positions, so every row computes exactly what it would alone.
    """
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    eos = tokenizer.eos_token_id
    eos_ids = [eos] if isinstance(eos, int) else list(eos or [])
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (eos_ids[0] if eos_ids else 0)
    prompts = [
        tokenizer(tokenizer.apply_chat_template(c, add_generation_prompt=True, tokenize=False), add_special_tokens=False)["input_ids"]
        for c in conversations
    ]
    constraint = TokenConstraint(tokenizer, eos_ids) if formats else None
    texts: list[str] = []
    for start in range(0, len(prompts), batch_size):
        chunk_formats = formats[start : start + batch_size] if formats else None
        texts += _generate_chunk(model, tokenizer, prompts[start : start + batch_size], max_new_tokens, temperature, top_p, generator,
                                 eos_ids, pad, constraint, chunk_formats)
    return texts


def _common_prefix(rows: list[list[int]]) -> int:
    shortest = min(len(r) for r in rows)
    n = 0
    while n < shortest - 1 and all(r[n] == rows[0][n] for r in rows):
        n += 1
    return n  # every row keeps at least one token of its own


def _generate_chunk(model, tokenizer, rows, max_new_tokens, temperature, top_p, generator, eos_ids, pad, constraint=None, formats=None) -> list[str]:
    device = model.device
    batch, shared = len(rows), _common_prefix(rows)
    cache = None
    if shared:
        cache = model(input_ids=torch.tensor([rows[0][:shared]], device=device), use_cache=True, logits_to_keep=1).past_key_values
        cache.batch_repeat_interleave(batch)
    tails = [r[shared:] for r in rows]
    width = max(len(t) for t in tails)
    tail_ids = torch.tensor([[pad] * (width - len(t)) + t for t in tails], device=device)
    tail_mask = torch.tensor([[0] * (width - len(t)) + [1] * len(t) for t in tails], device=device)
    mask = torch.cat([torch.ones(batch, shared, dtype=torch.long, device=device), tail_mask], dim=1)
    positions = (shared + tail_mask.cumsum(dim=1) - 1).clamp(min=shared)
    out = model(input_ids=tail_ids, attention_mask=mask, position_ids=positions, past_key_values=cache, use_cache=True, logits_to_keep=1)
    cache, logits = out.past_key_values, out.logits[:, -1, :].float()
    _grow_in_place(cache, max_new_tokens)
    next_pos = torch.tensor([len(r) for r in rows], device=device)
    eos = torch.tensor(eos_ids, device=device)
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    states = [f.start() for f in formats] if formats else [None] * batch
    tokens = []
    for _ in range(max_new_tokens):
        nxt, states = _choose(logits, temperature, top_p, generator, constraint, formats, states)
        nxt = torch.where(done, torch.full_like(nxt, pad), nxt)
        tokens.append(nxt)
        done |= torch.isin(nxt, eos)
        if bool(done.all()):
            break
        mask = torch.cat([mask, torch.ones(batch, 1, dtype=mask.dtype, device=device)], dim=1)
        out = model(input_ids=nxt[:, None], attention_mask=mask, position_ids=next_pos[:, None], past_key_values=cache, use_cache=True, logits_to_keep=1)
        logits, next_pos = out.logits[:, -1, :].float(), next_pos + 1
    generated = torch.stack(tokens, dim=1).tolist() if tokens else [[] for _ in rows]
    texts = []
    for row in generated:
        cut = next((i for i, t in enumerate(row) if t in eos_ids), len(row))
        texts.append(tokenizer.decode(row[:cut], skip_special_tokens=True))
    return texts
