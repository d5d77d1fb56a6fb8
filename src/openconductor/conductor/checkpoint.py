"""A trained conductor's checkpoint: where it is (``builtin:NAME`` or a directory), how it loads, and the pool
settings that make the runtime prompt it exactly as it was trained (``trained_conductor``).

A checkpoint dir holds the model (full, or a LoRA adapter over its base model, loaded with peft) and
``openconductor.json`` (``manifest.py``: how its prompt was built). A conductor can ship inside the package as a
LoRA adapter over a packaged GGUF model (``builtin:NAME``, from ``data/conductors/NAME``): on first use its
llama.cpp copy is built from the base file and the adapter with numpy (``gguf_weights.merge_adapter_gguf``) and
cached, so it plans with nothing but the ``local`` extra; without one it plans on the ``transformers`` provider.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from importlib import resources
from pathlib import Path
from typing import Literal, Optional, get_args

from ..providers.base import absent_modules, provider_class
from ..spec import BUILTIN_CONDUCTOR, RANKED_VIEWS, ConductorSpec, PoolConfigError, PoolSpec, WorkerSpec
from .manifest import MANIFEST, ConductorManifest, ManifestError, PromptInfo, cached_manifest

log = logging.getLogger(__name__)

CONDUCTOR_GGUF = "conductor.gguf"  # the llama.cpp copy `conductor train` writes beside the checkpoint


def builtin_conductors() -> list[str]:
    root = resources.files("openconductor").joinpath("data/conductors")
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def checkpoint_path(ref: str | Path) -> Path:
    """The directory of a trained conductor: ``builtin:NAME`` (shipped in the package), or a path
    (``load_pool`` has already made a pool file's relative one absolute)."""
    text = str(ref)
    if text.startswith(BUILTIN_CONDUCTOR):
        name = text[len(BUILTIN_CONDUCTOR):]
        path = Path(str(resources.files("openconductor").joinpath(f"data/conductors/{name}")))
        if not name or not (path / MANIFEST).is_file():
            raise PoolConfigError(f"no built-in conductor {text!r}; shipped: {', '.join(builtin_conductors()) or 'none'}")
        return path
    return Path(text).expanduser()


def load_checkpoint(path: str | Path, *, device: str = "cpu", dtype: str = "float32"):
    """(model, tokenizer) from a full checkpoint dir or a LoRA adapter dir."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path).expanduser()
    if not path.is_dir():
        raise PoolConfigError(f"transformers worker: checkpoint dir not found: {path}")
    torch_dtype = getattr(torch, dtype)
    if (path / "adapter_config.json").exists():
        from peft import PeftModel

        base = _adapter_base(path)
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch_dtype)
        model = PeftModel.from_pretrained(model, str(path)).merge_and_unload()  # merged: no adapter cost per token
    else:
        base = str(path)
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch_dtype)
    # A shipped adapter carries no tokenizer of its own: its base model's is the one it was trained with.
    tokenizer = AutoTokenizer.from_pretrained(str(path) if (path / "tokenizer_config.json").exists() else base)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.to(device).eval()  # type: ignore[arg-type]  # transformers types .to() as taking a model
    return model, tokenizer


def _adapter_base(path: Path) -> str:
    """The base model an adapter dir applies to: the one it was trained on if that path is here, else
    the manifest's model reference resolved on this machine (``gguf:<package>``, e.g. a shipped conductor)."""
    manifest = _manifest(path)
    base = manifest.base_model or json.loads((path / "adapter_config.json").read_text()).get("base_model_name_or_path")
    ref = str(manifest.model or "")
    if (not base or (Path(base).is_absolute() and not Path(base).exists())) and ref:
        from ..model_files import ModelSourceError, resolve_model

        try:
            return resolve_model(ref)
        except ModelSourceError as exc:
            raise PoolConfigError(f"{path}: base model {ref!r}: {exc}") from exc
    if not base:
        raise PoolConfigError(f"{path}: adapter without a base model (adapter_config.json base_model_name_or_path)")
    return base


def trained_prompt(checkpoint: str) -> PromptInfo:
    """How a trained conductor's prompt was built (its manifest's ``prompt``: examples, steps, ...). Looked up on every
    plan and parsed again whenever the file changes: a conductor retrained into the same dir must not keep the old prompt."""
    return _manifest(checkpoint_path(checkpoint)).prompt


def trained_wordings(checkpoint: str) -> tuple[str, ...]:
    """The subtasks a trained conductor was taught (its manifest's ``wordings``); () when it records none."""
    return tuple(_manifest(checkpoint_path(checkpoint)).wordings or ())


def held_wordings(conductor: ConductorSpec, checkpoint: Optional[str] = None) -> tuple[str, ...]:
    """The subtasks a pool's ``[conductor]`` holds its trained conductor to (``checkpoint``: another than the section's):
    its wordings with ``subtasks = "trained"``; () for free text or a conductor without a checkpoint."""
    checkpoint = checkpoint or conductor.checkpoint
    return trained_wordings(checkpoint) if conductor.subtasks == "trained" and checkpoint else ()


def applied(spec: PoolSpec) -> bool:
    """Whether the pool's ``[conductor] checkpoint`` is already its backend (``trained_conductor`` ran)."""
    backend, checkpoint = spec.conductor.backend, spec.conductor.checkpoint
    return checkpoint is None or (backend is not None and backend.name == f"conductor:{checkpoint_path(checkpoint).name}")


def _manifest(path: Path) -> ConductorManifest:
    """A checkpoint's manifest (what trained it, on which base, its llama.cpp copy); a bad one is a pool error.
    Shared (``cached_manifest``): read it, never change it."""
    try:
        return cached_manifest(path)
    except ManifestError as exc:
        raise PoolConfigError(f"--conductor: {exc}") from exc


def _llamacpp_backend(path: Path, manifest: ConductorManifest, draft: str = "none") -> tuple[Optional[WorkerSpec], str]:
    """The checkpoint's llama.cpp copy (``conductor.gguf``, written by ``conductor train``) as a backend, or None and why
    there is none. ``draft``: the speculative drafts the pool's declared backend asks for (``LocalGGUFOptions.draft``)."""
    if manifest.gguf_declared and not manifest.gguf:
        return None, "its last export wrote none"  # a conductor.gguf left there is an older model's
    try:
        import xllamacpp  # noqa: F401
    except ImportError:
        return None, "xllamacpp is not installed: pip install 'openconductor[local]'"
    file = path / (manifest.gguf or CONDUCTOR_GGUF)
    if not file.is_file():
        merged, why = _merged_copy(path, manifest)
        if merged is None:
            return None, why
        file = merged
    return WorkerSpec(name=f"conductor:{path.name}", provider="local_gguf", model=str(file), concurrency=1, timeout_s=600,
                      options={"draft": draft} if draft != "none" else {}), ""


def _merged_copy(path: Path, manifest: ConductorManifest) -> tuple[Optional[Path], str]:
    """For an adapter over a packaged GGUF model (a shipped conductor): its llama.cpp copy, built once
    with numpy into the cache (keyed by the adapter's bytes). None and why when it cannot be built."""
    ref = str(manifest.model or "")
    adapter = path / "adapter_model.safetensors"
    if manifest.kind != "adapter" or not ref.startswith("gguf:") or not adapter.is_file():
        return None, f"no {CONDUCTOR_GGUF} in it, and it is not an adapter over a packaged GGUF model to build one from"
    try:
        from .gguf_weights import GGUFExportError, merge_adapter_gguf
        from ..model_files import ModelSourceError, cache_root, gguf_source

        source, name = gguf_source(ref)
        digest = hashlib.sha256(adapter.read_bytes() + (path / "adapter_config.json").read_bytes()).hexdigest()[:16]
        target = cache_root().parent / "conductors" / f"{path.name}-{name}-{digest}.gguf"
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_suffix(f".{os.getpid()}.part")
            log.info("building the llama.cpp copy of %s in %s (once)", path, target)
            merge_adapter_gguf(path, source, partial)
            partial.replace(target)  # atomic: a concurrent or interrupted build never leaves half a file
        return target, ""
    except (ImportError, ModelSourceError, GGUFExportError, OSError) as exc:
        log.warning("%s: no llama.cpp copy (%s); planning with transformers", path, exc)
        return None, str(exc)


Engine = Literal["auto", "llama.cpp", "transformers"]
ENGINES: tuple[str, ...] = get_args(Engine)


def trained_conductor(spec: PoolSpec, path: str | Path, *, engine: Engine = "auto") -> tuple[PoolSpec, dict]:
    """A pool whose conductor backend is the checkpoint at ``path``, and the LMConductor options.

    The checkpoint's manifest (if any) says how its prompt was built (few-shot examples, access
    scheme, step cap, how the pool is shown) so the runtime prompts it the way it was trained.
    ``engine="auto"`` plans with the checkpoint's llama.cpp copy when it has one (grammar-constrained,
    several times faster on a CPU; its untouched layers stay quantized, so its plans can differ from
    the transformers model's in rare near-ties), else with transformers.
    """
    path = checkpoint_path(path).resolve()
    if not path.is_dir():
        raise PoolConfigError(f"--conductor: checkpoint dir not found: {path}")
    manifest = _manifest(path)
    prompt = manifest.prompt
    check_pool_fits(manifest, spec, path)
    declared = spec.conductor.backend
    draft = declared.options.get("draft", "none") if declared is not None and declared.provider == "local_gguf" else "none"
    backend, why = _llamacpp_backend(path, manifest, draft) if engine in ("auto", "llama.cpp") else (None, "")
    if backend is None and engine == "llama.cpp":
        raise PoolConfigError(f"--conductor: {path} has no llama.cpp copy ({path / CONDUCTOR_GGUF}): {why}")
    if backend is None and engine == "auto" and absent_modules(provider_class("transformers")):
        # Without torch the transformers fallback cannot run either: say what stopped llama.cpp, which is
        # the usual fix (e.g. the base model's package), before the heavy alternative.
        raise PoolConfigError(f"--conductor: no llama.cpp copy of {path} ({why}); planning with transformers instead "
                              "needs the train extra (pip install 'openconductor[train]')")
    if backend is None:
        backend = WorkerSpec(name=f"conductor:{path.name}", provider="transformers", model=str(path), concurrency=1, timeout_s=600)
    conductor = spec.conductor.model_copy(
        update={
            "worker": None,
            "backend": backend,
            "checkpoint": str(path),
            "max_steps": prompt.max_steps if prompt.max_steps is not None else spec.conductor.max_steps,
            "fine_grained_access": prompt.fine_grained if prompt.fine_grained is not None else spec.conductor.fine_grained_access,
            "show": prompt.show or spec.conductor.show,
            # Greedy, as its held-out tables were measured: sampling at a pool's default temperature made a
            # 135M conductor garble the long subtasks it had learned (e.g. the write-a-program wording).
            "temperature": 0.0,
        }
    )
    return spec.model_copy(update={"conductor": conductor}), {"examples": prompt.examples is not False}


def trained_workers(manifest: ConductorManifest) -> Optional[list[str]]:
    """The worker names, in id order, of the pool a conductor was trained on: its manifest's pool workers, or
    (older manifests) those of the pool file it names, when that file is still there; None if unknown."""
    pool = manifest.pool
    if pool is None:
        return None
    if pool.workers:
        return list(pool.workers)
    if pool.path and Path(pool.path).is_file():
        from ..spec import load_pool

        try:
            return [w.name for w in load_pool(pool.path).workers]
        except PoolConfigError:
            return None
    return None


def check_pool_fits(manifest: ConductorManifest, spec: PoolSpec, path: Path) -> None:
    """Refuse a conductor that knows its workers by ordinal id on a pool whose workers are not the ones it
    was trained on: its ids would name other workers (stale ids). A conductor trained with the pool shown
    by names or descriptions reads whichever pool it is given, and is prompted that way. One trained to read
    each area's ranking by measured accuracy (show = "profile" or "ranking") is refused on a pool where nothing is measured."""
    if manifest.prompt.show in RANKED_VIEWS:
        _check_profiles(spec, path, manifest.prompt.show)
        if manifest.ranking == "subtopic":
            _check_subtopic_lines(spec, path)
    if (manifest.prompt.show or "ids") != "ids":
        return
    trained_on, here = trained_workers(manifest), [w.name for w in spec.workers]
    if trained_on is not None and trained_on != here:
        raise PoolConfigError(
            f"conductor {path} was trained on ordinal ids for the pool [{', '.join(trained_on)}]; pool {spec.name!r} has "
            f"[{', '.join(here)}], so its ids would name other workers. Use a conductor trained with the pool shown by descriptions "
            "(e.g. builtin:sim-bucket for simulated pools), retrain on this pool, or plan without it (--conductor none)")


def _check_profiles(spec: PoolSpec, path: Path, show: str) -> None:
    from .ranking import _measured  # a simulated worker is measured in its world; others need a profile

    workers = [w for w in spec.workers if w.provider != "conductor"]
    unmeasured = [w.name for w in workers if not (w.profile or _measured(w))]
    if len(unmeasured) == len(workers):
        raise PoolConfigError(
            f"conductor {path} was trained to pick workers from their measured accuracy per area (show = \"{show}\"), "
            f"and no worker of pool {spec.name!r} has a profile. Add profile = {{ math = 0.8, ... }} to each worker "
            "(`conductor fit POOL` measures one), or use a conductor trained on descriptions")
    if unmeasured:
        log.warning("conductor %s reads each area's ranking by measured accuracy; pool %r's workers without a profile are "
                    "left out of it: %s", path, spec.name, ", ".join(unmeasured))


def _check_subtopic_lines(spec: PoolSpec, path: Path) -> None:
    from .ranking import ranked_by_area
    from ..sim.questions import SUBTOPIC_NAMES

    lines = list(ranked_by_area(spec))
    if not set(lines) & set(SUBTOPIC_NAMES.values()):
        log.warning("conductor %s was copied reading one ranking line per subtopic (\"graph algorithms: ...\"), and pool %r's "
                    "profiles rank %s: its rank words (\"graph#1\") will not bind, and it plans by names alone. Profile the pool per "
                    "subtopic (`conductor sim-pool --profile subtopic`, or profile keys such as algebra and \"graph algorithms\")",
                    path, spec.name, ", ".join(lines) or "nothing")
