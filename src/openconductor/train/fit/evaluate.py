"""The fit's evaluation: the conductor against every single worker, the best fixed workflow and the best
per-task lookup table, on held-out questions, through the one evaluator (``evaluation.run_eval``).

Two question sets, reported apart: held-out questions of the groups the fit trained on, and questions of
kinds it never saw (``--eval-task``). The baselines are chosen on the TRAINING questions, before any held-out
question runs: the best fixed workflow is the candidate with the highest mean screen reward over all groups,
the lookup table gives each group its best finalist (and unseen kinds the best fixed workflow). Every
conductor plans as ``conductor ask`` would with it (the pool's ``[conductor] checkpoint`` set to it: its
llama.cpp copy under the grammar when it has one). Each difference comes with a paired-bootstrap 95 %
interval over the same questions. Results are a resumable ``conductor eval`` folder (``eval/``), and the
calls go through the fit's replay store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from ...evaluation import EvalRecord, compare, interval_text, run_eval, summarize
from ...policies import Policy, make_policy
from ...policies.baselines import GivenWorkflow
from ...policies.lookup import LookupTable
from ...pool import PoolSpec
from ...tasks import Question, Task
from ...workflow import parse
from ..search.candidates import Candidate, models
from ..data import Item

HELD_OUT, UNSEEN = "held-out", "unseen"


def eval_task(name: str, items: list[Item]) -> Task:
    """Items as an eval task (question ids are their positions; each keeps its group as its domain)."""
    return Task(name, [Question(id=str(i), prompt=item.question, reference=item.reference, grader=item.task,
                                grader_options=dict(item.grader_options), metadata={"domain": item.domain})
                       for i, item in enumerate(items)])


def baseline_policies(spec: PoolSpec, candidates: list[Candidate], table: dict[str, str], best_fixed: str) -> list[tuple[str, Policy]]:
    """(label, policy): each model alone, the best fixed workflow, the per-task lookup table."""
    by_name = {c.name: c for c in candidates}
    out: list[tuple[str, Policy]] = [(f"single:{spec.workers[i].name}", make_policy("single", worker=spec.workers[i].name)) for i in models(spec)]
    out.append((f"best fixed ({best_fixed})", GivenWorkflow(parse(by_name[best_fixed].text), name=f"fixed:{best_fixed}")))
    lookup = LookupTable({g: parse(by_name[n].text) for g, n in table.items()}, default=parse(by_name[best_fixed].text), name="lookup")
    out.append(("lookup (per task)", lookup))
    return out


def with_checkpoint(spec: PoolSpec, checkpoint: Path) -> tuple[PoolSpec, dict]:
    """The pool planned by ``checkpoint`` as ``conductor ask --conductor CHECKPOINT`` plans it, and the
    conductor policy's options."""
    from ...conductor.checkpoint import trained_conductor

    return trained_conductor(spec, str(checkpoint))


async def evaluate_fit(spec: PoolSpec, tasks: list[Task], baselines: list[tuple[str, Policy]], conductors: dict[str, Path], out: Path, *,
                       cache, on_record=None, on_start=None, threads: Optional[int] = None,
                       settings: Optional[dict[str, dict[str, Any]]] = None) -> list[EvalRecord]:
    """Baselines, then each conductor (label -> checkpoint), into the eval folder ``out``; all records.
    ``threads``: for the conductor's llama.cpp copy, as the pool's local workers have them. ``settings``: per label,
    ``[conductor]`` settings that differ from the pool file's (``unfamiliar``: the same conductor with and without its gate)."""
    records = await run_eval(tasks, baselines, spec, out, cache=cache, on_record=on_record, on_start=on_start)
    for label, checkpoint in conductors.items():
        own = (settings or {}).get(label)
        pool = spec.model_copy(update={"conductor": spec.conductor.model_copy(update=own)}) if own else spec
        planned, options = with_checkpoint(pool, checkpoint)
        planned = planned.with_local_threads(threads) if threads else planned
        records = await run_eval(tasks, [(label, make_policy("conductor", **options))], planned, out, cache=cache, on_record=on_record,
                                 on_start=on_start)
    wanted = {label for label, _ in baselines} | set(conductors)
    return _latest([r for r in _all(out) if r.policy in wanted]) if conductors else records


def _all(out: Path) -> list[EvalRecord]:
    from ...evaluation import RESULTS_FILE, load_records

    return load_records(out / RESULTS_FILE)


def _latest(records: list[EvalRecord]) -> list[EvalRecord]:
    """One record per key (a resumed folder holds each once; this guards against a rerun's duplicates)."""
    return list({r.key: r for r in records}.values())


def report(records: list[EvalRecord], conductors: list[str], baselines: list[str]) -> str:
    """Markdown: per question set, each policy's accuracy, tokens and steps, and every conductor's paired
    difference to each baseline (and to the first conductor: what GRPO adds over the copy)."""
    lines = []
    for task in dict.fromkeys(r.task for r in records):
        rows = [r for r in records if r.task == task]
        summary = {s.policy: s for s in summarize(rows)}
        n = max((s.n for s in summary.values()), default=0)
        title = "held-out questions of the training groups" if task == HELD_OUT else "kinds never trained on"
        lines += [f"### {title} ({task}, {n} questions)", "", "| policy | accuracy | tokens/q | steps |", "|---|---|---|---|"]
        for label in baselines + conductors:
            s = summary.get(label)
            if s is not None:
                lines.append(f"| {label} | {100 * s.accuracy:.1f} | {s.tokens:,.0f} | {s.steps:.2f} |")
        against = baselines + conductors[:1]
        lines += ["", "| conductor | " + " | ".join(f"vs {b}" for b in against) + " |", "|---" * (len(against) + 1) + "|"]
        for label in conductors:
            mine = [r for r in rows if r.policy == label]
            cells = [_versus(mine, [r for r in rows if r.policy == b], b) if b != label else "—" for b in against]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines += [""]
    return "\n".join(lines)


def _versus(mine: list[EvalRecord], theirs: list[EvalRecord], name: str) -> str:
    if not mine or not theirs:
        return "—"
    return interval_text(compare(mine, theirs, name=name))


def per_group(records: list[EvalRecord], label: str) -> dict[str, float]:
    """Accuracy per group of one policy (for the report's per-kind lines)."""
    out: dict[str, list[int]] = {}
    for r in records:
        if r.policy == label:
            out.setdefault(r.domain, []).append(int(r.correct))
    return {g: sum(v) / len(v) for g, v in out.items()}


def group_line(records: list[EvalRecord], labels: list[str], task: Optional[str] = None) -> str:
    """One line per group: each policy's accuracy there (percent)."""
    rows = [r for r in records if task is None or r.task == task]
    table = {label: per_group(rows, label) for label in labels}
    groups = sorted({g for t in table.values() for g in t})
    return "\n".join(f"- {g}: " + ", ".join(f"{label} {100 * table[label].get(g, 0.0):.0f}" for label in labels) for g in groups)
