"""Ids that follow the names in the reasoning line (``ids_follow_names``): a conductor that says whom it
picks cannot write another worker's id, on the token automaton (training rollouts, transformers engine),
after parsing (grammar backends), in the reward and in the LM policy; and the setting is refused where no
names are shown."""

from __future__ import annotations

import json
import random

import pytest

from openconductor.workflow import WorkflowFormat, bind_named, named_workers, parse, parse_and_validate

NAMES = ("gpt-5", "gpt-5-mini", "atlas-pro", "c++coder", "r1.distill", "w5", "w6", "w7", "w8", "w9", "w10", "zeta-11")


def test_names_are_read_as_whole_words_longest_first_in_order_with_repeats():
    assert named_workers("hard algebra: plan gpt-5-mini, solve gpt-5, check gpt-5-mini.", NAMES) == (1, 0, 1)
    assert named_workers("solve c++coder then r1.distill", NAMES) == (3, 4)  # regex characters in names are literal
    assert named_workers("xgpt-5 and gpt-5x and atlas are no workers", NAMES) == ()  # gpt-5x: as near gpt-5 as gpt-5-mini


def test_a_near_miss_names_the_one_worker_it_is_nearest():
    pool = ("summit-ultra", "zenith-ultra-7", "swift-mini", "swift-3b", "warden-check")
    # a conflation, a cut at the line's bound, another size of a stem the pool has once
    assert named_workers("plan summit-ultra-7, check zenith-ultr", pool) == (0, 1)
    assert named_workers("solve warden-1b, check warden-check", pool) == (4, 4)
    assert named_workers("solve swift-mini then swift-3", pool) == (2, 3)
    # no name with that first part, or two equally near: nothing bound (no stranger is picked)
    assert named_workers("solve sage-70b, check swift-1b", pool) == ()
    assert named_workers("summit and hard-won step-by-step", pool) == ()
    assert named_workers("solve zeta-11", NAMES) == (11,)
    assert named_workers("anything", ()) == ()


def test_the_automaton_binds_each_named_step_and_leaves_the_rest_free():
    fmt = WorkflowFormat(12, 3, names=NAMES, reason_chars=60, subtask_chars=8)
    good = 'Reasoning: solve zeta-11, check gpt-5\nmodel_id = [11, 0, 7]\nsubtasks = ["abc", "def", "ghi"]\naccess_list = [[], ["all"], []]'
    assert fmt.complete(fmt.advance(fmt.start(), good))
    for wrong in ("[1, 0, 7]", "[11, 2, 7]", "[1"):  # "1" alone would close a step that zeta-11 (id 11) must take
        text = good.replace("[11, 0, 7]", wrong)
        assert fmt.advance(fmt.start(), text) is None, wrong
    # The same text without names bound is admitted, and a reasoning line that names nobody binds nothing.
    assert WorkflowFormat(12, 3, reason_chars=60, subtask_chars=8).advance(WorkflowFormat(12, 3).start(), good.replace("[11, 0, 7]", "[1, 0, 7]"))
    anon = 'Reasoning: one solver\nmodel_id = [4]\nsubtasks = ["abc"]\naccess_list = [[]]'
    assert fmt.complete(fmt.advance(fmt.start(), anon))


def test_random_walks_under_bound_names_never_dead_end_and_write_the_named_ids():
    alphabet = ["\n"] + [chr(c) for c in range(32, 127)]
    rng = random.Random(1)
    fmt = WorkflowFormat(12, 3, names=NAMES, fine_grained=True, reason_chars=60, subtask_chars=4)
    bound = 0
    for _ in range(120):
        named = [rng.randrange(12) for _ in range(rng.randrange(0, 4))]
        line = "Reasoning: " + ", ".join(f"use {NAMES[i]}" for i in named) if named else "Reasoning: pick"
        state, text = fmt.advance(fmt.start(), line), line
        assert state is not None
        while not fmt.complete(state):
            options = [c for c in alphabet if fmt.advance(state, c) is not None]
            assert options, f"dead end after {text!r}"
            ch = rng.choice([c for c in options if not c.isalpha()] or options) if rng.random() < 0.7 else rng.choice(options)
            state, text = fmt.advance(state, ch), text + ch
        workflow = parse_and_validate(text, 12, max_steps=3)
        ids = [s.worker for s in workflow.steps]
        said = named_workers(workflow.reasoning, NAMES)  # the walk may go on writing the line after ours
        assert ids[: len(said)] == list(said[: len(ids)]), text
        bound += bool(said)
    assert bound >= 60  # most walks named someone: the check above is not vacuous


