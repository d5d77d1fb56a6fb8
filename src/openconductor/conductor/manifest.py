"""A trained conductor's manifest: ``openconductor.json`` beside its weights, read and written here only.

``conductor train`` writes it with every export (the warm-up, the final model); the runtime reads it to
prompt the conductor as it was trained (``prompt``), to find its base model (``kind``, ``base_model``,
``model``) and its llama.cpp copy (``gguf``), and to say which pool it learned (``pool``). What training
adds for the record (the search's summary, losses, timings, notes) is kept as extra keys.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..spec import PoolView

MANIFEST = "openconductor.json"
FORMAT = "openconductor-conductor/1"
RANKINGS = ("area", "subtopic")  # what a pool's measured profile ranks, per line (sim.pools.PROFILES)


class ManifestError(ValueError):
    """An ``openconductor.json`` that is not valid JSON or not a manifest; the message names the file."""


class PromptInfo(BaseModel):
    """How the conductor's prompt was built in training (``train.config.PromptSettings``); None: not recorded."""

    model_config = ConfigDict(extra="allow")

    max_steps: Optional[int] = Field(None, ge=1)
    examples: Optional[bool] = None
    fine_grained: Optional[bool] = None
    show: Optional[PoolView] = None
    style: Optional[Literal["paper", "compact"]] = None
    ids_follow_names: Optional[bool] = None  # each id is the worker its reasoning line names (workflow.WorkflowFormat.names)
    name_slots: Optional[bool] = None  # a slot word of that line is followed by a whole pool name (WorkflowFormat.name_slots)
    rank_aliases: Optional[bool] = None  # "math#1" in that line names the best in math of the pool's ranking (policies.lm.rank_aliases)


class PoolInfo(BaseModel):
    """The pool the conductor was trained on: its name, its workers in the order the conductor saw them,
    and the file it came from. (Older manifests hold the file's path alone.)"""

    model_config = ConfigDict(extra="allow")

    name: str = ""
    workers: list[str] = Field(default_factory=list)
    path: Optional[str] = None

    @model_validator(mode="before")
    @classmethod
    def _from_path(cls, value: Any) -> Any:
        return {"path": value} if isinstance(value, str) else value


class ConductorManifest(BaseModel):
    model_config = ConfigDict(extra="allow")  # what training records beside the fields below

    format: str = FORMAT
    kind: Optional[Literal["adapter", "full", "merged"]] = None  # adapter: a LoRA adapter over ``base_model``
    base_model: Optional[str] = None  # where the adapter's base was on the training machine
    model: Optional[str] = None  # the model reference it was trained from (gguf:<package>, a path, a hub id)
    prompt: PromptInfo = Field(default_factory=PromptInfo)
    pool: Optional[PoolInfo] = None
    gguf: Optional[str] = None  # its llama.cpp copy's file name in the checkpoint dir
    stage: Optional[str] = None  # "format warm-up" for a warm-up export
    selection: Optional[dict[str, Any]] = None  # the warm-up's target search summary (train/search/warmup_targets.py)
    warmup_losses: Optional[list[Optional[float]]] = None  # the supervised warm-up's loss per batch
    # Every subtask the warm-up taught, in order of first use: with the pool's `[conductor] subtasks = "trained"`
    # the conductor writes only these, whole (workflow.WorkflowFormat.wordings). None: not recorded (free text).
    wordings: Optional[list[str]] = None

    @property
    def ranking(self) -> str:
        """Whose measured ranking the pools it was copied on showed (a simulated copy's ``copy.settings.ranking``):
        "area" (4 lines, the default, and what a manifest without the record means) or "subtopic" (16 lines; its rank
        words, "graph#1", bind only on a pool profiled per subtopic). Any other record is refused."""
        copy = (self.model_extra or {}).get("copy")
        settings = copy.get("settings") if isinstance(copy, dict) else None
        value = settings.get("ranking", "area") if isinstance(settings, dict) else "area"
        if copy is not None and not isinstance(copy, dict) or settings is not None and not isinstance(settings, dict):
            raise ManifestError(f"the manifest's copy record is not an object with settings: {copy!r}")
        if value not in RANKINGS:
            raise ManifestError(f"the manifest records copy.settings.ranking = {value!r}; this version knows {', '.join(RANKINGS)}")
        return value

    @property
    def gguf_declared(self) -> bool:
        """Whether the export said anything about a llama.cpp copy: ``gguf`` None then means it wrote none
        (a conductor.gguf left in the dir is an older model's); absent, the runtime may build one."""
        return "gguf" in self.model_fields_set

    def without(self, *keys: str) -> "ConductorManifest":
        """The manifest with ``keys`` absent (not null: an absent ``gguf`` lets the runtime build a copy)."""
        return ConductorManifest.model_validate({k: v for k, v in self.model_dump(exclude_unset=True).items() if k not in keys})

    def write(self, directory: str | Path) -> Path:
        """Write ``directory/openconductor.json``: the format and every field that was set, null included
        (non-finite numbers as null)."""
        path = Path(directory) / MANIFEST
        data = {"format": self.format, **json.loads(self.model_dump_json(exclude_unset=True))}
        path.write_text(json.dumps(data, indent=2))
        return path


def manifest_version(directory: str | Path) -> Optional[tuple[int, int, int]]:
    """The manifest file's (mtime_ns, size, inode), None without one: what tells a checkpoint retrained into the same dir."""
    try:
        stat = (Path(directory) / MANIFEST).stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size, stat.st_ino


def cached_manifest(directory: str | Path) -> ConductorManifest:
    """``read_manifest``, parsed once per version of the file (``manifest_version``): the runtime reads it on every plan.
    The object is shared between callers: read it, never change it."""
    return _parsed(str(directory), manifest_version(directory))


@lru_cache(maxsize=32)
def _parsed(directory: str, version: Optional[tuple[int, int, int]]) -> ConductorManifest:
    return read_manifest(directory)  # a ManifestError is raised, not cached


def has_manifest(directory: str | Path) -> bool:
    return (Path(directory) / MANIFEST).is_file()


def read_manifest(directory: str | Path) -> ConductorManifest:
    """The checkpoint dir's manifest; an empty one (every field unset) if it has none."""
    path = Path(directory) / MANIFEST
    if not path.is_file():
        return ConductorManifest()
    try:
        return ConductorManifest.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path}: not valid JSON: {exc}") from exc
    except ValidationError as exc:
        from ..configfile import problems

        raise ManifestError(f"{path}: not a conductor manifest: {problems(exc)}") from exc
