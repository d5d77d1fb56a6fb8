"""Write ``familiar.json`` (conductor/familiar.py) into a conductor trained by ``conductor train``, which does not
write one (``conductor fit`` does): its training questions from the training config, and a fixed workflow of the
pool that ``[conductor] unfamiliar = "best-fixed"`` runs for a question unlike all of them.

    python scripts/record_familiarity.py src/openconductor/data/conductors/local-tools examples/train_local_tools.toml \\
        --pool default --workflow code-run-answer
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from openconductor.conductor.familiar import Fallback, FamiliarityError
from openconductor.pool import default_pool_path, load_pool
from openconductor.train.config import load_train_config
from openconductor.train.data import load_items
from openconductor.train.fit.context import familiarity_of


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path, help="the conductor's dir (familiar.json is written there)")
    parser.add_argument("config", type=Path, help="the training config it was trained with (its [data] gives the questions)")
    parser.add_argument("--pool", default="default", help="the pool file whose [workflows.NAME] is the fallback (default: the offline pool)")
    parser.add_argument("--workflow", required=True, help="the fallback: a [workflows.NAME] of the pool (choose it on training-side questions)")
    args = parser.parse_args()
    if not (args.checkpoint / "openconductor.json").is_file():
        print(f"{args.checkpoint}: not a conductor checkpoint (no openconductor.json)", file=sys.stderr)
        return 2
    spec = load_pool(default_pool_path() if args.pool == "default" else args.pool)
    if args.workflow not in spec.workflows:
        print(f"pool {spec.name!r} declares no workflow {args.workflow!r}; it has {', '.join(sorted(spec.workflows)) or 'none'}", file=sys.stderr)
        return 2
    items = load_items(load_train_config(args.config))
    fallback = Fallback(name=f"pool:{args.workflow}", workflow=spec.workflows[args.workflow].resolve(spec).render(), workers=[w.name for w in spec.workers])
    try:
        familiar = familiarity_of(items, fallback)
    except FamiliarityError as exc:
        print(f"{args.config}: {exc}", file=sys.stderr)
        return 2
    path = familiar.write(args.checkpoint)
    print(f"wrote {path}: {len(items)} questions of {len({q.group for q in familiar.data.questions})} groups, threshold {familiar.threshold:.3f}, "
          f"fallback {fallback.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
