"""Record in a conductor's manifest the subtasks its warm-up taught (``wordings``), for a checkpoint trained before
the trainer recorded them. With the pool's ``[conductor] subtasks = "trained"`` (the default) it then writes only those.

    python scripts/record_wordings.py RUN/warmup                      # from RUN/warmup_targets.jsonl
    python scripts/record_wordings.py src/openconductor/data/conductors/local-tools --from-selection

``--from-selection`` reads the targets from the manifest's own record of a domain search (each domain's kept
workflows, which were the warm-up's targets); a per-question selection (``conductor fit``) keeps its targets in
``warmup_targets.jsonl`` beside the checkpoint instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from openconductor.conductor.manifest import read_manifest
from openconductor.train.trainer import WARMUP_TARGETS
from openconductor.train.warmup import taught_wordings


def selection_targets(selection: dict) -> list[str]:
    domains = selection.get("domains") or []
    return [kept["workflow"] for domain in domains for kept in domain.get("kept", [])]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path, help="a conductor's dir (its openconductor.json is rewritten)")
    parser.add_argument("--targets", type=Path, help=f"the warm-up's targets (default: {WARMUP_TARGETS} in the checkpoint's parent)")
    parser.add_argument("--from-selection", action="store_true", help="take the targets from the manifest's domain search record")
    args = parser.parse_args()
    if not (args.checkpoint / "openconductor.json").is_file():
        print(f"{args.checkpoint}: not a conductor checkpoint (no openconductor.json)", file=sys.stderr)
        return 2
    manifest = read_manifest(args.checkpoint)
    if args.from_selection:
        targets = selection_targets(manifest.selection or {})
        where = "its manifest's selection"
    else:
        path = args.targets or args.checkpoint.parent / WARMUP_TARGETS
        if not path.is_file():
            print(f"{path}: no such file; name the warm-up's targets with --targets, or use --from-selection", file=sys.stderr)
            return 2
        targets = [json.loads(line)["target"] for line in path.read_text().splitlines() if line.strip()]
        where = str(path)
    if not targets:
        print(f"{args.checkpoint}: no warm-up targets found in {where}", file=sys.stderr)
        return 2
    manifest.wordings = taught_wordings(targets)
    manifest.write(args.checkpoint)
    print(f"{args.checkpoint}: {len(manifest.wordings)} wordings from {len(targets)} targets ({where})")
    for text in manifest.wordings:
        print(f"  {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