def test_a_plan_decoded_without_the_automaton_is_bound_after_parsing():
    plan = parse('Reasoning: hard geometry: plan atlas-pro, solve gpt-5\nmodel_id = [0, 5, 1]\nsubtasks = ["a", "b", "c"]\naccess_list = [[], ["all"], ["all"]]')
    bound = bind_named(plan, NAMES)
    assert [s.worker for s in bound.steps] == [2, 0, 1]  # the third step was not named: kept as written
    assert [s.subtask for s in bound.steps] == ["a", "b", "c"] and bound.reasoning == plan.reasoning
    assert bind_named(plan, ()) == plan


def test_ids_follow_names_needs_a_prompt_that_shows_names(tmp_path):
    from openconductor.train.config import TrainConfigError, load_train_config

    with pytest.raises(TrainConfigError, match="ids_follow_names.*show = \"ids\""):
        load_train_config("examples/train_sim_general.toml", {"prompt.show": "ids"})
    assert load_train_config("examples/train_sim_general.toml").prompt.ids_follow_names


async def test_the_reward_runs_the_workers_the_reasoning_names():
    from openconductor.pool import Pool, load_pool
    from openconductor.train.config import RewardSettings
    from openconductor.train.reward import score_completion

    spec = load_pool("examples/pools/simulated_paper_v3.toml")
    names = [w.name for w in spec.workers]
    text = f'Reasoning: solve {names[2]}\nmodel_id = [0]\nsubtasks = ["Solve the task."]\naccess_list = [[]]'
    async with Pool(spec.for_execution()) as pool:
        free = await score_completion(text, question="What is 2+2?", reference="4", task="simulated", pool=pool,
                                      settings=RewardSettings(), max_steps=3)
        bound = await score_completion(text, question="What is 2+2?", reference="4", task="simulated", pool=pool,
                                       settings=RewardSettings(), max_steps=3, names=names)
    assert free.workers == [names[0]] and bound.workers == [names[2]]


async def test_the_lm_policy_binds_a_trained_conductors_ids_to_the_names_it_gives(tmp_path, monkeypatch):
    """The policy hands the names to the decoder's format, and binds a plan that comes back unbound (as from
    a grammar backend). The checkpoint's model is replaced by a test double that always writes one plan."""
    from openconductor.policies.base import PlanRequest, make_policy
    from openconductor.pool import Pool, PoolSpec, load_pool
    from openconductor.providers.transformers_local import TransformersProvider
    from openconductor.records import Completion, Usage

    spec = load_pool("examples/pools/simulated_paper_v3.toml")
    names = [w.name for w in spec.workers]
    plan = f'Reasoning: plan {names[3]}, solve {names[1]}\nmodel_id = [0, 0]\nsubtasks = ["Plan it.", "Solve it."]\naccess_list = [[], ["all"]]'
    formats = []

    def scripted(self, messages, max_tokens, temperature, seed, fmt=None):
        formats.append(fmt)
        return Completion(text=plan, usage=Usage(input_tokens=1, output_tokens=1), finish_reason="stop", model="scripted")

    monkeypatch.setattr(TransformersProvider, "_generate", scripted)
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    manifest = {"format": "openconductor-conductor/1", "kind": "full",
                "prompt": {"show": "descriptions", "max_steps": 3, "style": "compact", "examples": False}}
    for follow, expected in ((True, [3, 1]), (False, [0, 0])):
        manifest["prompt"]["ids_follow_names"] = follow
        (ckpt / "openconductor.json").write_text(json.dumps(manifest))
        conductor = spec.conductor.model_copy(update={"checkpoint": str(ckpt)})
        pool_spec = PoolSpec.model_validate({**spec.model_dump(), "conductor": conductor.model_dump()})
        async with Pool(pool_spec) as pool:
            result = await make_policy("conductor").plan(PlanRequest("What is 2+2?", pool, max_steps=3))
        assert [s.worker for s in result.workflow.steps] == expected, (follow, result.record.errors)
        assert formats[-1].names == (tuple(names) if follow else ())


