"""PNG learning curves from a run's ``metrics.jsonl`` (matplotlib, headless)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Optional

from ..conductor.manifest import read_manifest


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


LEGEND_MAX = 10


def legend_keys(keys: list[str], rows: list[dict], default: Optional[float] = None, limit: int = LEGEND_MAX) -> list[str]:
    """The ``limit`` keys with the largest mean over ``rows`` (``default`` for a row that lacks one): the lines a
    legend names, so that a panel of many workers stays readable."""
    def mean(key: str) -> float:
        vals = [r.get(key, default) for r in rows]
        nums = [v for v in vals if isinstance(v, (int, float))]
        return sum(nums) / len(nums) if nums else float("-inf")
    return sorted(keys, key=mean, reverse=True)[:limit]


def _lines(ax, keys, label, title, *, window: int, among: list, default=None) -> None:
    """Moving averages over the rows (of ``among``) that logged each key (a domain appears only in some
    steps); ``default`` stands in for a key a row lacks."""
    named = set(legend_keys(keys, among, default))
    for key in keys:
        pts = [(r["step"], r[key] if key in r else default) for r in among]
        pts = [(s, v) for s, v in pts if v is not None]
        if pts:
            xs, vals = zip(*pts)
            # "_"-prefixed labels stay out of the legend: a run over many generated pools logs dozens of workers
            ax.plot(xs, _smooth(list(vals), window), lw=1.5, label=label(key) if key in named else f"_{key}")
    if len(named) < len(keys):
        title += f"; legend: top {len(named)} of {len(keys)}"
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("step", fontsize=8)
    if ax.lines:
        ax.legend(fontsize=6)


def plot_run(run_dir: Path, out: Optional[Path] = None, *, window: int = 10) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        if (run_dir / "warmup" / "openconductor.json").exists():
            return plot_warmup(run_dir, out)  # a --warmup-only run: no GRPO steps to plot
        raise PlotError(f"no metrics.jsonl in {run_dir}; is it a `conductor train` output dir?")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not rows:
        raise PlotError(f"{path} is empty; training has not logged a step yet")
    shares = sorted({k for r in rows for k in r if k.startswith("worker_share/")})
    domains = sorted({k.split("/", 1)[0] for r in rows for k in r if k.endswith("/steps_per_workflow")})
    fig, axes = plt.subplots(3, 4, figsize=(18, 11))
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

    lines = functools.partial(_lines, window=window, among=rows)
    lines(flat[len(PANELS)], shares, lambda k: k.split("/", 1)[1], f"worker share of steps (moving avg {window})", default=0.0)
    lines(flat[len(PANELS) + 1], [f"{d}/steps_per_workflow" for d in domains], lambda k: k.split("/")[0],
          f"steps per workflow, by domain (moving avg {window})")
    lines(flat[len(PANELS) + 2], [f"{d}/accuracy" for d in domains], lambda k: k.split("/")[0],
          f"accuracy, by domain (moving avg {window})")
    # On the domain with the largest routing gap (code), who writes the answer (the first step) and who has
    # the last word (the final step), per worker.
    lcb_steps = [r for r in rows if "lcb/steps_per_workflow" in r]
    used = len(PANELS) + 3
    for which in ("first", "final"):
        keys = sorted({k for r in rows for k in r if k.startswith(f"lcb/{which}_worker/")})
        if keys and lcb_steps:
            lines(flat[used], keys, lambda k: k.rsplit("/", 1)[1], f"lcb: {which}-step worker share (moving avg {window})",
                  default=0.0, among=lcb_steps)
            used += 1
    for ax in flat[used:]:
        ax.axis("off")
    fig.suptitle(f"{run_dir.name}: {len(rows)} logged steps (numbers on a simulated pool are SIMULATED)", fontsize=10)
    fig.tight_layout()
    out = Path(out) if out else run_dir / "curves.png"
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return out


def plot_warmup(run_dir: Path, out: Optional[Path] = None) -> Path:
    """A warm-up-only run (``conductor train --warmup-only``): the supervised copy's loss per batch and,
    when its targets were searched, each domain's finalists by mean reward on the ranking questions
    (filled: the plans kept)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    manifest = read_manifest(Path(run_dir) / "warmup")
    losses = [x for x in manifest.warmup_losses or [] if x is not None]
    domains = (manifest.selection or {}).get("domains") or []
    if not losses:
        raise PlotError(f"{run_dir}/warmup/openconductor.json records no warm-up losses to plot")
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 5))
    left.plot(range(1, len(losses) + 1), losses, lw=1)
    left.set_title("supervised warm-up: loss per batch", fontsize=9)
    left.set_xlabel("batch", fontsize=8)
    if domains:
        for i, d in enumerate(domains):
            kept = {k["workflow"] for k in d.get("kept", [])}
            for f in d.get("finalists", []):
                right.scatter(i, f["mean_reward"], s=30, facecolors="C0" if f["workflow"] in kept else "none", edgecolors="C0")
            right.scatter(i, d["best"], marker="_", s=400, color="C3")
        right.set_xticks(range(len(domains)), [d["domain"] for d in domains], rotation=20, fontsize=8)
        right.set_title("domain search: finalists' mean reward on the ranking questions (filled: kept; red: best)", fontsize=9)
    else:
        right.axis("off")
    fig.suptitle(f"{Path(run_dir).name}: warm-up only ({manifest.stage or 'format warm-up'})", fontsize=10)
    fig.tight_layout()
    out = Path(out) if out else Path(run_dir) / "curves.png"
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return out
