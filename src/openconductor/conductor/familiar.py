"""Whether a question is like those a trained conductor learned from, and what runs when it is not.

A conductor copied from per-kind plans plans a question of a kind it never saw by the training kind it looks
like: on the offline pool it sent complex arithmetic to "try every integer" and lost to the fixed
code-then-run workflow on unseen kinds (docs/fit.md, "Unfamiliar questions"). A checkpoint written by
``conductor fit`` therefore records what it trained on (``familiar.json``): the training questions (bare, without
their answer-format instruction), the instructions its tasks appended, a similarity threshold and the fit's best
fixed workflow. With ``[conductor] unfamiliar = "best-fixed"`` a question whose nearest training question is less
similar than the threshold runs that workflow instead of a plan; the trace says so.

Similarity is the cosine of character n-gram TF-IDF vectors (2-4 grams inside words, sublinear counts, smoothed
idf, as scikit-learn's ``char_wb``; written here because the runtime does not depend on scikit-learn and the
reference set is a few hundred short texts). The threshold is chosen on the training questions alone, leaving one
group (kind) out at a time: it best separates each question's similarity to its nearest other training question (a
kind seen) from its similarity to the nearest question of another group (a kind never seen), by balanced accuracy.
The idf weights are computed once over all training questions, the left-out group's included: a simplification that
keeps the choice one pass over the pairs.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Optional, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..workflow import Step, Workflow, WorkflowError, parse_and_validate

if TYPE_CHECKING:
    from ..spec import PoolSpec

FAMILIAR_FILE = "familiar.json"
NGRAMS = (2, 4)
MIN_GROUPS = 2  # leaving a group out needs another to compare with
# Training questions are short (the shipped conductor's: 16-1,166 characters); comparing more of a long question
# changes little and costs time linear in its length.
MAX_CHARS = 4000
MAX_FILE_BYTES = 64 * 2**20  # the shipped file is 0.1 MB; a file this large was not written by a fit
FIX = 'refit, or set [conductor] unfamiliar = "plan"'


class FamiliarityError(ValueError):
    """A ``familiar.json`` that cannot be used: missing, malformed, or a fallback the pool cannot run."""


def grams(text: str) -> Counter[str]:
    """Character n-grams inside each lower-cased word, the word padded with one space on each side (a word shorter
    than n counts once, as scikit-learn's ``char_wb`` does)."""
    out: Counter[str] = Counter()
    lo, hi = NGRAMS
    for word in text.lower().split():
        padded = f" {word} "
        for n in range(lo, hi + 1):
            out.update(padded[i:i + n] for i in range(max(len(padded) - n + 1, 1)))
            if len(padded) <= n:
                break
    return out


class Index:
    """TF-IDF vectors of the reference questions, L2-normalised, for nearest-neighbour cosine similarity."""

    def __init__(self, texts: Sequence[str]):
        counts = [grams(t) for t in texts]
        df: Counter[str] = Counter(g for c in counts for g in c)
        self.idf = {g: math.log((1 + len(counts)) / (1 + d)) + 1 for g, d in df.items()}
        self.vectors = [self._vector(c) for c in counts]
        # gram -> (reference, weight), so a question is compared through the grams it has (a few dozen references
        # each), not every reference through all of its grams; each sum adds the same products in the same order
        self.postings: dict[str, list[tuple[int, float]]] = {}
        for i, vector in enumerate(self.vectors):
            for g, w in vector.items():
                self.postings.setdefault(g, []).append((i, w))

    def _vector(self, counts: Counter[str]) -> dict[str, float]:
        weights = {g: (1 + math.log(k)) * self.idf[g] for g, k in counts.items() if g in self.idf}  # unknown grams: no weight
        norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
        return {g: w / norm for g, w in weights.items()}

    def similarities(self, text: str) -> list[float]:
        sums = [0.0] * len(self.vectors)
        for g, w in self._vector(grams(text)).items():
            for i, ref in self.postings.get(g, ()):
                sums[i] += w * ref
        return [min(1.0, total) for total in sums]  # at most 1: a float sum of unit vectors' products can round just above it


def threshold(questions: Sequence[str], groups: Sequence[str]) -> float:
    """The similarity that best separates "a kind seen" from "a kind left out" on the training questions."""
    if len(set(groups)) < MIN_GROUPS:
        raise FamiliarityError(f"familiarity needs questions of at least {MIN_GROUPS} groups (kinds) to leave one out; got {len(set(groups))}")
    index = Index(questions)
    seen, unseen = [], []
    for i, text in enumerate(questions):
        sims = index.similarities(text)
        seen.append(max((s for j, s in enumerate(sims) if j != i), default=0.0))
        unseen.append(max((s for j, s in enumerate(sims) if groups[j] != groups[i]), default=0.0))

    def balanced(t: float) -> float:
        return (sum(s >= t for s in seen) / len(seen) + sum(s < t for s in unseen) / len(unseen)) / 2

    return max(sorted(set(seen) | set(unseen)), key=lambda t: (balanced(t), -t))  # ties: the lower, which gates less


def answer_instructions(asked: Iterable[tuple[str, str]]) -> list[str]:
    """The answer-format instructions tasks appended: from (question as asked, bare question) pairs."""
    return sorted({q[len(bare):] for q, bare in asked if bare and q.startswith(bare) and q[len(bare):].strip()})


def strip_instruction(question: str, instructions: Sequence[str]) -> str:
    """The question without a trailing answer-format instruction its tasks append (compared bare, since a
    conductor is asked both ways and the instruction's words would make every question look alike). The
    instruction must follow whitespace or stand alone, so a question that merely ends in its last characters keeps them."""
    text = question.rstrip()
    for instruction in sorted(instructions, key=len, reverse=True):
        tail = instruction.strip()
        if tail and text.endswith(tail) and (len(text) == len(tail) or text[-len(tail) - 1].isspace()):
            return text[: -len(tail)].rstrip()
    return text


class TrainingQuestion(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    group: str = Field(min_length=1)
    question: str


class Fallback(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    name: str = Field(min_length=1)  # e.g. "pool:code-then-run", the fit's best fixed workflow
    workflow: str  # in the conductor's output format, its ids those of `workers`
    workers: list[str] = Field(min_length=1)  # the names the ids stand for: resolved by name on the pool that runs it


class FamiliarFile(BaseModel):
    """``familiar.json``."""

    model_config = ConfigDict(extra="forbid", strict=True)
    threshold: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    fallback: Fallback
    instructions: list[str] = Field(default_factory=list)
    questions: list[TrainingQuestion] = Field(min_length=1)


@dataclass
class Familiarity:
    """A checkpoint's ``familiar.json``, and the test it makes."""

    data: FamiliarFile
    digest: str = ""  # sha256 of the file it was read from (of its JSON when built): what a result's fingerprint records
    index: Index = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # cut as questions are: a hand-made file with one huge question would otherwise be slow to load and compare
        self.index = Index([q.question[:MAX_CHARS] for q in self.data.questions])
        self.digest = self.digest or hashlib.sha256(self.dump().encode()).hexdigest()

    @classmethod
    def build(cls, questions: Sequence[str], groups: Sequence[str], fallback: Fallback, instructions: Sequence[str] = ()) -> "Familiarity":
        """From the training questions as they were asked (each with its group) and the fallback workflow."""
        if not questions or len(questions) != len(groups):
            raise FamiliarityError(f"familiarity needs questions, one group each; got {len(questions)} questions and {len(groups)} groups")
        if not all(isinstance(g, str) and g for g in groups):
            raise FamiliarityError("familiarity needs each training question's group (its kind, task or domain); some have none: "
                                   "give every question of a [data] file a domain")
        kept = sorted({i for i in instructions if i.strip()})
        bare = [strip_instruction(q, kept) for q in questions]
        cut = threshold(bare, groups)
        try:
            rows = [TrainingQuestion(group=g, question=q) for q, g in zip(bare, groups)]
            return cls(FamiliarFile(threshold=cut, fallback=fallback, instructions=kept, questions=rows))
        except ValidationError as exc:
            raise FamiliarityError(f"familiarity cannot be recorded: {_errors(exc)}") from None

    @property
    def threshold(self) -> float:
        return self.data.threshold

    def nearest(self, question: str) -> tuple[float, str]:
        """(similarity, group) of the training question nearest to ``question`` (group "" when no n-gram is shared)."""
        sims = self.index.similarities(strip_instruction(question, self.data.instructions)[:MAX_CHARS])
        best = max(range(len(sims)), key=sims.__getitem__)
        return sims[best], (self.data.questions[best].group if sims[best] > 0 else "")

    def fallback_workflow(self, spec: "PoolSpec", max_steps: int) -> Workflow:
        """The fallback on ``spec``: its workers found by name, within ``max_steps``."""
        fallback, workflow = self.data.fallback, self._fallback
        names = [w.name for w in spec.workers]
        missing = sorted({fallback.workers[s.worker] for s in workflow.steps} - set(names))
        if missing:
            raise FamiliarityError(f"{FAMILIAR_FILE}: fallback {fallback.name!r} needs worker(s) {', '.join(missing)}, which pool {spec.name!r} "
                                   f"lacks (it has {', '.join(names)}); {FIX}")
        if len(workflow.steps) > max_steps:
            raise FamiliarityError(f"{FAMILIAR_FILE}: fallback {fallback.name!r} has {len(workflow.steps)} steps, more than [conductor] "
                                   f"max_steps = {max_steps}; raise max_steps, or set [conductor] unfamiliar = \"plan\"")
        steps = tuple(Step(spec.index(fallback.workers[s.worker]), s.subtask, s.access) for s in workflow.steps)
        return Workflow(steps, reasoning=workflow.reasoning)

    @cached_property
    def _fallback(self) -> Workflow:
        """The fallback as written, ids those of its ``workers``: parsed once per file read (every gated plan asks)."""
        fallback = self.data.fallback
        try:
            # no step bound here: the pool's is checked in fallback_workflow, with a message that names it
            return parse_and_validate(fallback.workflow, len(fallback.workers), max_steps=2**31)
        except WorkflowError as exc:  # raised each time: a cached_property keeps only a value
            raise FamiliarityError(f"{FAMILIAR_FILE}: fallback {fallback.name!r} is not a workflow ({exc}); {FIX}") from None

    def dump(self) -> str:
        return self.data.model_dump_json(indent=1) + "\n"

    def write(self, checkpoint: Path) -> Path:
        """Written whole or not at all: a server may read it while a refit writes it."""
        path = Path(checkpoint) / FAMILIAR_FILE
        partial = path.with_name(f".{FAMILIAR_FILE}.{os.getpid()}.tmp")
        partial.write_text(self.dump())
        os.replace(partial, path)
        return path


def _errors(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'the whole file'}: {e['msg']}" for e in exc.errors()[:3])


def read_familiarity(checkpoint: Path) -> Familiarity:
    path = Path(checkpoint) / FAMILIAR_FILE
    try:
        stat = path.stat()
    except OSError:
        raise FamiliarityError(f"{path} not found: [conductor] unfamiliar = \"best-fixed\" needs a checkpoint that records its training questions "
                               "(`conductor fit` writes them); set unfamiliar = \"plan\" or refit") from None
    if stat.st_size > MAX_FILE_BYTES:
        raise FamiliarityError(f"{path}: {stat.st_size / 2**20:.0f} MB, over the {MAX_FILE_BYTES // 2**20} MB a familiarity file may be; {FIX}")
    return _read(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=8)
def _read(path: str, mtime_ns: int, size: int) -> Familiarity:  # keyed on the file's stat: a refit is re-read
    try:
        raw = Path(path).read_bytes()
        return Familiarity(FamiliarFile.model_validate(json.loads(raw)), digest=hashlib.sha256(raw).hexdigest())
    except (OSError, ValueError, RecursionError) as exc:  # ValidationError and JSONDecodeError are ValueErrors; RecursionError: nesting
        detail = _errors(exc) if isinstance(exc, ValidationError) else "nested too deeply" if isinstance(exc, RecursionError) else exc
        raise FamiliarityError(f"{path}: not a familiarity file ({detail}); {FIX}") from None


def pool_familiarity(spec: "PoolSpec", max_steps: Optional[int] = None) -> tuple[Familiarity, Workflow]:
    """The familiarity of the pool's trained conductor and its fallback resolved on the pool (``unfamiliar = "best-fixed"``),
    within ``max_steps`` (default: the pool's)."""
    from ..spec import PoolConfigError
    from .checkpoint import checkpoint_path

    if not spec.conductor.checkpoint:
        raise FamiliarityError('[conductor] unfamiliar = "best-fixed" needs a trained conductor (checkpoint); this pool plans with a prompted one')
    try:
        folder = checkpoint_path(spec.conductor.checkpoint)
    except PoolConfigError as exc:
        raise FamiliarityError(str(exc)) from None
    familiar = read_familiarity(folder)
    return familiar, familiar.fallback_workflow(spec, spec.conductor.max_steps if max_steps is None else max_steps)