def test_a_slot_word_must_be_followed_by_a_whole_name_of_the_pool_even_past_the_lines_bound():
    from openconductor.train.sim_general_search import _ROLE_WORDS
    from openconductor.workflow import NAME_SLOTS

    assert set(_ROLE_WORDS.values()) <= set(NAME_SLOTS)  # every role word the copy targets write is a slot
    fmt = WorkflowFormat(3, 3, reason_chars=40, names=("atlas-pro", "atlas-pro-2", "ember-1b"), name_slots=True)
    at = fmt.advance(fmt.start(), "Reasoning: hard algebra: plan ")
    assert fmt.advance(at, "spico") is None and fmt.advance(at, "atlas-pr\n") is None and fmt.advance(at, "atlas-pro-3") is None
    assert fmt.advance(at, "atlas-pro, check ember-1b\n") is not None and fmt.advance(at, "atlas-pro-2\n") is not None
    # the line is 36 of its 40 characters long: the name after "check" is finished all the same, then the line ends
    late = fmt.advance(fmt.start(), "Reasoning: hard algebra: plan atlas-pro, check ")
    assert fmt.advance(late, "atlas-pro-2\n") is not None and fmt.advance(late, "atlas-pro-2, x") is None
    assert len("Reasoning: hard algebra: plan atlas-pro, check atlas-pro-2\n") <= fmt.max_chars()
    # words that are not slots stay free; without name_slots (or names) nothing is constrained
    assert fmt.advance(fmt.start(), "Reasoning: solver spico and checks\n") is not None
    free = WorkflowFormat(3, 3, reason_chars=40, names=fmt.names)
    assert free.advance(free.start(), "Reasoning: plan spico\n") is not None and free.max_chars() < fmt.max_chars()


def test_the_slot_carried_in_the_state_reads_lines_as_the_slot_pattern_does():
    """The automaton keeps the name begun after a slot word in its state; a line is admitted exactly when, at each
    character, the text after the last slot word (found by the pattern over the whole line) is a start of a name."""
    import random
    import re

    from openconductor.workflow import NAME_SLOTS

    names = ("atlas-pro", "atlas-pro-2", "ember-1b", "plan")
    slot = re.compile(rf"(?:^|[\s,:;])(?:{'|'.join(NAME_SLOTS)}) ([^\s,]*)$")

    def admitted(line: str) -> bool:
        for k in range(len(line)):
            m = slot.search(line[:k])
            if m and not any(n.startswith(m.group(1) + line[k]) for n in names):
                if m.group(1) not in names or line[k] not in ", ":
                    return False
        return True

    fmt = WorkflowFormat(4, 3, reason_chars=200, names=names, name_slots=True)
    pieces = ["plan ", "check ", "solve", " ", ",", ":", "atlas-pro", "-2", "ember-1b", "x", "plan", "implement "]
    rng = random.Random(0)
    for _ in range(3000):
        line = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 7))).lstrip()
        state = fmt.advance(fmt.start(), "Reasoning: " + line)
        assert (state is not None) == admitted(line), line


def test_name_slots_without_ids_following_names_is_refused(tmp_path):
    from openconductor.train.config import TrainConfigError, load_train_config

    with pytest.raises(TrainConfigError, match="name_slots"):
        load_train_config("examples/train_sim_general.toml", {"prompt.ids_follow_names": False, "prompt.name_slots": True})


def test_a_near_miss_prefers_the_name_in_other_case_and_the_whole_name_a_word_continues():
    pool = ("gpt-4o", "gpt-4o-mini", "claude-3-haiku")
    assert named_workers("a gpt-4o-based plan, then Gpt-4o solves", pool) == (0, 0)
    assert named_workers("solve gpt-4o-mini-2", pool) == (1,)


def test_bounded_formats_with_name_slots_fit_their_token_budget():
    names = tuple(f"worker-with-a-long-name-{i}" for i in range(4))
    for budget in (384, 512, 768, 1024):
        fmt = WorkflowFormat.bounded(4, 5, budget, names=names, name_slots=True)
        assert fmt.max_chars() + 1 <= budget


