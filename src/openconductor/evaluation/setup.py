"""What an eval folder's results were made with (``setup.json``): a re-run with anything different is
refused, never mixed in; adding policies, questions or repeats extends the run."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from pydantic import BaseModel, Field

from ..budget import Limits
from ..policies import Policy
from ..pool import PoolSpec
from ..tasks import Task
from .records import RESULTS_FILE, EvalError

if TYPE_CHECKING:
    from .records import EvalRecord

SETUP_FILE = "setup.json"
SUMMARY_FILE = "summary.json"
TABLE_FILE = "table.md"
PLOT_FILE = "pareto.png"


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


class Setup(BaseModel):
    """What an eval folder's results were made with (``setup.json``), as digests of content, not names."""

    pool: str  # the pool's name, for messages
    pool_digest: str  # its workers and every setting of theirs (the conductor section belongs to the conductor policy)
    settings: dict[str, Any]  # sampling seed, per-request limits
    policies: dict[str, str] = Field(default_factory=dict)  # label -> digest of Policy.fingerprint
    questions: dict[str, dict[str, str]] = Field(default_factory=dict)  # task -> question id -> digest of text, reference, grader


def eval_setup(tasks: list[Task], policies: list[tuple[str, Policy]], spec: PoolSpec, *, seed: int, limits: Limits) -> Setup:
    workers = spec.outcome_view({"workers", "strongest"})
    return Setup(
        pool=spec.name, pool_digest=_digest(workers), settings={"seed": seed, "limits": limits.model_dump()},
        policies={label: _digest(policy.fingerprint(spec)) for label, policy in policies},
        questions={t.name: {q.id: _digest([t.text(q), q.reference, q.grader, q.grader_options]) for q in t.questions} for t in tasks},
    )


def _differences(old: Setup, new: Setup) -> list[str]:
    found = []
    if old.pool_digest != new.pool_digest:
        same = " (same name, other workers or settings)" if old.pool == new.pool else ""
        found.append(f"the pool: {old.pool!r} there, {new.pool!r} now{same}")
    for key in sorted(set(old.settings) | set(new.settings)):
        if old.settings.get(key) != new.settings.get(key):
            found.append(f"{key}: {old.settings.get(key)} there, {new.settings.get(key)} now")
    for label in sorted(set(old.policies) & set(new.policies)):
        if old.policies[label] != new.policies[label]:
            found.append(f"policy {label!r} is set up differently (its options, model or the pool's [conductor] section)")
    for task in sorted(set(old.questions) & set(new.questions)):
        changed = [q for q, d in new.questions[task].items() if old.questions[task].get(q, d) != d]
        if changed:
            found.append(f"{len(changed)} question(s) of task {task!r} differ, e.g. {changed[0]!r} (other data, task options or generator seed)")
    return found


def check_setup(out: Path, setup: Setup, records: list["EvalRecord"]) -> Setup:
    """The setup to record in ``out``: this one merged with the one already there. Raises EvalError if
    the results already in ``out`` were made with anything this run does differently."""
    hint = f"choose another --out, or pass --fresh to move the old files aside and start over in {out}"
    path = out / SETUP_FILE
    if not records:
        return setup
    if not path.exists():
        raise EvalError(f"{out} holds {len(records)} result(s) without a {SETUP_FILE} (written by an older openconductor), "
                        f"so they cannot be checked against this pool, these policies and questions; {hint}")
    try:
        old = Setup.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise EvalError(f"{path} is not an eval setup ({exc}); {hint}") from exc
    differ = _differences(old, setup)
    if differ:
        raise EvalError(f"{out} holds results of another setup, which this run would mix into its table: "
                        + "; ".join(differ) + f". To keep both, {hint}")
    questions = {t: {**old.questions.get(t, {}), **qs} for t, qs in setup.questions.items()}
    return setup.model_copy(update={"policies": {**old.policies, **setup.policies}, "questions": {**old.questions, **questions}})


def start_fresh(out: Path) -> Optional[Path]:
    """Move an earlier run's files out of the way (into ``out/replaced-<time>/``); nothing is deleted."""
    files = [out / name for name in (RESULTS_FILE, SETUP_FILE, SUMMARY_FILE, TABLE_FILE, PLOT_FILE) if (out / name).exists()]
    if not files:
        return None
    target = out / time.strftime("replaced-%Y%m%d-%H%M%S")
    target.mkdir(parents=True, exist_ok=False)
    for f in files:
        f.rename(target / f.name)
    return target
