"""Which conductor planned a run: recorded in every Run's ``metadata["conductor"]`` and shown by `conductor ask`,
`conductor trace`, the trace viewer and the server's ``run_finished`` metadata.

A policy name alone ("conductor") does not say it: the same pool plans with a trained checkpoint, with a
prompted worker (``[conductor] worker``), or not at all (a baseline). A trained checkpoint is named by its
directory and the sha256 digest of its weights, so a checkpoint retrained into the same directory reads as another one.
"""

from __future__ import annotations

import functools
import hashlib
import time
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Optional

from pydantic import BaseModel

if TYPE_CHECKING:
    from ..policies.base import Policy
    from ..pool import Pool

# The files that hold a checkpoint's weights (an adapter's config decides how its weights apply, so it counts).
WEIGHT_PATTERNS = ("adapter_model.safetensors", "adapter_config.json", "model*.safetensors", "pytorch_model*.bin", "config.json")


class ConductorIdentity(BaseModel):
    """Who wrote a run's plan: a trained checkpoint, a prompted worker, or a policy that needs no model to plan."""

    kind: Literal["checkpoint", "prompted", "policy"]
    policy: str
    checkpoint: Optional[str] = None  # its directory, or builtin:NAME for one shipped in the package
    sha256: Optional[str] = None  # of its weight files (WEIGHT_PATTERNS, else its llama.cpp copy), in name order
    base_model: Optional[str] = None  # the model it was trained from (its manifest)
    engine: Optional[str] = None  # the provider that runs it here: local_gguf (llama.cpp) or transformers
    worker: Optional[str] = None  # a prompted conductor: the pool worker (or backend) that runs the prompt
    provider: Optional[str] = None
    model: Optional[str] = None

    def line(self) -> str:
        """One line for people: `conductor ask`, `conductor trace`, the viewer."""
        if self.kind == "checkpoint":
            digest = f"sha256 {self.sha256[:12]}" if self.sha256 else "no weights found"
            return f"trained conductor {self.checkpoint} ({digest}, base {self.base_model or 'unknown'}, {self.engine})"
        if self.kind == "prompted":
            return f"prompted conductor: worker {self.worker!r} ({self.provider} / {self.model or '-'})"
        return f"policy {self.policy} (no conductor model plans)"


def conductor_identity(policy: "Policy", pool: "Pool") -> ConductorIdentity:
    """Who plans ``policy``'s runs on ``pool`` (the LM conductor: the pool's checkpoint or its prompted backend)."""
    if policy.name != "conductor":
        return ConductorIdentity(kind="policy", policy=policy.name)
    conductor = pool.spec.conductor
    if conductor.checkpoint:
        return _checkpoint_identity(conductor.checkpoint, conductor.backend)
    backend = conductor.backend if conductor.worker is None else pool.spec.workers[pool.spec.index(conductor.worker)]
    if backend is None:
        return ConductorIdentity(kind="prompted", policy=policy.name)  # it cannot plan: the run says why
    return ConductorIdentity(kind="prompted", policy=policy.name, worker=backend.name, provider=backend.provider, model=backend.model)


def identity_dict(policy: "Policy", pool: "Pool") -> dict[str, Any]:
    return conductor_identity(policy, pool).model_dump(exclude_none=True)


def _checkpoint_identity(checkpoint: str, backend: Any) -> ConductorIdentity:
    path = Path(checkpoint).expanduser()
    gguf = Path(backend.model) if backend is not None and str(backend.model).endswith(".gguf") else None
    return ConductorIdentity(kind="checkpoint", policy="conductor", checkpoint=_display(str(path)), sha256=weights_digest(path, gguf),
                             base_model=_base_model(path), engine=backend.provider if backend is not None else None)


# Every run records its conductor: what is read from the checkpoint's files is kept while their sizes and mtimes
# (and its directory's, for its listing) stay the same, so a run costs a few stats, not a read, a glob and a hash.
_LISTINGS: dict[str, tuple[int, list[Path]]] = {}
_SETTLED_NS = 1_000_000_000  # a directory changed this recently may change again within its mtime's tick: not kept


def _stat_key(path: Path) -> Optional[tuple[int, int]]:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _base_model(path: Path) -> Optional[str]:
    """The model the checkpoint was trained from, as its manifest says (None without one, or with a broken one)."""
    from .manifest import ManifestError, cached_manifest

    try:  # the manifest parsed once per version of the file, the cache planning reads too
        manifest = cached_manifest(path)
    except ManifestError:
        return None
    return manifest.model or manifest.base_model


def _weight_files(path: Path) -> list[Path]:
    """The checkpoint's ``WEIGHT_PATTERNS`` files in name order (its listing is kept while the directory's mtime stays)."""
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return []
    kept = _LISTINGS.get(str(path))
    if kept is not None and kept[0] == mtime:
        return kept[1]
    files = sorted({f for pattern in WEIGHT_PATTERNS for f in path.glob(pattern) if f.is_file()})
    if time.time_ns() - mtime > _SETTLED_NS:
        _LISTINGS[str(path)] = (mtime, files)
    return files


@functools.lru_cache(maxsize=64)
def _display(path: str) -> str:
    """builtin:NAME for a checkpoint shipped in the package, else its path."""
    shipped = Path(str(resources.files("openconductor").joinpath("data/conductors")))
    try:
        if Path(path).resolve().parent == shipped.resolve():
            return f"builtin:{Path(path).name}"
    except OSError:
        pass
    return path


# (path, files' names, sizes and mtimes) -> digest: a run in a hot loop (eval, a fit's search) hashes nothing twice.
_DIGESTS: dict[tuple, str] = {}


def weights_digest(path: Path, gguf: Optional[Path] = None) -> Optional[str]:
    """The sha256 of a checkpoint's weight files (``WEIGHT_PATTERNS``; else its llama.cpp copy), read in name order."""
    files = _weight_files(path)
    if not files and gguf is not None and gguf.is_file():
        files = [gguf]
    if not files:
        return None
    key = (str(path), tuple((f.name, *(_stat_key(f) or (None, None))) for f in files))
    if key not in _DIGESTS:
        digest = hashlib.sha256()
        for f in files:
            with f.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
        _DIGESTS[key] = digest.hexdigest()
    return _DIGESTS[key]


def identity_line(metadata: dict[str, Any]) -> Optional[str]:
    """The line for a stored run's ``metadata["conductor"]``; None for a run recorded before it was."""
    raw = metadata.get("conductor") if isinstance(metadata, dict) else None
    if not isinstance(raw, dict):
        return None
    try:
        return ConductorIdentity.model_validate(raw).line()
    except ValueError:
        return None
