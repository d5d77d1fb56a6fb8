"""openconductor: an open Conductor that writes workflows over a pool of LLMs.

    question ──policy.plan()──▶ Workflow ──executor──▶ Run ──grader──▶ reward
"""

from .budget import Limits
from .executor import solve
from .run_events import Event
from .policies import Policy, make_policy
from .pool import Pool, PoolSpec, WorkerSpec, load_default_pool, load_pool
from .records import Run, StepRecord, Usage
from .workflow import Step, Workflow, WorkflowError, parse, parse_and_validate, validate

__version__ = "0.1.0"

__all__ = [
    "Event", "Limits", "Policy", "Pool", "PoolSpec", "Run", "Step", "StepRecord", "Usage", "Workflow",
    "WorkflowError", "WorkerSpec", "load_default_pool", "load_pool", "make_policy", "parse",
    "parse_and_validate", "solve", "validate",
]
