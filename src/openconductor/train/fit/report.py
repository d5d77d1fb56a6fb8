"""The fit's whole report (``OUT/report.md``) and the conductor's model card (``OUT/conductor/README.md``).

The evaluation's tables (``evaluate.report``) say how each policy did on held-out questions. Around them the report
says how to read them, what the search saw on the training questions and why it ranked as it did (its reward is not
accuracy: a wrong answer from a plan that ran still earns the recipe's ``wrong`` reward, so a mean reward of 0.49 can
go with an accuracy of 0), whether the copy reproduces its targets, and what the fit ships.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from ..config import RewardSettings
    from .copy import Fidelity
    from .ship import Verdict


def reading_guide(reward: "RewardSettings") -> str:
    return "\n".join([
        "### how to read this report",
        "",
        "- **accuracy**: the share of questions whose final answer the task's grader scored right, in percent.",
        "- **tokens/q**: every worker call's input and output tokens per question, plus the conductor's own; **steps**: steps per plan.",
        "- **vs X**: this row's accuracy minus X's on the same questions, in points, with a paired-bootstrap 95 % interval "
        "[low, high]; an interval that contains 0 is no evidence of a difference.",
        f"- **mean reward** (the search's ranking, training questions only): {reward.correct:g} for a right answer, {reward.wrong:g} "
        f"for a wrong answer from a plan that ran, {reward.unparseable:g} for a plan that did not parse or a worker that failed, "
        f"minus {max(reward.step_weight, 0.01):g} per step. It ranks plans that ran above plans that broke, so it is not accuracy: "
        f"a mean reward of {reward.wrong - max(reward.step_weight, 0.01):.2f} with 1 step means every answer was wrong.",
        "- **fidelity**: the share of training questions on which the conductor writes its target plan (same workers, subtasks "
        "and visible steps); a copy under the bar is not a conductor of those plans.",
        "- **lookup (per task)** knows each question's kind; **lookup (as shipped)** does not (as `conductor ask` and the server): "
        "it takes the nearest training question's kind, or the best fixed workflow for a question unlike them all.",
    ])


def search_table(out: Path) -> str:
    """Per kind, the search's best plan on its training questions: its mean reward beside its accuracy."""
    path = out / "targets.json"
    if not path.exists():
        return ""
    lines = ["### the search, on training questions", "", "| kind | best plan | mean reward | accuracy | tokens/run |", "|---|---|---|---|---|"]
    for group, t in json.loads(path.read_text())["groups"].items():
        best = t["ranking"][0]
        lines.append(f"| {group} | {best['name']} | {best['mean_reward']:.2f} | {100 * best['accuracy']:.0f} % | {best['tokens']:,.0f} |")
    return "\n".join(lines)


def fidelity_text(fid: Optional["Fidelity"], bar: float) -> str:
    if fid is None:
        return ""
    worst = sorted(fid.per_group.items(), key=lambda kv: kv[1][0] / max(1, kv[1][1]))[:5]
    return "\n".join(["### copy fidelity", "",
                      f"The conductor writes its target plan on {fid.matched} of {fid.n} training questions ({100 * fid.share:.1f} %; "
                      f"the bar is {100 * bar:.0f} %) after {fid.epochs} epoch(s) of the copy. Lowest kinds: "
                      + ", ".join(f"{g} {m}/{n}" for g, (m, n) in worst) + "."])


def verdict_text(verdict: Optional["Verdict"]) -> str:
    if verdict is None:
        return ""
    lines = ["### what the fit ships", "", f"**{verdict.ship}**: {verdict.why}.", ""]
    for label, m in (("vs the lookup as shipped", verdict.vs_lookup), ("vs the per-task lookup", verdict.vs_per_task_lookup),
                     ("vs the best single worker", verdict.vs_best_single)):
        if m is not None:
            lines.append(f"- conductor {label} ({m.against}): {m.text()}")
    return "\n".join(lines)


def full_report(out: Path, evaluation: str, reward: "RewardSettings", fid: Optional["Fidelity"], bar: float,
                verdict: Optional["Verdict"]) -> str:
    parts = [verdict_text(verdict), fidelity_text(fid, bar), evaluation, search_table(out), reading_guide(reward)]
    return "\n\n".join(p.strip() for p in parts if p.strip()) + "\n"


def model_card(pool: str, settings: dict, record: dict, report: str, verdict: Optional["Verdict"]) -> str:
    """``README.md`` beside the weights: what the checkpoint is, for which pool, how it was made, and how it did."""
    ship = ""
    if verdict is not None and verdict.ship == "lookup":
        where = "" if pool == "default" else f"--pool {pool} "
        ship = (f"\n**Not recommended for this pool**: {verdict.why}. Use the lookup instead: "
                f"`conductor ask {where}--policy lookup:{verdict.lookup} \"QUESTION\"`.\n")
    shown = {k: v for k, v in settings.items() if v not in (None, [], "")}
    return "\n".join([
        "---", "library_name: openconductor", "tags: [openconductor, conductor, workflow-planner]", "---", "",
        f"# openconductor conductor for pool `{pool}`", "",
        "A small language model that writes a workflow (which workers of the pool answer, with which instructions, seeing "
        "which earlier steps) for each question. Made by `conductor fit`: the pool's workers were profiled, candidate plans "
        "searched per kind of question on training questions, the best plan per question copied into this model (supervised), "
        f"optionally refined with GRPO (`from`: {record.get('from', '?')}). It plans only for this pool's workers "
        f"({', '.join(settings.get('workers', [])) or 'see openconductor.json'}).",
        ship,
        "Use it: set `[conductor] checkpoint` in the pool file to this folder, then `conductor ask --pool POOL \"QUESTION\"` or serve it.",
        "", "## fit settings", "", "```json", json.dumps(shown, indent=1, default=str), "```", "",
        "## report", "", report.strip(), ""])
