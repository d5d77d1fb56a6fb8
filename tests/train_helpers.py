"""Shared by the training tests: a tiny tokenizer built in-process (no download) and a tiny config.

The tokenizer is word-level with a few whole workflows added as single tokens, so that even a
random 2-layer model samples parseable workflows (with different workers) from its first step:
GRPO then sees rewards that differ within a group and really updates the model. Everything after
sampling — decoding, parsing, executing on the simulated pool, grading, the GRPO update — is real.
"""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

WORKFLOW_TOKENS = [
    *(f"model_id = [{i}]\nsubtasks = ['Solve the task and state the final answer.']\naccess_list = [[]]\n" for i in range(6)),
    "model_id = [2, 4]\nsubtasks = ['Solve the task.', 'Check the previous answer and give the final answer.']\naccess_list = [[], ['all']]\n",
    "model_id = []\nsubtasks = []\naccess_list = []\n",
    # Whole plans in the runtime grammar's form (one token each): what a grammar-constrained tiny model can write.
    *(f'Reasoning: one agent answers.\nmodel_id = [{i}]\nsubtasks = ["Solve the task."]\naccess_list = [[]]' for i in range(3)),
]
WORDS = ["system", "user", "assistant", "Reasoning:", "the", "task", "answer", "one", "agent", "check", "model", "id"]


def tiny_tokenizer(path: Path, words: list[str] = WORDS) -> Path:
    """``words``: the word-level vocabulary (a constrained sampler needs every word it may start to lead somewhere:
    "Reasoning:" alone is a prefix of the format that no token of this vocabulary continues)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<unk>", "<|im_start|>", "<|im_end|>", "<pad>"]
    vocab = {t: i for i, t in enumerate(specials + words)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins word tokens with spaces
    tok.add_special_tokens([AddedToken(s, normalized=False) for s in specials])
    tok.add_tokens([AddedToken(w, normalized=False, single_word=False) for w in WORKFLOW_TOKENS])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<|im_end|>", pad_token="<pad>", bos_token="<|im_start|>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(path)
    return path


TINY_LLAMA = {
    "model_type": "llama", "vocab_size": 32, "hidden_size": 16, "intermediate_size": 32,
    "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
    "max_position_embeddings": 2048, "tie_word_embeddings": True,
}
