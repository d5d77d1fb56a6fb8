"""The conductor's grammar is bounded: its longest plan fits in max_tokens, and that plan parses."""

import re

import pytest

from openconductor.workflow import WorkflowFormat, parse_and_validate


def workflow_grammar(n_workers: int, steps: int, *, fine_grained: bool = False, max_tokens: int = 512) -> str:
    return WorkflowFormat.bounded(n_workers, steps, max_tokens, fine_grained=fine_grained).grammar()


def longest_plan(n_workers: int, steps: int, max_tokens: int, fine_grained: bool) -> str:
    """The longest text the grammar admits, built from its own rules' limits, not from the bound formula."""
    grammar = workflow_grammar(n_workers, steps, fine_grained=fine_grained, max_tokens=max_tokens)
    reason = int(re.search(r"reason ::= \S+\{1,(\d+)\}", grammar).group(1))
    # A subtask is one non-space character, then up to the rule's bound of any string characters.
    subtask = 1 + int(re.search(r'str ::= .*\{\d+,(\d+)\}', grammar).group(1))
    worker = str(n_workers - 1)

    def access(k):
        options = ["[]"] + (['["all"]'] if k else [])
        if fine_grained and k:
            options.append("[" + ", ".join(str(j) for j in range(k)) + "]")
        return max(options, key=len)

    return (
        "Reasoning: " + "r" * reason + "\n"
        + "model_id = [" + ", ".join([worker] * steps) + "]\n"
        + "subtasks = [" + ", ".join(['"' + "s" * subtask + '"'] * steps) + "]\n"
        + "access_list = [" + ", ".join(access(k) for k in range(steps)) + "]"
    )  # fmt: skip


@pytest.mark.parametrize("n_workers,steps,max_tokens,fine", [(3, 3, 512, True), (4, 3, 512, False), (12, 5, 768, True), (2, 1, 96, True)])
def test_the_longest_admitted_plan_fits_the_budget_and_parses(n_workers, steps, max_tokens, fine):
    text = longest_plan(n_workers, steps, max_tokens, fine)
    assert len(text) == WorkflowFormat.bounded(n_workers, steps, max_tokens, fine_grained=fine).max_chars()
    assert len(text.encode()) + 1 <= max_tokens  # a token is at least one byte; +1 for end-of-text
    workflow = parse_and_validate(text, n_workers, max_steps=steps)
    assert len(workflow.steps) == steps and all(len(s.subtask) == len(workflow.steps[0].subtask) for s in workflow.steps)


def test_strings_are_printable_ascii_and_every_repetition_is_bounded():
    grammar = workflow_grammar(3, 3, fine_grained=True, max_tokens=512)
    assert "*" not in grammar and "+" not in grammar  # no unbounded repetition anywhere
    assert r"[\x20\x21\x23-\x5B\x5D-\x7E]" in grammar  # no quote, no backslash, no newline, no non-ASCII


def test_a_budget_too_small_for_the_steps_is_a_clear_error():
    fmt = WorkflowFormat.bounded(3, 3, 512, fine_grained=True)
    reason, subtask = fmt.reason_chars, fmt.subtask_chars
    assert (reason, subtask) == (80, 112)  # (512 - 1 - 93 fixed characters - 80) // 3
    with pytest.raises(ValueError, match=r"max_tokens = 120 is too small for 3 steps over 3 workers: raise it to at least \d+"):
        workflow_grammar(3, 3, max_tokens=120)


def test_the_pools_grammar_is_written_once_per_format_and_a_new_format_gets_its_own():
    from openconductor.conductor.prompt import planning_format, planning_grammar
    from openconductor.pool import PoolConfigError, load_default_pool

    spec = load_default_pool()
    first = planning_grammar(spec, 3)
    assert first == planning_format(spec, 3).grammar() and planning_grammar(spec, 3) is first
    assert planning_grammar(spec, 2) != first and planning_grammar(spec, 3, recursive=True) != first
    wider = spec.model_copy(update={"conductor": spec.conductor.model_copy(update={"max_tokens": 2048})})
    assert planning_grammar(wider, 3) != first
    tiny = spec.model_copy(update={"conductor": spec.conductor.model_copy(update={"max_tokens": 8})})
    for _ in range(2):  # an error is raised each time, not cached
        with pytest.raises(PoolConfigError, match="max_tokens"):
            planning_grammar(tiny, 3)
