import pytest

from openconductor.workflow import (
    BadAccessError,
    EmptyWorkflowError,
    LengthMismatchError,
    Step,
    TooManyStepsError,
    UnknownWorkerError,
    Workflow,
    WorkflowParseError,
    parse,
    parse_and_validate,
    validate,
)

PAPER_EXAMPLE = """I will have a strong model design the algorithm and another implement it.
model_id = [2, 0]
subtasks = ["Design an efficient algorithm for the problem", "Implement the algorithm described by the previous agent in Python"]
access_list = [[], ["all"]]
"""


def test_paper_example():
    wf = parse_and_validate(PAPER_EXAMPLE, n_workers=3)
    assert [s.worker for s in wf.steps] == [2, 0]
    assert wf.steps[0].access == ()
    assert wf.steps[1].access == "all"
    assert wf.steps[1].subtask.startswith("Implement the algorithm")
    assert wf.reasoning.startswith("I will have a strong model")
    assert wf.steps[1].visible(1) == (0,)


def test_messy_output_with_think_fences_bullets_and_curly_quotes():
    text = """<think>model_id = [9, 9] is wrong, let me think again</think>
Sure! Here is the plan:
```python
- Model IDs: [1, 1, 0]
- Subtask = [“Solve it”, 'Check the solution, don't skip steps', "Write the final answer"]
- Access list: [[], "all", [0, 1]]
```"""
    wf = parse_and_validate(text, n_workers=2)
    assert [s.worker for s in wf.steps] == [1, 1, 0]
    assert wf.steps[1].subtask == "Check the solution, don't skip steps"
    assert wf.steps[1].access == "all"
    assert wf.steps[2].access == (0, 1)


def test_code_in_a_subtask_keeps_its_fence_when_the_plan_is_not_canonical():
    # A free-form plan (no reasoning line, so not the canonical form) handing code to a tool worker:
    # the fence inside the subtask string is the code's, not the plan's wrapping.
    text = 'model_id = [0]\nsubtasks = ["Run it:\\n```python\\nprint(6 * 7)\\n```"]\naccess_list = [[]]'
    assert parse_and_validate(text, n_workers=1).steps[0].subtask == "Run it:\n```python\nprint(6 * 7)\n```"
    # Labels in backticks still parse (from the cleaned text).
    labelled = "`model_id` = [0]\n`subtasks` = ['Solve it']\n`access_list` = [[]]"
    assert parse_and_validate(labelled, n_workers=1).steps[0].subtask == "Solve it"
    # The last labelled lists still win over a draft, even when only the final ones have backticks.
    drafted = "Draft: model_id = [1]\nsubtasks = ['Guess']\naccess_list = [[]]\n" + labelled
    assert parse_and_validate(drafted, n_workers=2).steps[0] == parse_and_validate(labelled, n_workers=2).steps[0]


def test_json_fallback_single_quotes_and_comma_split():
    text = "model_id: ['0', '1']\nsubtasks: [plan the answer, write the answer]\naccess_list: [[], ['all']]"
    wf = parse_and_validate(text, n_workers=2)
    assert [s.worker for s in wf.steps] == [0, 1]
    assert [s.subtask for s in wf.steps] == ["plan the answer", "write the answer"]


def test_all_on_first_step_means_nothing_and_bare_all_string():
    wf = parse_and_validate('model_id = [0, 0]\nsubtasks = ["a", "b"]\naccess_list = ["all", "all"]', n_workers=1)
    assert wf.steps[0].access == ()
    assert wf.steps[1].access == "all"


def test_last_labelled_lists_win_over_drafts_in_reasoning():
    text = (
        "Draft: model_id = [5]\nsubtasks = ['x']\naccess_list = [[]]\nOn reflection, better:\n"
        "model_id = [1]\nsubtasks = ['y']\naccess_list = [[]]"
    )
    wf = parse_and_validate(text, n_workers=2)
    assert wf.steps == (Step(1, "y", ()),)


def test_json_object_form():
    text = '{"reasoning": "one step", "steps": [{"worker": 1, "subtask": "solve", "access": []}, {"worker": 0, "subtask": "check", "access": "all"}]}'
    wf = parse_and_validate(text, n_workers=2)
    assert [s.access for s in wf.steps] == [(), "all"]
    assert wf.reasoning == "one step"


def test_render_round_trips():
    wf = Workflow((Step(0, 'Say "hi"', ()), Step(1, "it's fine", "all"), Step(0, "pick", (0,))), reasoning="because")
    assert parse(wf.render()) == wf
    assert Workflow.from_dict(wf.to_dict()) == wf


