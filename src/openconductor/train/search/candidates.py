"""The fit's candidate workflows: one small set, built from the pool, that every task's search screens.

A search of random workflows per task costs too much on a real pool (about 1,200 runs for 6 tasks on the
offline pool); a shared set of a dozen sensible plans, screened by successive halving per task, fits. The
set is built from what the pool has, in this order (duplicates by their steps dropped, the first name kept):

1. the pool file's own fixed workflows (``[workflows.NAME]``);
2. every model alone ("ask worker i", the warm-up's solve wording);
3. with a code-running tool: the strongest model writes a program in each of the warm-up's code wordings
   and the tool runs it, then optionally the writer reads the output and answers (a program that errors
   or prints nothing then still ends in an answer a model gave);
4. solve, then check: the strongest model answers and the strongest (or the runner-up) checks;
5. with two or more capable models: both answer, the strongest combines.

"Strongest" follows the profile (each model's accuracy alone on a sample of the fit's questions) when there
is one, else the pool's own order of strength (``strongest``, then price). A model far below the strongest
(under half its profile accuracy) only appears alone: combining it costs calls and rarely helps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from ...pool import TOOL_PROVIDERS, PoolSpec
from ...workflow import Step, Workflow
from ...workflow import parse as parse_plan
from ..config import TrainConfigError
from ..warmup import PHRASES

CODE_TOOLS = ("python",)


@dataclass(frozen=True)
class Candidate:
    name: str  # how reports name it: pool:NAME, single:WORKER, code-run-1:WORKER, ...
    text: str  # the workflow as the conductor writes it (Workflow.render)

    @property
    def workflow(self) -> Workflow:
        from ...workflow import parse

        return parse(self.text)


def models(spec: PoolSpec) -> list[int]:
    """Ids of the pool's models (workers that answer: neither tools nor the conductor itself)."""
    return [i for i, w in enumerate(spec.workers) if w.provider not in TOOL_PROVIDERS and w.provider != "conductor"]


def strength_order(spec: PoolSpec, accuracy: Optional[dict[str, float]] = None) -> list[int]:
    """The pool's models, strongest first: by profile accuracy when given (ties: the pool's order of
    strength), else the declared strongest first, then by output price."""
    ids = models(spec)
    strongest = spec.strongest_index() if ids else -1
    prior = {i: (i == strongest, spec.workers[i].price_output_per_m, -i) for i in ids}
    if accuracy:
        return sorted(ids, key=lambda i: (accuracy.get(spec.workers[i].name, 0.0), prior[i]), reverse=True)
    return sorted(ids, key=lambda i: prior[i], reverse=True)


def capable(spec: PoolSpec, order: list[int], accuracy: Optional[dict[str, float]]) -> list[int]:
    """The models worth combining: within half the strongest's profile accuracy (all of them without a profile)."""
    if not accuracy or not order:
        return order
    top = accuracy.get(spec.workers[order[0]].name, 0.0)
    return [i for i in order if accuracy.get(spec.workers[i].name, 0.0) >= top / 2]


def _plan(reasoning: str, *steps: Step) -> str:
    return Workflow(tuple(steps), reasoning=f"Reasoning: {reasoning}").render()


def candidate_set(spec: PoolSpec, max_steps: int, accuracy: Optional[dict[str, float]] = None,
                  admits: Callable[[str], bool] = lambda text: True) -> list[Candidate]:
    """The candidates for ``spec`` (see the module docstring). Plans longer than ``max_steps``, and plans the
    conductor's output format does not ``admit`` (a declared subtask longer than its bound), are left out."""
    order = strength_order(spec, accuracy)
    if not order:
        raise TrainConfigError(f"pool {spec.name!r} has no model to answer (only tools): add a worker that answers, a fit needs at least one")
    strong = capable(spec, order, accuracy)
    best, name = order[0], spec.workers[order[0]].name
    out = [Candidate(f"pool:{key}", _declared(fixed.resolve(spec), fixed.description)) for key, fixed in spec.workflows.items()]
    out += [Candidate(f"single:{spec.workers[i].name}", _plan("one agent answers.", Step(i, PHRASES["solve"][0], ()))) for i in order]
    runners = [i for i, w in enumerate(spec.workers) if w.provider in CODE_TOOLS]
    if runners:
        run = runners[0]
        for k, wording in enumerate(PHRASES["code"], 1):
            write = Step(best, wording, ())
            out.append(Candidate(f"code-run-{k}:{name}", _plan("the answer is computable: a program computes it.", write, Step(run, PHRASES["run"][0], "all"))))
            out.append(Candidate(f"code-run-answer-{k}:{name}", _plan("a program computes it; its writer reads the output and answers.",
                                                                    write, Step(run, PHRASES["run"][0], "all"), Step(best, PHRASES["answer"][0], "all"))))
    for checker in strong[:2]:
        out.append(Candidate(f"solve-check:{name}>{spec.workers[checker].name}",
                             _plan("one agent answers, another checks.", Step(best, PHRASES["solve"][0], ()), Step(checker, PHRASES["check"][0], "all"))))
    if len(strong) >= 2:
        a, b = strong[:2]
        out.append(Candidate(f"fan-out:{spec.workers[a].name}+{spec.workers[b].name}", _plan(
            "two independent answers, then one agent combines them.", Step(a, PHRASES["solve"][0], ()), Step(b, PHRASES["solve"][0], ()),
            Step(a, PHRASES["aggregate"][0], "all"))))
    return _distinct([c for c in out if _writable(c.workflow, c.text, max_steps, admits)])


def declared_left_out(spec: PoolSpec, max_steps: int, admits: Callable[[str], bool] = lambda text: True,
                      explain: Callable[[Workflow], Optional[str]] = lambda workflow: None) -> dict[str, str]:
    """The pool's own workflows that ``candidate_set`` leaves out or searches under another name, each with the
    reason as a clause (``explain``: the output format's ``why_not``), so that a user who declared one hears why
    the fit's reports never name it."""
    out: dict[str, str] = {}
    seen: dict[tuple, str] = {}
    for key, fixed in spec.workflows.items():
        text = _declared(fixed.resolve(spec), fixed.description)
        workflow = parse_plan(text)
        if not _writable(workflow, text, max_steps, admits):
            out[key] = (f"it has {len(workflow.steps)} steps and the conductor writes at most {max_steps}" if len(workflow.steps) > max_steps
                        else explain(workflow) or "the conductor's output format does not admit it")
        elif workflow.steps in seen:
            out[key] = f"it has the same steps as [workflows.{seen[workflow.steps]}], searched as pool:{seen[workflow.steps]}"
        else:
            seen[workflow.steps] = key
    return out


def _writable(workflow: Workflow, text: str, max_steps: int, admits: Callable[[str], bool]) -> bool:
    """Whether the conductor can write this plan: what ``candidate_set`` keeps and ``declared_left_out`` explains."""
    return len(workflow.steps) <= max_steps and admits(text)


def _declared(workflow: Workflow, description: str) -> str:
    """A pool's fixed workflow as the conductor would write it: one line of printable reasoning."""
    about = " ".join(description.encode("ascii", "ignore").decode().split())[:72].rstrip(" ;,.") or "the pool's fixed workflow"
    return Workflow(workflow.steps, reasoning=f"Reasoning: {about}.").render()


def _distinct(candidates: list[Candidate]) -> list[Candidate]:
    """The first candidate of each distinct list of steps (the reasoning line does not make a plan new)."""
    seen, out = set(), []
    for c in candidates:
        key = c.workflow.steps
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out