def test_rank_aliases_name_the_workers_of_each_place_in_the_measured_ranking_and_bind_like_names():
    from openconductor.conductor.ranking import area_keys, rank_aliases, ranking
    from openconductor.sim.pools import generate_pool, pool_spec

    spec = pool_spec(generate_pool(905))
    names = tuple(w.name for w in spec.workers)
    aliases = dict(rank_aliases(spec))
    assert {w.split("#")[0] for w in aliases} == {"math", "knowledge", "quantitative", "coding"}
    # "math#1" is the first name of the ranking's math line, "coding#2" the second of its coding line
    lines = {line.split(": ")[0]: [e.rsplit(" ", 1)[0] for e in line.split(": ")[1].split(", ")] for line in ranking(spec)[1:]}
    assert names[aliases["math#1"]] == lines["math"][0] and names[aliases["coding#2"]] == lines["coding"][1]
    assert area_keys(["quantitative reasoning", "quantitative finance", "math"]) == {
        "quantitative reasoning": "quantitative-reasoning", "quantitative finance": "quantitative-finance", "math": "math"}
    line = f"hard geometry: plan math#1, implement {names[4]}, check math#2"
    assert named_workers(line, names, aliases) == (aliases["math#1"], 4, aliases["math#2"])
    assert named_workers("math#10 and xmath#1 name nobody", names, aliases) == ()
    text = f'Reasoning: {line}\nmodel_id = [0, 0, 0]\nsubtasks = ["a plan", "follow it", "check it"]\naccess_list = [[], ["all"], ["all"]]'
    bound = parse_and_validate(text, len(names), max_steps=3, names=names, aliases=tuple(aliases.items()))
    assert [s.worker for s in bound.steps] == [aliases["math#1"], 4, aliases["math#2"]]
    # The automaton: the ids are forced to the aliased workers, and a slot word admits an alias, whole.
    fmt = WorkflowFormat(len(names), 3, reason_chars=80, names=names, name_slots=True, aliases=tuple(aliases.items()))
    at = fmt.advance(fmt.start(), f"Reasoning: {line}\nmodel_id = [")
    assert fmt.advance(at, str(aliases["math#1"])) is not None
    assert fmt.advance(at, str((aliases["math#1"] + 1) % len(names))) is None
    slot = fmt.advance(fmt.start(), "Reasoning: easy algebra: solve ")
    assert fmt.advance(slot, "coding#3\n") is not None and fmt.advance(slot, "coding#4") is None


def test_rank_alias_targets_parse_back_to_the_searched_plan_on_a_renamed_pool():
    from openconductor.conductor.ranking import rank_aliases
    from openconductor.workflow.wordings import CHECK, IMPLEMENT, PLAN
    from openconductor.sim.pools import area_ranking, generate_pool, pool_spec, renamed
    from openconductor.sim.world_v3 import make_questions
    from openconductor.train.sim_general_search import target
    from openconductor.workflow import Step, Workflow

    spec = renamed(pool_spec(generate_pool(10_003)), random.Random(0))
    names = tuple(w.name for w in spec.workers)
    question = next(q for q in make_questions(48, 0) if q.domain == "math")
    best, second = area_ranking(spec)["math"][:2]
    outside = next(i for i in range(len(names)) if i not in area_ranking(spec)["math"][:3])
    plan = Workflow((Step(best, PLAN, ()), Step(outside, IMPLEMENT, "all"), Step(second, CHECK, "all")))
    text = target(plan, spec, question, rank_aliases=True)
    assert "plan math#1" in text and f"implement {names[outside]}" in text and "check math#2" in text
    assert target(plan, spec, question).count("#") == 0  # without the setting, names as before
    again = parse_and_validate(text, len(names), max_steps=3, names=names, aliases=rank_aliases(spec))
    assert [s.worker for s in again.steps] == [best, outside, second]


def test_rank_aliases_need_the_profile_prompt_and_names_binding():
    from openconductor.train.config import TrainConfigError, load_train_config

    with pytest.raises(TrainConfigError, match="rank_aliases.*show = \"profile\" or \"ranking\""):
        load_train_config("examples/train_sim_general.toml", {"prompt.rank_aliases": True})
    for show in ("profile", "ranking"):
        cfg = load_train_config("examples/train_sim_general.toml", {"prompt.rank_aliases": True, "prompt.show": show})
        assert cfg.prompt.rank_aliases and cfg.prompt.show == show


def test_a_conductors_manifest_decides_what_its_ids_are_bound_to():
    from openconductor.conductor.manifest import PromptInfo
    from openconductor.conductor.ranking import binding, rank_aliases
    from openconductor.pool import load_pool

    spec = load_pool("examples/pools/simulated_paper_v3.toml")
    names = tuple(w.name for w in spec.workers)
    assert binding(PromptInfo(show="ids", ids_follow_names=True), spec) == ((), ())
    assert binding(PromptInfo(show="descriptions"), spec) == ((), ())
    assert binding(PromptInfo(show="descriptions", ids_follow_names=True), spec) == (names, ())
    assert binding(PromptInfo(show="profile", ids_follow_names=True, rank_aliases=True), spec) == (names, rank_aliases(spec))
