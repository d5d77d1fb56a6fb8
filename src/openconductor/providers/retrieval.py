"""The ``retrieval`` worker: BM25 (the ``bm25s`` library) over a local corpus; returns the top passages.

The corpus (``options.corpus``, a path relative to the working directory) is either

* a directory: every ``.txt`` / ``.md`` / ``.markdown`` / ``.rst`` file under it (recursively), or
* a ``.jsonl`` file: one JSON object per line with the text in ``text_field`` (default ``text``) and an
  optional ``title`` / ``id`` naming its source.

Documents are split into passages at blank lines, and consecutive paragraphs are merged up to
``passage_words`` words (a longer paragraph is cut into pieces of that size). The query is the step's
subtask followed by the overall task, cut to ``max_query_words`` words. The output lists the
``top_k`` passages with a score above zero, best first, each headed ``[n] source (score s)``; when no
passage shares a word with the query it says so. The index is built once per worker, on first use,
in a thread. A missing, empty, unreadable or too large corpus is a ``CorpusError`` (a PoolConfigError):
at pool load for a missing path, else on first use (the step fails with the message).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from .. import worker_message
from ..pool import PoolConfigError, WorkerSpec
from ..records import Completion
from .base import Provider, ProviderError, TokenCallback

TEXT_SUFFIXES = {".txt", ".md", ".markdown", ".rst"}


class CorpusError(PoolConfigError):
    """A corpus that cannot be searched: missing, empty, unreadable or over its size limit."""


class RetrievalOptions(BaseModel):
    """``options`` of a ``retrieval`` worker in a pool file."""

    model_config = ConfigDict(extra="forbid")

    corpus: str = Field(description="a directory of text/markdown files, or a .jsonl file")
    top_k: int = Field(3, ge=1, le=50)
    passage_words: int = Field(120, ge=10, le=5000)
    text_field: str = "text"
    max_corpus_mb: float = Field(200.0, gt=0, description="refuse corpora larger than this (bytes on disk)")
    max_query_words: int = Field(256, ge=1, le=10_000)
    max_output_chars: int = Field(4000, ge=200, le=200_000)


@dataclass(frozen=True)
class Passage:
    source: str
    text: str


def _passages(text: str, source: str, words: int) -> list[Passage]:
    """Paragraphs merged up to ``words`` words; longer paragraphs cut into ``words``-word pieces."""
    out: list[Passage] = []
    current: list[str] = []
    for paragraph in text.split("\n\n"):
        tokens = paragraph.split()
        while len(tokens) > words:  # a paragraph longer than a passage
            if current:
                out.append(Passage(source, " ".join(current)))
                current = []
            out.append(Passage(source, " ".join(tokens[:words])))
            tokens = tokens[words:]
        if current and len(current) + len(tokens) > words:
            out.append(Passage(source, " ".join(current)))
            current = []
        current.extend(tokens)
    if current:
        out.append(Passage(source, " ".join(current)))
    return out


def _corpus_files(root: Path) -> list[Path]:
    if root.is_dir():
        return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)
    return [root]


def load_corpus(options: RetrievalOptions) -> list[Passage]:
    """Every passage of the corpus; raises CorpusError with a message a user can act on."""
    root = Path(options.corpus).expanduser()
    if not root.exists():
        raise CorpusError(f"retrieval corpus not found: {root} (a directory of .txt/.md files or a .jsonl file)")
    if root.is_file() and root.suffix.lower() not in TEXT_SUFFIXES | {".jsonl"}:
        raise CorpusError(f"retrieval corpus {root}: expected a directory, a .jsonl file or a text file, got {root.suffix!r}")
    files = _corpus_files(root)
    size = sum(f.stat().st_size for f in files)
    if size > options.max_corpus_mb * 1e6:
        raise CorpusError(
            f"retrieval corpus {root} is {size / 1e6:.1f} MB, over max_corpus_mb = {options.max_corpus_mb:g}; "
            "raise the limit in the worker's options or use a smaller corpus"
        )
    passages: list[Passage] = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CorpusError(f"retrieval corpus file {path} cannot be read as UTF-8 text: {exc}") from exc
        if path.suffix.lower() != ".jsonl":
            name = str(path.relative_to(root)) if root.is_dir() else path.name
            passages += _passages(text, name, options.passage_words)
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CorpusError(f"{path}:{n}: not a JSON object: {exc}") from exc
            if not isinstance(row, dict) or not isinstance(row.get(options.text_field), str):
                raise CorpusError(f"{path}:{n}: expected an object with a string field {options.text_field!r}")
            source = str(row.get("title") or row.get("id") or f"{path.name}:{n}")
            passages += _passages(row[options.text_field], source, options.passage_words)
    if not passages:
        raise CorpusError(f"retrieval corpus {root} has no text (no .txt/.md files with words, or an empty .jsonl)")
    return passages


class Index:
    """BM25 over the passages (bm25s, English stopwords, no stemming)."""

    def __init__(self, passages: list[Passage]):
        import bm25s

        self.passages = passages
        self._bm25s = bm25s
        self.retriever = bm25s.BM25()
        tokens = bm25s.tokenize([p.text for p in passages], stopwords="en", return_ids=False, show_progress=False)
        self.retriever.index(tokens, show_progress=False)

    def search(self, query: str, k: int) -> list[tuple[Passage, float]]:
        tokens = self._bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)
        if not tokens[0]:
            return []
        ids, scores = self.retriever.retrieve(tokens, k=min(k, len(self.passages)), show_progress=False, n_threads=1)
        return [(self.passages[int(i)], float(s)) for i, s in zip(ids[0], scores[0]) if s > 0]


def format_hits(hits: list[tuple[Passage, float]], limit: int) -> str:
    if not hits:
        return "[retrieval: no passage of the corpus matches the query]"
    text = "\n\n".join(f"[{n}] {p.source} (score {s:.2f})\n{p.text}" for n, (p, s) in enumerate(hits, 1))
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit} more characters dropped]"


class RetrievalProvider(Provider):
    """A pool member that searches a local corpus instead of generating text (see the module docstring)."""

    Options = RetrievalOptions
    requires = ("bm25s",)
    extra = "tools"

    def __init__(self, spec: WorkerSpec):
        super().__init__(spec)
        if not Path(self.options.corpus).expanduser().exists():
            raise CorpusError(f"worker {spec.name!r}: retrieval corpus not found: {self.options.corpus}")
        try:
            import bm25s  # noqa: F401
        except ImportError:
            raise PoolConfigError(f"worker {spec.name!r} needs bm25s: pip install 'openconductor[tools]'") from None
        self._index: Optional[Index] = None
        self._lock = threading.Lock()

    def index(self) -> Index:
        with self._lock:  # built once, by the first caller
            if self._index is None:
                self._index = Index(load_corpus(self.options))
            return self._index

    def query(self, messages: list[dict]) -> str:
        context = worker_message.parse(messages)
        words = f"{context.subtask}\n{context.question}".split()
        return " ".join(words[: self.options.max_query_words])

    def replay_key(self, messages: list[dict]) -> dict:
        """The replay store's key: the query decides the output."""
        return {"query": self.query(messages)}

    async def complete(self, messages, *, max_tokens, temperature, grammar=None, on_token: Optional[TokenCallback] = None, seed=None,
                       answer=None) -> Completion:  # a tool has no answer format: its output is what it ran or found
        started = time.perf_counter()
        try:
            index = await asyncio.to_thread(self.index)
        except CorpusError as exc:
            raise ProviderError(f"worker {self.spec.name!r}: {exc}") from None
        query = self.query(messages)
        hits = await asyncio.to_thread(index.search, query, self.options.top_k)
        text = format_hits(hits, self.options.max_output_chars)
        if on_token is not None:
            on_token(text)
        detail = {"passages": len(index.passages), "hits": len(hits), "query_words": len(query.split()),
                  "scores": [round(s, 3) for _, s in hits], "sources": [p.source for p, _ in hits]}  # fmt: skip
        return Completion(text=text, latency_s=time.perf_counter() - started, model="bm25", detail=detail)
