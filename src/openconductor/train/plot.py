"""PNG learning curves from a run's ``metrics.jsonl`` (matplotlib, headless)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional


class PlotError(ValueError):
    """A run dir without metrics to plot."""


PANELS = [
    ("reward", "reward (mean over the step's completions)"),
    ("format_error_rate", "format-error rate"),
    ("accuracy", "accuracy"),
    ("steps_per_workflow", "steps per workflow"),
    ("topology_diversity", "topology diversity (distinct patterns / group)"),
    ("cost_per_workflow", "cost per workflow ($)"),
]


def _smooth(values: list[float], window: int) -> list[float]:
    out, acc = [], []
    for v in values:
        acc.append(v)
        if len(acc) > window:
            acc.pop(0)
        out.append(sum(acc) / len(acc))
    return out


def plot_run(run_dir: Path, out: Optional[Path] = None, *, window: int = 10) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        raise PlotError(f"no metrics.jsonl in {run_dir}; is it a `conductor train` output dir?")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not rows:
        raise PlotError(f"{path} is empty; training has not logged a step yet")
    shares = sorted({k for r in rows for k in r if k.startswith("worker_share/")})
    fig, axes = plt.subplots(2, 4, figsize=(18, 7.5))
    flat = axes.flatten()
    steps = [r["step"] for r in rows]
    for ax, (key, title) in zip(flat, PANELS):
        ys = [r.get(key) for r in rows]
        pts = [(s, y) for s, y in zip(steps, ys) if y is not None]
        if pts:
            xs, vals = zip(*pts)
            ax.plot(xs, vals, alpha=0.3, lw=1)
            ax.plot(xs, _smooth(list(vals), window), lw=2, label=f"moving avg ({window})")
            ax.legend(fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("step", fontsize=8)
    ax = flat[len(PANELS)]
    for key in shares:
        pts = [(s, r.get(key, 0.0)) for s, r in zip(steps, rows)]
        xs, vals = zip(*pts)
        ax.plot(xs, _smooth(list(vals), window), lw=1.5, label=key.split("/", 1)[1])
    ax.set_title(f"worker share of steps (moving avg {window})", fontsize=9)
    if shares:
        ax.legend(fontsize=6)
    flat[-1].axis("off")
    flat[-1].text(0.0, 0.5, f"{run_dir.name}\n{len(rows)} logged steps\nsimulated pool numbers are SIMULATED", fontsize=9)
    fig.tight_layout()
    out = Path(out) if out else run_dir / "curves.png"
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return out
