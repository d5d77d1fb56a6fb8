"""An eval folder's report: ``summary.json``, ``table.md`` and ``pareto.png`` (accuracy against tokens)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Optional

from .records import EvalRecord
from .setup import PLOT_FILE, SUMMARY_FILE, TABLE_FILE
from .summary import SummaryRow, markdown_table, summarize


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of points no other point beats on both fewer tokens and higher accuracy."""
    front = []
    for i, (x, y) in enumerate(points):
        dominated = any((x2 <= x and y2 >= y) and (x2 < x or y2 > y) for j, (x2, y2) in enumerate(points) if j != i)
        if not dominated:
            front.append(i)
    return sorted(front, key=lambda i: points[i][0])


def plot(rows: list[SummaryRow], path: Path, title: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = sorted({r.task for r in rows})
    fig, axes = plt.subplots(1, len(tasks), figsize=(6.4 * len(tasks), 4.6), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        rs = [r for r in rows if r.task == task]
        points = [(max(r.tokens, 1.0), 100 * r.accuracy) for r in rs]
        for r, (x, y) in zip(rs, points):
            ax.errorbar([x], [y], yerr=[100 * r.stderr], fmt="o", capsize=3)
            ax.annotate(r.policy, (x, y), textcoords="offset points", xytext=(5, 4), fontsize=8)
        front = pareto_front(points)
        ax.plot([points[i][0] for i in front], [points[i][1] for i in front], "--", color="grey", linewidth=1, label="Pareto front")
        ax.set_xscale("log")
        ax.set_xlabel("tokens per question (workers + conductor, log)")
        ax.set_ylabel("accuracy (%)")
        ax.set_title(f"{task}" + (f" — {title}" if title else ""), fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(records: list[EvalRecord], out: Path, *, meta: Optional[dict] = None, title: str = "",
                 against: Optional[str] = None) -> list[SummaryRow]:
    """summary.json, table.md and pareto.png in ``out``; returns the summary rows (``against``: a policy
    label every other row is compared with, paired per question)."""
    rows = summarize(records, against=against)
    order = {p: i for i, p in enumerate(dict.fromkeys(r.policy for r in records))}
    rows.sort(key=lambda r: (r.task, order.get(r.policy, 0)))
    (out / SUMMARY_FILE).write_text(json.dumps({"meta": meta or {}, "rows": [r.model_dump() for r in rows]}, indent=2))
    (out / TABLE_FILE).write_text(markdown_table(rows) + "\n")
    if rows:
        try:
            plot(rows, out / PLOT_FILE, title)
        except ImportError as exc:  # the plot needs matplotlib (the eval extra); the table and JSON do not
            logging.getLogger(__name__).warning("no %s: %s is not installed (pip install 'openconductor[eval]')", PLOT_FILE, exc.name)
    return rows
