"""Shared-prompt sampling and log-probs (decoding.py, train/rollout.py) against TRL's own full-sequence computation."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402
from trl.trainer.utils import add_fused_lm_head  # noqa: E402

from openconductor.decoding import sample_group  # noqa: E402
from openconductor.train.rollout import shared_prompt_logps  # noqa: E402

CONFIG = {
    "model_type": "llama", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256, "tie_word_embeddings": True,
}


def _model(temperature: float = 0.7):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**CONFIG), dtype=torch.float32)
    add_fused_lm_head(model, temperature=temperature, outputs=("log_probs", "entropy"))
    return model


def _batch():
    """Two groups (prompts of 5 and 3 tokens, left-padded) with right-padded completions, as TRL lays them out."""
    pad = 0
    prompts = [[5, 6, 7, 8, 9]] * 3 + [[11, 12, 13]] * 2
    completions = [[20, 21, 22, 23], [24, 25], [26, 27, 28], [30], [31, 32, 33, 34]]
    pw, cw = 5, 4
    ids, mask = [], []
    for p, c in zip(prompts, completions):
        ids.append([pad] * (pw - len(p)) + p + c + [pad] * (cw - len(c)))
        mask.append([0] * (pw - len(p)) + [1] * len(p) + [1] * len(c) + [0] * (cw - len(c)))
    return torch.tensor(ids), torch.tensor(mask), cw


def test_shared_prompt_logps_equal_the_full_forward_values_and_gradients():
    ids, mask, keep = _batch()
    model = _model()
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :-keep] = -100
    full = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
    ref_lp, ref_ent = full.log_probs[:, -keep:], full.entropy[:, -keep:]
    completion_mask = mask[:, -keep:].bool()
    (ref_lp * completion_mask).sum().backward()
    ref_grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()

    lp, ent = shared_prompt_logps(model, ids, mask, keep, temperature=0.7, compute_entropy=True)
    assert torch.allclose(lp[completion_mask], ref_lp[completion_mask], atol=1e-5)
    assert torch.allclose(ent[completion_mask], ref_ent[completion_mask], atol=1e-5)
    (lp * completion_mask).sum().backward()
    for name, grad in ref_grads.items():
        assert torch.allclose(dict(model.named_parameters())[name].grad, grad, atol=1e-5), name


def test_sample_group_cuts_at_eos_and_is_reproducible():
    model = _model()
    draw = lambda seed: sample_group(model, [5, 6, 7], 6, max_new_tokens=12, eos_ids=[1, 2, 3], temperature=1.0,  # noqa: E731
                                     generator=torch.Generator().manual_seed(seed))
    rows = draw(4)
    assert len(rows) == 6 and all(1 <= len(r) <= 12 for r in rows)
    for r in rows:
        assert all(t not in (1, 2, 3) for t in r[:-1])  # only the last token may be an EOS
    assert draw(4) == rows and len({tuple(r) for r in rows}) > 1
    greedy = sample_group(model, [5, 6, 7], 3, max_new_tokens=5, eos_ids=[1], temperature=0.0)
    assert greedy[0] == greedy[1] == greedy[2]


def test_generate_batch_equals_each_prompt_alone(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from train_helpers import tiny_tokenizer
    from transformers import AutoTokenizer

    from openconductor.decoding import generate_batch

    tok = AutoTokenizer.from_pretrained(tiny_tokenizer(tmp_path / "tok"))
    torch.manual_seed(3)  # a wide init so that a random model's greedy output depends on its prompt
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**{**CONFIG, "vocab_size": len(tok), "initializer_range": 1.0}), dtype=torch.float32)
    chats = [
        [{"role": "system", "content": "the task model id"}, {"role": "user", "content": "one agent"}],
        [{"role": "system", "content": "the task model id"}, {"role": "user", "content": "check the answer one agent the task"}],
        [{"role": "system", "content": "the task model id"}, {"role": "user", "content": "answer"}],
    ]
    together = generate_batch(model, tok, chats, max_new_tokens=8)
    alone = [generate_batch(model, tok, [c], max_new_tokens=8)[0] for c in chats]
    assert together == alone and len(set(together)) > 1


def _char_tokenizer(path):
    """A character-level tokenizer (one token per printable ASCII character): any text is reachable."""
    from tokenizers import AddedToken, Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    chars = ["\n"] + [chr(c) for c in range(32, 127)]
    specials = ["<unk>", "<|im_start|>", "<|im_end|>", "<pad>"]
    vocab = {t: i for i, t in enumerate(specials + chars)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens([AddedToken(s, normalized=False) for s in specials])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<|im_end|>", pad_token="<pad>", bos_token="<|im_start|>")
    fast.chat_template = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    fast.save_pretrained(path)
    return fast


def test_constrained_sampling_always_yields_a_valid_workflow(tmp_path):
    from openconductor.decoding import TokenConstraint, generate_batch
    from openconductor.workflow import WorkflowFormat, parse_and_validate

    tok = _char_tokenizer(tmp_path / "chars")
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**{**CONFIG, "vocab_size": len(tok)}), dtype=torch.float32)
    fmt = WorkflowFormat(4, 3, reason_chars=12, subtask_chars=10, fine_grained=True)
    ids = tok("plan it\n", add_special_tokens=False)["input_ids"]
    rows = sample_group(model, ids, 12, max_new_tokens=400, eos_ids=[tok.eos_token_id], temperature=1.0,
                        generator=torch.Generator().manual_seed(1), constraint=TokenConstraint(tok, [tok.eos_token_id]), fmt=fmt)
    texts = [tok.decode(r, skip_special_tokens=True) for r in rows]
    plans = [parse_and_validate(t, 4, max_steps=3) for t in texts]  # raises if any is malformed
    assert all(r[-1] == tok.eos_token_id for r in rows)
    assert len({p.render() for p in plans}) > 6 and {len(p) for p in plans} >= {1, 2}
    # A random model without the constraint writes no workflow at all.
    free = sample_group(model, ids, 4, max_new_tokens=80, eos_ids=[tok.eos_token_id], generator=torch.Generator().manual_seed(1))
    assert all("model_id" not in tok.decode(r) for r in free)
    # Greedy, constrained, for evaluation: also valid.
    chat = [[{"role": "user", "content": "plan it"}]] * 2
    for text in generate_batch(model, tok, chat, max_new_tokens=400, formats=[fmt, WorkflowFormat(2, 2, reason_chars=5, subtask_chars=4)]):
        parse_and_validate(text, 4, max_steps=3)


async def test_transformers_engine_plans_under_the_runtime_grammar(tmp_path):
    """`--conductor-engine transformers` applies the runtime's workflow grammar through the same automaton
    as the rollouts: a random model's plans all parse, greedy or sampled; GBNF it cannot walk is refused."""
    from openconductor.providers.base import ProviderError
    from openconductor.providers.transformers_local import TransformersProvider
    from openconductor.workflow import WorkflowFormat, parse_and_validate

    tok = _char_tokenizer(tmp_path / "chars")
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**{**CONFIG, "vocab_size": len(tok)}), dtype=torch.float32)
    provider = TransformersProvider.from_model(model, tok)
    assert provider.supports_grammar
    grammar = WorkflowFormat.bounded(3, 2, 160).grammar()
    messages = [{"role": "user", "content": "plan it"}]
    texts = set()
    for temperature, seed in [(0.0, None), (1.0, 1), (1.0, 2), (1.0, 3)]:
        completion = await provider.complete(messages, max_tokens=160, temperature=temperature, grammar=grammar, seed=seed)
        parse_and_validate(completion.text, 3, max_steps=2)  # raises if malformed
        assert completion.finish_reason == "stop" and 0 < completion.usage.output_tokens <= 160
        texts.add(completion.text)
    assert len(texts) >= 3  # sampled plans differ: the constraint restricts, it does not pick
    free = await provider.complete(messages, max_tokens=40, temperature=1.0, seed=1)
    assert "model_id" not in free.text  # without the grammar this random model writes no plan
    with pytest.raises(ProviderError, match="workflow grammar"):
        await provider.complete(messages, max_tokens=20, temperature=0.0, grammar='root ::= "yes"')


