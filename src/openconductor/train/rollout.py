"""Shared-prompt rollouts and log-probs: what makes GRPO on a CPU affordable.

GRPO samples ``num_generations`` completions of the *same* prompt, and the conductor's prompt (pool,
instructions, examples, question: ~400-600 tokens) is several times longer than its plan (~60-120
tokens). TRL's stock path runs the whole prompt once per completion, twice (to sample, then to score).
Here each distinct prompt is run once: its key/value cache is repeated for its group, and only the
completions are computed per row.

* ``sample_group`` / ``SharedPromptRollout``: sampling (TRL's ``rollout_func`` hook): one prefill per
  distinct prompt, then batched token-by-token decoding of the group on the repeated cache.
* ``shared_prompt_logps``: the per-token log-probs (and entropies) the GRPO loss needs, with gradients
  flowing into the prompt's cache exactly as in the full forward; used by ``ConductorGRPOTrainer``.

Both are exact: ``tests/test_train_rollout.py`` checks the log-probs against TRL's own computation.

Sampling can be *constrained* to the conductor's output language (``workflow.WorkflowFormat``, the same
language as the runtime's GBNF grammar): each sampled token is checked against the format's automaton and
a token that would leave it is redrawn from the remaining probability mass, so every plan parses. The
loss still scores the sampled tokens under the unconstrained model, as GRPO with a grammar-constrained
sampler (e.g. vLLM's guided decoding) does.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from ..workflow import WorkflowFormat


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

        def update(key_states, value_states, *args, _layer=layer, _k=kbuf, _v=vbuf, _filled=filled, **kwargs):
            start, end = _filled[0], _filled[0] + key_states.shape[-2]
            _k[:, :, start:end], _v[:, :, start:end] = key_states, value_states
            _filled[0] = end
            _layer.keys, _layer.values = _k[:, :, :end], _v[:, :, :end]
            return _layer.keys, _layer.values

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
