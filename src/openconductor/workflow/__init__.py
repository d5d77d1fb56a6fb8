"""Workflows: the conductor's plan, its output language, its parser, its validation and its rendering.

A workflow is a list of steps; each step names a worker (an ordinal id into the pool shown to the
conductor), a natural-language subtask, and an access list: ``"all"`` (every earlier step) or a list
of earlier step indices (``[]`` = nothing earlier). The conductor writes it as three equal-length
Python lists after its reasoning (the paper's format); a JSON object form is accepted too.

``WorkflowFormat`` is the one owner of that language: the prompt's instructions about it, its length
bounds, the GBNF grammar (local decoders), the automaton (token-level decoding, training rollouts),
``Workflow.render`` and ``parse``.
"""

from .format import MIN_SUBTASK_CHARS, REASON_CHARS, SUBTASK_CHARS, FormatGrammar, WorkflowFormat
from .model import (
    DEFAULT_MAX_STEPS, FORMAT_ACCESS, FORMAT_END, FORMAT_IDS, FORMAT_REASON, FORMAT_SEP, FORMAT_SUBTASKS, LIST_NAMES, Access,
    BadAccessError, EmptyWorkflowError, LengthMismatchError, Step, TooManyStepsError, UnknownWorkerError, Workflow,
    WorkflowError, WorkflowParseError,
)
from .naming import NAME_SLOTS, bind_named, named_workers
from .parse import clean_output, parse, parse_and_validate, validate

__all__ = [
    "DEFAULT_MAX_STEPS", "FORMAT_ACCESS", "FORMAT_END", "FORMAT_IDS", "FORMAT_REASON", "FORMAT_SEP", "FORMAT_SUBTASKS",
    "LIST_NAMES", "MIN_SUBTASK_CHARS", "NAME_SLOTS", "REASON_CHARS", "SUBTASK_CHARS", "Access", "BadAccessError",
    "EmptyWorkflowError", "FormatGrammar", "LengthMismatchError", "Step", "TooManyStepsError", "UnknownWorkerError",
    "Workflow", "WorkflowError", "WorkflowFormat", "WorkflowParseError", "bind_named", "clean_output", "named_workers",
    "parse", "parse_and_validate", "validate",
]