def test_format_automaton_accepts_exactly_what_render_writes():
    from openconductor.train.warmup import format_targets
    from openconductor.workflow import WorkflowFormat, parse_and_validate

    fmt = WorkflowFormat(6, 5, fine_grained=True)
    for text in format_targets(200, 6, 5, seed=3, fine_grained=True):
        assert fmt.complete(fmt.advance(fmt.start(), text)), text
        parse_and_validate(text, 6, max_steps=5)
    for bad in ("Reasoning: x\nmodel_id = [1, 2]\nsubtasks = [\"abcd\"]", "Reasoning: x\nmodel_id = [6]",
                'Reasoning: x\nmodel_id = [0]\nsubtasks = ["abcd"]\naccess_list = [["all"]]', "model_id = [0]"):
        assert fmt.advance(fmt.start(), bad) is None, bad


def test_constrained_draws_follow_the_probabilities_restricted_to_valid_tokens():
    """Each live row's token is a draw from its probabilities renormalised over the tokens its format
    admits (the batched Gumbel-top-k candidates), and a complete or finished row ends with EOS."""
    from types import SimpleNamespace

    from openconductor.decoding import _choose

    eos, valid = 4, {1, 2, 3}
    constraint = SimpleNamespace(
        eos_ids={eos},
        first_valid=lambda fmt, state, order: next(((t, state) for t in order if t in valid), None),
        fallback=lambda *a: pytest.fail("4 candidates always include a valid token"),
    )
    fmt = SimpleNamespace(complete=lambda state: state == "done")
    probs = torch.tensor([0.4, 0.3, 0.2, 0.05, 0.05])
    rows = 6000
    logits = probs.log().expand(rows + 2, -1)
    states = ["s"] * rows + ["done", None]
    tokens, new_states = _choose(logits, 1.0, 1.0, torch.Generator().manual_seed(0), constraint, [fmt] * (rows + 2), states)
    assert tokens[-2:].tolist() == [eos, eos] and new_states[-2:] == [None, None]
    counts = torch.bincount(tokens[:rows], minlength=5).float() / rows
    expected = torch.tensor([0.0, 0.3, 0.2, 0.05, 0.0]) / 0.55
    assert torch.allclose(counts, expected, atol=0.025), counts
    greedy, _ = _choose(logits[:3], 0.0, 1.0, None, constraint, [fmt] * 3, ["s", "s", "done"])
    assert greedy.tolist() == [1, 1, eos]  # the most probable valid token


def test_a_grown_cache_is_freed_without_waiting_for_the_cyclic_gc():
    # The grown cache's update hook must not hold its layer strongly: that cycle kept each batch's KV cache
    # (about 1.3 GB by its shape for 32 SmolLM2 prompts) alive until a full collection, and 2,000 prompts held 22 GB.
    import gc
    import weakref

    from openconductor.decoding import _grow_in_place

    model = _model()
    cache = model(input_ids=torch.tensor([[1, 2, 3]]), use_cache=True).past_key_values
    _grow_in_place(cache, 8)
    out = model(input_ids=torch.tensor([[4]]), past_key_values=cache, use_cache=True)  # the hook appends in place
    assert out.past_key_values.layers[0].keys.shape[-2] == 4
    layer = weakref.ref(cache.layers[0])
    gc.disable()
    try:
        del cache, out
        assert layer() is None
    finally:
        gc.enable()
