"""A workflow's data: ``Step`` and ``Workflow``, the typed errors of a bad plan, and the literal parts of the
three-list text that ``Workflow.render`` writes (``format.py`` reads and writes the same parts)."""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Literal, Union

from ..records import WorkflowRecord

Access = Union[Literal["all"], tuple[int, ...]]

DEFAULT_MAX_STEPS = 5


# --------------------------------------------------------------------------------------------- errors


class WorkflowError(ValueError):
    """A conductor output that is not a usable workflow. ``code`` is stable for logs and metrics."""

    code = "invalid_workflow"


class WorkflowParseError(WorkflowError):
    code = "unparseable"


class EmptyWorkflowError(WorkflowError):
    code = "empty"


class LengthMismatchError(WorkflowError):
    code = "length_mismatch"


class UnknownWorkerError(WorkflowError):
    code = "unknown_worker"


class BadAccessError(WorkflowError):
    """A forward, self or out-of-range reference in an access list."""

    code = "bad_access"


class TooManyStepsError(WorkflowError):
    code = "too_many_steps"


def _normalise_access(value, index: int) -> Access:
    if value == "all" or value == ["all"] or value == ("all",):
        return "all" if index > 0 else ()
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise WorkflowParseError(f"step {index}: access must be \"all\" or a list of step indices, got {value!r}")
    out = []
    for item in value:
        if isinstance(item, str) and re.fullmatch(r"\s*-?\d+\s*", item):
            item = int(item)
        if isinstance(item, str) and item.strip().lower() == "all":
            return "all" if index > 0 else ()
        if not isinstance(item, int) or isinstance(item, bool):
            raise WorkflowParseError(f"step {index}: access list entries must be step indices, got {item!r}")
        out.append(item)
    return tuple(dict.fromkeys(out))  # a repeated index shows that step once (small models repeat them)



# ----------------------------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Step:
    worker: int
    subtask: str
    access: Access = ()

    def visible(self, index: int) -> tuple[int, ...]:
        """Indices of the earlier steps this step sees, given its own position."""
        if self.access == "all":
            return tuple(range(index))
        return tuple(self.access)


@dataclass(frozen=True)
class Workflow:
    steps: tuple[Step, ...]
    reasoning: str = ""

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def is_accept(self) -> bool:
        """Three empty lists from a recursive round: keep the previous answer."""
        return not self.steps

    def to_dict(self) -> dict:
        return {
            "reasoning": self.reasoning,
            "steps": [
                {"worker": s.worker, "subtask": s.subtask, "access": s.access if s.access == "all" else list(s.access)}
                for s in self.steps
            ],
        }

    def to_record(self) -> WorkflowRecord:
        """The workflow as a plan records it (``PlanRecord.workflow``)."""
        return WorkflowRecord.model_validate(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict) -> "Workflow":
        steps: list[Step] = []
        for raw in data.get("steps", []):
            access = raw.get("access", [])
            steps.append(Step(int(raw["worker"]), str(raw["subtask"]), _normalise_access(access, len(steps))))
        return cls(tuple(steps), reasoning=str(data.get("reasoning", "")))

    def render(self) -> str:
        """The paper's three-list text as ``WorkflowFormat`` writes it; ``parse(render(w))`` gives back ``w``.

        A one-line reasoning that starts with "Reasoning: " and subtasks within the format's characters give
        exactly what the conductor's grammar admits (the format warm-up's targets are made this way).
        """
        return self._rendered

    @functools.cached_property
    def _rendered(self) -> str:  # a workflow is immutable: a policy that plans it for every request renders it once
        ids = ", ".join(str(s.worker) for s in self.steps)
        subtasks = ", ".join(json.dumps(s.subtask) for s in self.steps)
        access = ", ".join('["all"]' if s.access == "all" else json.dumps(list(s.access)) for s in self.steps)
        lists = f"{FORMAT_IDS}{ids}{FORMAT_SUBTASKS}{subtasks}{FORMAT_ACCESS}{access}{FORMAT_END}"
        return f"{self.reasoning.strip()}\n{lists}" if self.reasoning.strip() else lists


# --------------------------------------------------------------------------------------------- format

# The literal parts of the three-list text, shared by render(), the grammar and the automaton below.
FORMAT_REASON = "Reasoning: "
FORMAT_IDS = "model_id = ["
FORMAT_SUBTASKS = "]\nsubtasks = ["
FORMAT_ACCESS = "]\naccess_list = ["
FORMAT_END = "]"
FORMAT_SEP = ", "
LIST_NAMES = ("model_id", "subtasks", "access_list")