@pytest.mark.parametrize(
    "text,error,fragment",
    [
        ("no plan here", WorkflowParseError, "no workflow found"),
        ("", WorkflowParseError, "no text"),
        ('model_id = [0]\nsubtasks = ["a"]', WorkflowParseError, "access_list"),
        ('model_id = [0, 1]\nsubtasks = ["a"]\naccess_list = [[], []]', LengthMismatchError, "model_id has 2, subtasks 1"),
        ("model_id = []\nsubtasks = []\naccess_list = []", EmptyWorkflowError, "no steps"),
        ('model_id = [3]\nsubtasks = ["a"]\naccess_list = [[]]', UnknownWorkerError, "model id 3"),
        ('model_id = [0, 0]\nsubtasks = ["a", "b"]\naccess_list = [[], [1]]', BadAccessError, "itself"),
        ('model_id = [0, 0]\nsubtasks = ["a", "b"]\naccess_list = [[1], []]', BadAccessError, "later step"),
        ('model_id = [0]\nsubtasks = ["a"]\naccess_list = [[-1]]', BadAccessError, "indices start at 0"),
        ('model_id = ["x"]\nsubtasks = ["a"]\naccess_list = [[]]', WorkflowParseError, "integer"),
        ('model_id = [0]\nsubtasks = [""]\naccess_list = [[]]', WorkflowParseError, "empty subtask"),
    ],
)
def test_validation_errors(text, error, fragment):
    with pytest.raises(error) as info:
        parse_and_validate(text, n_workers=2)
    assert fragment in str(info.value)


def test_negative_reference_on_later_step():
    with pytest.raises(BadAccessError, match="indices start at 0"):
        parse_and_validate('model_id = [0, 0]\nsubtasks = ["a", "b"]\naccess_list = [[], [-1]]', n_workers=1)


def test_too_many_steps_is_configurable():
    wf = Workflow(tuple(Step(0, f"s{i}", ()) for i in range(6)))
    with pytest.raises(TooManyStepsError, match="6 steps; at most 5"):
        validate(wf, n_workers=1)
    assert validate(wf, n_workers=1, max_steps=6) is wf


def test_empty_lists_accepted_in_recursive_rounds():
    wf = parse_and_validate("Looks right.\nmodel_id = []\nsubtasks = []\naccess_list = []", 2, allow_empty=True)
    assert wf.is_accept


def test_error_codes_are_stable():
    assert UnknownWorkerError.code == "unknown_worker"
    assert WorkflowParseError.code == "unparseable"


def test_repeated_access_indices_are_kept_once_in_order():
    wf = parse('model_id = [0, 1, 1]\nsubtasks = ["a", "b", "c"]\naccess_list = [[], [0, 0], [1, 0, 1, 1]]')
    assert [s.access for s in wf.steps] == [(), (0,), (1, 0)]


def test_format_automaton_has_no_dead_ends_and_every_string_it_admits_is_valid():
    """Random walks over the characters the format allows: each reaches a complete, valid workflow."""
    import random

    from openconductor.workflow import WorkflowFormat, parse_and_validate

    alphabet = ["\n"] + [chr(c) for c in range(32, 127)]
    rng = random.Random(0)
    for fmt in (WorkflowFormat(3, 4, fine_grained=True, reason_chars=6, subtask_chars=5),
                WorkflowFormat(12, 3, allow_empty=True, reason_chars=4, subtask_chars=4),
                WorkflowFormat(1, 1, reason_chars=3, subtask_chars=3)):
        for _ in range(150):
            state, text = fmt.start(), ""
            while not fmt.complete(state):
                options = [c for c in alphabet if fmt.advance(state, c) is not None]
                assert options, f"dead end after {text!r}"
                # Prefer structure characters so walks end quickly.
                ch = rng.choice([c for c in options if not c.isalpha()] or options) if rng.random() < 0.7 else rng.choice(options)
                state, text = fmt.advance(state, ch), text + ch
            wf = parse_and_validate(text, fmt.n_workers, max_steps=fmt.max_steps, allow_empty=fmt.allow_empty)
            assert len(wf) <= fmt.max_steps


@pytest.mark.parametrize("fine_grained", [False, True])
def test_digits_outside_ascii_are_refused_by_the_format_not_crashed_on(fine_grained):
    """A vocabulary holds tokens such as "²" or "٣" that str.isdigit() accepts and int() may not: at every point of a
    plan the automaton refuses them (a constrained sampler tries every token when its pick is refused), and a plan
    that writes one is a parse error."""
    from openconductor.workflow import WorkflowFormat

    fmt = WorkflowFormat(3, 3, fine_grained=fine_grained, reason_chars=40, subtask_chars=40)
    plan = Workflow((Step(2, "Design the algorithm for it", ()), Step(0, "Implement the design in Python", (0,) if fine_grained else "all")),
                    reasoning="plan")
    state, text = fmt.start(), "Reasoning: " + plan.render()
    for ch in text:
        for odd in ("²", "٣", "①", "½", "𝟐"):
            assert fmt.advance(state, odd) is None
        state = fmt.advance(state, ch)
        assert state is not None, text
    assert fmt.complete(state)
    with pytest.raises(WorkflowParseError):
        parse('model_id = [²]\nsubtasks = ["Solve the task please"]\naccess_list = [[]]')
