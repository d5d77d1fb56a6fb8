"""The legacy Completions API, ``POST /v1/completions``, served: clients still call it by default (LlamaIndex's
``OpenAILike``, older LangChain ``OpenAI`` LLMs). The prompt becomes the one user message of a chat, so the
run is the chat endpoint's; the answer is OpenAI's ``text_completion`` object, plain or streamed (the chat
stream's text, re-framed). Parameters follow the chat endpoint's rules: honoured, or a 400 that names them.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Optional, Union

from openai.types import Completion, CompletionChoice
from pydantic import Field

from ..answer_format import AnswerFormat
from ..records import Run
from . import builders
from .errors import APIError, unsupported
from .gateway import Endpoint
from .requests import Accepted, Count, Number, SamplingParams, StreamOptions, Turn, _cap, _neutral, _stop, check_conversation
from .runs import Request, RunHandle
from .streams import ErrorHook, chat_stream


class CompletionRequest(SamplingParams):
    model: str
    prompt: Any  # one text (a string, or a list holding one); checked in ``interpret_completion``
    # honoured, besides the sampling parameters
    stream: Optional[bool] = False
    stream_options: Optional[StreamOptions] = None
    # honoured only at their neutral value
    n: Optional[Count] = Field(None, ge=1)
    best_of: Optional[Count] = Field(None, ge=1)
    echo: Optional[bool] = None
    logprobs: Optional[Count] = Field(None, ge=0)
    logit_bias: Optional[dict[str, Number]] = None
    suffix: Optional[str] = None


def _prompt(value: Any) -> str:
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        return value[0]
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        raise unsupported("prompt", f"one prompt per request ({len(value)} given): send each as its own request")
    raise unsupported("prompt", "send the prompt as text; token arrays cannot apply (the workers use different tokenizers)")


def interpret_completion(req: CompletionRequest) -> Accepted:
    _neutral("n", req.n, (None, 1), "only n = 1 is supported (one workflow, one answer)")
    _neutral("best_of", req.best_of, (None, 1), "only best_of = 1 is supported (one workflow, one answer)")
    _neutral("echo", req.echo, (None, False), "echo is not supported: the answer is the workflow's, not a continuation")
    _neutral("logprobs", req.logprobs, (None, 0), "log probabilities are not available: the answer comes from a workflow of models")
    _neutral("logit_bias", req.logit_bias or None, (None,), "token biases cannot apply: the workers use different tokenizers")
    _neutral("suffix", req.suffix, (None, ""), "suffix (fill-in-the-middle) is not supported")
    turns = check_conversation([Turn("user", _prompt(req.prompt), param="prompt")], "prompt")
    answer = AnswerFormat(stop=_stop(req.stop), temperature=req.temperature, top_p=req.top_p,
                          frequency_penalty=req.frequency_penalty, presence_penalty=req.presence_penalty)
    return Accepted(model=req.model, turns=turns, answer=answer, stream=bool(req.stream),
                    include_usage=bool(req.stream_options and req.stream_options.include_usage),
                    max_output_tokens=_cap(req.max_tokens), budget=req.conductor, seed=req.seed, user=req.user)


def text_completion(run: Run, request: Request, _accepted: Accepted) -> Completion:
    return Completion(
        id=f"cmpl-{run.id}", object="text_completion", created=int(run.created_at), model=request.model_id,
        system_fingerprint=request.preset.fingerprint, usage=builders.chat_usage(run),
        choices=[CompletionChoice(index=0, text=run.final_answer, finish_reason=builders.finish_reason(run), logprobs=None)],  # type: ignore[arg-type]
        conductor=builders.extension(builders.run_finished(run, request)),
    )


async def completion_stream(handle: RunHandle, accepted: Accepted, on_error: ErrorHook) -> AsyncIterator[Union[Completion, APIError]]:
    """The chat stream's text and finish as ``text_completion`` chunks (``model_construct``: a chunk's
    finish_reason is null until the last). Chunks with neither, the workflow's events, are left out: legacy
    clients read ``choices[0].text`` of every chunk."""
    async for item in chat_stream(handle, accepted, on_error):
        if isinstance(item, APIError):
            yield item
            continue
        fields: dict[str, Any] = dict(id=item.id.replace("chatcmpl-", "cmpl-", 1), object="text_completion", created=item.created,
                                      model=item.model, system_fingerprint=item.system_fingerprint)
        if not item.choices:  # the usage chunk
            yield Completion.model_construct(**fields, choices=[], usage=item.usage)
            continue
        choice = item.choices[0]
        if choice.delta.content or choice.finish_reason:
            conductor = (item.model_extra or {}).get("conductor") if choice.finish_reason else None
            extra = {"conductor": conductor} if conductor is not None else {}
            yield Completion.model_construct(**fields, **extra, choices=[CompletionChoice.model_construct(
                index=0, text=choice.delta.content or "", finish_reason=choice.finish_reason, logprobs=None)])


COMPLETIONS = Endpoint("completions", "/v1/completions", CompletionRequest, interpret_completion, text_completion, completion_stream, "prompt")
