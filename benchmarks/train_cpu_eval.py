"""Before/after table for a CPU training run on the SIMULATED paper-constrained pool.

    PYTHONPATH=src python benchmarks/train_cpu_eval.py runs/cpu-smollm2 [--n 48]
    PYTHONPATH=src python benchmarks/train_cpu_eval.py runs/gpu-smollm2 --config examples/train_gpu_smollm2.toml --batch-size 64

Rows: the best single worker, an oracle single-step router (best worker per domain), the untrained
SmolLM2 conductor, the conductor after the format warm-up only (RUN/warmup) and after GRPO
(RUN/final). Every conductor gets the same held-out questions (never seen in training), the same
runtime prompt and greedy decoding; its workflow runs on the pool and is graded with the training
reward (1 correct, 0.5 well formed but wrong, 0 unparseable). All numbers are SIMULATED.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from openconductor.train.config import load_train_config
from openconductor.train.evaluate import comparison_table, evaluate, markdown_table


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--config", type=Path, default=Path("examples/train_cpu_smollm2.toml"))
    ap.add_argument("--n", type=int, default=None, help="held-out questions (default: data.n_eval)")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n-eval", type=int, default=None, help="generate this many held-out questions (overrides data.n_eval)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override a config value, as for `conductor train` (e.g. model.name=gguf:/path/to/x.gguf)")
    ap.add_argument("--chains", type=int, nargs="*", default=[], metavar="K",
                    help="also score fixed K-step chains on the best single worker (e.g. --chains 2 3)")
    ap.add_argument("--batch-size", type=int, default=8, help="held-out prompts generated at once (larger on a GPU)")
    ap.add_argument("--only", choices=["untrained", "warmup", "final"], action="append", help="conductor rows to run (default: all)")
    ap.add_argument("--no-moa", action="store_true", help="skip the Mixture-of-Agents row")
    ap.add_argument("--trained", type=Path, default=None, help="checkpoint for the trained row (default: RUN_DIR/final)")
    ap.add_argument("--out", type=Path, default=None, help="where the rows go (default: RUN_DIR/eval_nN.json)")
    args = ap.parse_args()
    overrides = {}
    for item in args.overrides:
        key, sep, raw = item.partition("=")
        if not sep:
            ap.error(f"--set expects KEY=VALUE, got {item!r}")
        try:
            overrides[key] = json.loads(raw)
        except json.JSONDecodeError:
            overrides[key] = raw
    if args.n_eval:
        overrides["data.n_eval"] = args.n_eval
    import torch

    torch.set_num_threads(args.threads)
    cfg = load_train_config(args.config, overrides or None)
    only = set(args.only or ["untrained", "warmup", "final"])
    conductors = {"untrained SmolLM2-135M conductor": cfg.model.name} if "untrained" in only else {}
    for label, sub, path in (("after format warm-up only", "warmup", args.run_dir / "warmup"),
                             ("after GRPO (trained)", "final", args.trained or args.run_dir / "final")):
        if sub in only and path.is_dir():
            conductors[label] = str(path)
    start = time.time()
    rows = evaluate(cfg, conductors, n=args.n, temperature=args.temperature, batch_size=args.batch_size, chains=tuple(args.chains), moa=not args.no_moa,
                    on_row=lambda r: print(f"  done: {r.system} ({time.time() - start:.0f}s)", file=sys.stderr, flush=True))
    domains = sorted(cfg.data.domains)
    print(f"SIMULATED pool {cfg.pool}; {len(load_train_config(args.config).data.domains)} domains; held-out n={args.n or cfg.data.n_eval}; greedy={args.temperature == 0}")
    print(comparison_table(rows, domains))
    print()
    print(markdown_table(rows, domains))
    print()
    print("| system | " + " | ".join(f"acc {d}" for d in domains) + " | final-step worker share |")
    print("|---|" + "---|" * (len(domains) + 1))
    for r in rows:
        shares = ", ".join(f"{k} {v:.2f}" for k, v in r.worker_share.items())
        print(f"| {r.system} | " + " | ".join(f"{r.per_domain_acc.get(d, 0.0):.2f}" for d in domains) + f" | {shares} |")
    out = args.out or args.run_dir / (f"eval_n{args.n_eval}.json" if args.n_eval else "eval.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=2))
    print(f"\n({time.time() - start:.0f}s; rows saved to {out})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
