"""The supervised warm-up's targets, drawn (format only) or selected by rejection sampling on the pool.

No model is needed: the selection runs the candidate workflows on a SIMULATED pool (labelled: two
responders that always give one answer) and grades them with the real numeric grader."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from openconductor.pool import load_pool
from openconductor.providers.simulated import RESPONDERS, register_responder
from openconductor.train.config import TrainConfigError, load_train_config
from openconductor.train.data import TrainRow, build_rows, load_items
from openconductor.train.warmup import keep_best
from openconductor.workflow import parse


def test_keep_best_keeps_the_top_scores_and_breaks_ties_by_seed():
    candidates = [["a", "b", "c", "d"], ["e", "f", "g", "h"]]
    scores = [[0.5, 1.0, 0.5, 1.0], [0.5, 0.5, 0.5, 0.5]]
    kept = keep_best(candidates, scores, 2, seed=0)
    assert sorted(kept[0]) == ["b", "d"]
    assert len(kept[1]) == 2 and set(kept[1]) <= {"e", "f", "g", "h"}
    assert keep_best(candidates, scores, 2, seed=0) == kept  # seeded: the same run keeps the same targets
    assert any(keep_best(candidates, scores, 2, seed=s)[1] != kept[1] for s in range(1, 20))  # ties are not positional


@pytest.fixture
def responders():
    """The pool's two SIMULATED answers: "right" always says 42 (the reference), the others 7."""
    register_responder("says-42")(lambda spec, messages, rng: "Final answer: 42")
    register_responder("says-7")(lambda spec, messages, rng: "Final answer: 7")
    yield
    RESPONDERS.pop("says-42", None)
    RESPONDERS.pop("says-7", None)


def _config(tmp_path: Path, warmup: str, search: str = "", extra: str = "", show: str = "ids"):
    workers = "".join(f'[[workers]]\nname = "{name}"\nprovider = "simulated"\noptions = {{ world = "{world}" }}\n'
                      for name, world in [("w0", "says-7"), ("w1", "says-7"), ("right", "says-42"), ("w3", "says-7")])
    (tmp_path / "pool.toml").write_text(f'name = "one-right"\n{workers}')
    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps({"question": f"What is 40 + 2? (variant {i})", "reference": "42", "task": "numeric"}) + "\n" for i in range(12)))
    path = tmp_path / "train.toml"
    path.write_text(f'pool = "{tmp_path / "pool.toml"}"\n[prompt]\nmax_steps = 3\nexamples = false\nshow = "{show}"\n'
                    f'[data]\nkind = "jsonl"\npath = "{data}"\nn_train = 8\nn_eval = 2\n[reward]\nstep_weight = 0.1\n[warmup_sft]\n{warmup}\n[search]\n{search}\n{extra}')
    return load_train_config(path)


def _select(cfg):
    from openconductor.train.search.warmup_targets import select_targets

    spec = load_pool(cfg.pool_path)
    rows = build_rows(cfg, spec, load_items(cfg))
    return spec, rows, *select_targets(cfg, spec, rows)


def test_selected_warmup_targets_are_the_candidates_that_answered_right(tmp_path, responders):
    _, rows, shown, targets, summary = _select(_config(tmp_path, "examples = 10\ntargets_per_prompt = 4", "candidates = 40"))
    assert len(shown) == len(targets) == 10  # examples, not prompts x targets_per_prompt (12)
    # Consecutive targets share a prompt (the warm-up reuses its forward pass), 4 per prompt.
    assert [row.question for row in shown] == [rows[i].question for i in (0, 0, 0, 0, 1, 1, 1, 1, 2, 2)]
    # A run's answer is its last step's: only plans that end with the right worker answered right, and
    # only those were kept (about a quarter of 40 random candidates end there).
    assert all(parse(t).steps[-1].worker == 2 for t in targets), targets
    # Ranked by correctness only (step_weight 0.1 is left to GRPO): longer right plans are kept too.
    assert {len(parse(t).steps) for t in targets} != {1}
    assert summary["mean_reward_kept"] == 1.0 and summary["mean_reward_candidates"] < 0.7
    assert summary["prompts"] == 3 and summary["candidates"] == 40 and summary["selection"] == "question"


def test_selection_on_randomized_pools_and_recursive_rows(tmp_path, responders):
    """Rows that show a subset of the pool (ids renumbered per row) and second-round rows: targets stay
    within each row's subset, the right worker is found through the renumbering, and only first-round
    rows are warm-up prompts (a recursive round's best move may be to accept, which no candidate is)."""
    cfg = _config(tmp_path, "examples = 24\ntargets_per_prompt = 3", "candidates = 40",
                  '[randomize]\nenabled = true\nk_min = 2\nk_max = 3\n[recursion]\nfraction = 0.5\n', show="names")
    spec, rows, shown, targets, _ = _select(cfg)
    assert any(row.round == 2 for row in rows) and all(row.round == 1 for row in shown)
    # A second-round row is shown its round as the runtime's review shows it: the steps with their verdicts.
    assert all("What the steps of that round did:\nstep 0 (" in row.prompt[-1]["content"] for row in rows if row.round == 2)
    with_right = 0
    for row, text in zip(shown, targets):
        steps = parse(text).steps
        assert all(s.worker < len(row.workers) for s in steps)
        if 2 in row.workers:  # the right worker is in this row's pool: the kept plans end with it
            with_right += 1
            assert spec.workers[row.workers[steps[-1].worker]].name == "right"
    assert with_right


def test_candidates_fewer_than_the_targets_kept_is_a_config_error(tmp_path):
    with pytest.raises(TrainConfigError, match="candidates = 0 \\(no selection\\) or >= targets_per_prompt"):
        _config(tmp_path, "examples = 8\ntargets_per_prompt = 4", "candidates = 3")
    assert _config(tmp_path, "examples = 8\ntargets_per_prompt = 4", "candidates = 0").search.candidates == 0


def test_search_settings_under_their_old_names_are_config_errors_that_give_the_new_name(tmp_path):
    with pytest.raises(TrainConfigError, match=r"warmup_sft.candidates is search.candidates now.*\[search\] table"):
        _config(tmp_path, "examples = 8\ncandidates = 16")
    with pytest.raises(TrainConfigError, match="warmup_sft.search_questions is search.questions now"):
        _config(tmp_path, "examples = 8\nsearch_questions = 16")
    with pytest.raises(TrainConfigError, match="warmup_sft.domains is search.domains now"):
        _config(tmp_path, "examples = 8", extra="[warmup_sft.domains.b]\ncandidates = 4\n")
    with pytest.raises(TrainConfigError, match="search.domains.b.search_questions is search.domains.b.questions now"):
        _config(tmp_path, "examples = 8", 'candidates = 16\nselection = "domain"\n[search.domains.b]\nsearch_questions = 4\n')
    # --set overrides are read the same way.
    with pytest.raises(TrainConfigError, match="warmup_sft.keep_within is search.keep_within now"):
        load_train_config(Path(__file__).resolve().parents[1] / "examples" / "train_cpu_smollm2.toml", {"warmup_sft.keep_within": 0.0})


def test_selection_without_a_warmup_is_a_config_error(tmp_path):
    with pytest.raises(TrainConfigError, match="examples = 0 turns the warm-up off"):
        _config(tmp_path, "examples = 0", "candidates = 16")


@pytest.fixture
def domain_experts():
    """SIMULATED workers for the domain search: "a-expert" is right on every domain-a question and
    "b-expert" on every domain-b one; "lucky" is right on one domain-a question only; "wrong" never is."""
    def says(right: bool) -> str:
        return "Final answer: 42" if right else "Final answer: 7"

    text = lambda messages: " ".join(str(m.get("content", "")) for m in messages)  # noqa: E731
    register_responder("a-expert")(lambda spec, messages, rng: says("domain-a" in text(messages)))
    register_responder("b-expert")(lambda spec, messages, rng: says("domain-b" in text(messages)))
    register_responder("lucky")(lambda spec, messages, rng: says("domain-a #1." in text(messages)))
    register_responder("wrong")(lambda spec, messages, rng: says(False))
    yield
    for name in ("a-expert", "b-expert", "lucky", "wrong"):
        RESPONDERS.pop(name, None)


def _domain_config(tmp_path: Path, warmup: str, search: str):
    workers = "".join(f'[[workers]]\nname = "{name}"\nprovider = "simulated"\noptions = {{ world = "{name}" }}\n'
                      for name in ("wrong", "lucky", "a-expert", "b-expert"))
    (tmp_path / "pool.toml").write_text(f'name = "experts"\n{workers}')
    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps({"question": f"What is 40 + 2? (domain-{d} #{i}.)", "reference": "42", "task": "numeric", "domain": d}) + "\n"
                            for i in range(12) for d in "ab"))
    path = tmp_path / "train.toml"
    path.write_text(f'pool = "{tmp_path / "pool.toml"}"\n[prompt]\nmax_steps = 3\nexamples = false\n'
                    f'[data]\nkind = "jsonl"\npath = "{data}"\nn_train = 24\nn_eval = 0\n[reward]\nstep_weight = 0.05\n[warmup_sft]\n{warmup}\n[search]\n{search}\n')
    return load_train_config(path)


def test_domain_search_keeps_each_domains_best_worker_not_one_questions_luck(tmp_path, domain_experts):
    warmup = "examples = 16\ntargets_per_prompt = 4\n"
    spec, rows, shown, targets, summary = _select(_domain_config(tmp_path, warmup, 'candidates = 60\nselection = "domain"\nquestions = 8'))
    names = [w.name for w in spec.workers]
    assert {row.domain for row in shown} == {"a", "b"}
    for row, text in zip(shown, targets):  # every kept plan ends with its domain's expert
        assert names[parse(text).steps[-1].worker] == f"{row.domain}-expert", (row.question, text)
    # The step term is part of the domain-wide rank: of plans equally right, the short ones come first
    # (candidates are drawn uniform over 1-3 steps: a mean of 2).
    kept_steps = [d["kept_steps"] for d in summary["domains"]]
    assert all(steps[0] == 1 and steps == sorted(steps) for steps in kept_steps), kept_steps
    assert sum(map(sum, kept_steps)) / sum(map(len, kept_steps)) < 1.6, kept_steps
    assert summary["selection"] == "domain" and {d["domain"] for d in summary["domains"]} == {"a", "b"}
    assert all(d["best"] == pytest.approx(0.95) for d in summary["domains"])  # right everywhere, one step
    # 11 training questions per domain: 2 screen the candidates, the other 9 (up to 8) rank the finalists.
    assert [(d["screened_on"], d["ranked_on"]) for d in summary["domains"]] == [(2, 8), (2, 8)]
    # Per question, the one question "lucky" gets right keeps its plans just as well as the expert's.
    lucky_row = next(row for row in rows if "domain-a #1." in row.question)
    _, _, shown_q, targets_q, _ = _select(_domain_config(tmp_path, warmup, "candidates = 60"))
    kept_q = {names[parse(t).steps[-1].worker] for row, t in zip(shown_q, targets_q) if row.question == lucky_row.question}
    assert "lucky" in kept_q


class _TableGrader:
    """A grader whose reward of (workflow text, question) is read off a table: no pool, no model."""

    def __init__(self, table: dict[tuple[str, str], float]):
        self.table, self.calls = table, 0

    async def workflow_reward(self, prompts, completions, question, **_):
        self.calls += len(completions)
        return [self.table.get((text, q), 0.0) for text, q in zip(completions, question)]


def test_screen_rounds_spare_a_good_plan_one_unlucky_screen_question():
    """Successive halving: "good" is right on 1 of the 2 screen questions and on every later one; three
    decoys are right on both screen questions only. One screen keeps the decoys; three rounds keep good."""
    import random

    from openconductor.train.search.screening import screen_candidates

    rows = [TrainRow(prompt=[], question=f"q{i}") for i in range(8)]
    screen, spare = rows[:2], rows[2:]
    texts = ["good", "decoy1", "decoy2", "decoy3", "bad1", "bad2", "bad3", "bad4"]
    table = {("good", "q1"): 1.0, **{("good", r.question): 1.0 for r in spare}}
    table |= {(d, q): 1.0 for d in ("decoy1", "decoy2", "decoy3") for q in ("q0", "q1")}

    def run(rounds):
        grader = _TableGrader(table)
        kept, first, _ = asyncio.run(screen_candidates(grader, texts, screen, spare, rounds=rounds, per_round=2, keep=2, rng=random.Random(0)))
        return kept, first, grader.calls

    kept, first, calls = run(1)
    assert kept == ["decoy1", "decoy2"] and first[0] == 0.5 and calls == 16
    kept, first, calls = run(3)
    assert kept[0] == "good" and first[0] == 0.5
    assert calls == 16 + 4 * 2 + 2 * 2  # 8 on the screen, then the best 4, then the best 2, each on 2 new questions


def test_rank_rounds_settle_a_close_race_on_more_questions():
    """Two finalists one question apart on the ranking: "lucky" leads on it but is right on no later
    question, "steady" is right on every later one. One ranking keeps lucky; two rounds keep steady, run
    only the better half on the new questions, and list the others after the survivors."""
    import random

    from openconductor.train.search.screening import rank_finalists

    spare = [TrainRow(prompt=[], question=f"s{i}") for i in range(8)]
    table = {("steady", r.question): 1.0 for r in spare} | {("weak", r.question): 1.0 for r in spare}
    finalists, final = ["steady", "lucky", "weak", "poor"], [0.75, 1.0, 0.25, 0.0]

    def run(rounds):
        grader = _TableGrader(table)
        ranked, scores, alive = asyncio.run(rank_finalists(grader, finalists, final, spare, rounds=rounds, per_round=4, seed=0, rng=random.Random(0)))
        return ranked, scores, alive, grader.calls

    ranked, scores, alive, calls = run(1)
    assert ranked == ["lucky", "steady", "weak", "poor"] and calls == 0 and alive == set(finalists)
    ranked, scores, alive, calls = run(2)
    assert ranked == ["steady", "lucky", "weak", "poor"] and alive == {"steady", "lucky"}
    assert calls == 2 * 4 and scores["steady"] == pytest.approx(0.875) and scores["lucky"] == pytest.approx(0.5)
    assert scores["weak"] == 0.25  # never in the better half: its ranking score stands
    ranked, _, alive, calls = run(5)  # the spare questions run out after 2 more rounds of 4
    assert ranked[0] == "steady" and calls == 2 * 4 + 2 * 4 and len(alive) == 2


def test_a_finalist_that_lost_its_place_catches_up_when_the_leaders_fall_back():
    """"first" and "second" lead the ranking but are wrong on every new question; "third" was just behind
    and is right on them: it re-enters the better half, runs the questions it missed, and wins."""
    import random

    from openconductor.train.search.screening import rank_finalists

    spare = [TrainRow(prompt=[], question=f"s{i}") for i in range(4)]
    table = {("third", r.question): 1.0 for r in spare}
    grader = _TableGrader(table)
    ranked, scores, alive = asyncio.run(rank_finalists(grader, ["first", "second", "third", "fourth"], [1.0, 0.9, 0.8, 0.1], spare, rounds=2,
                                               per_round=4, seed=0, rng=random.Random(0)))
    assert ranked[:3] == ["third", "first", "second"] and alive == {"third", "first"}
    assert scores["third"] == pytest.approx(0.9) and scores["first"] == pytest.approx(0.5) and scores["second"] == pytest.approx(0.45)
    assert grader.calls == 3 * 4  # first and second, then third catching up; fourth never ran


def test_domain_search_config_errors(tmp_path, domain_experts):
    with pytest.raises(TrainConfigError, match="search.screen_rounds: Input should be greater than or equal to 1"):
        _config(tmp_path, "examples = 8", 'candidates = 16\nselection = "domain"\nscreen_rounds = 0')
    with pytest.raises(TrainConfigError, match="search.rank_rounds: Input should be greater than or equal to 1"):
        _config(tmp_path, "examples = 8", 'candidates = 16\nselection = "domain"\nrank_rounds = 0')
    with pytest.raises(TrainConfigError, match="search.questions: Input should be greater than or equal to 1"):
        _config(tmp_path, "examples = 8", 'candidates = 16\nselection = "domain"\nquestions = 0')
    with pytest.raises(TrainConfigError, match="needs a fixed pool"):
        _config(tmp_path, "examples = 8", 'candidates = 16\nselection = "domain"', "[randomize]\nenabled = true\nk_min = 2\nk_max = 3\n", show="names")
    # 1-step plans only come in few distinct texts (workers x wordings): too few to keep 20 of.
    cfg = _domain_config(tmp_path, "examples = 40\ntargets_per_prompt = 20", 'candidates = 20\nselection = "domain"')
    cfg.prompt.max_steps = 1
    with pytest.raises(TrainConfigError, match="distinct workflows among 20 candidates"):
        _select(cfg)


def test_the_domain_search_can_rank_with_its_own_step_cost(tmp_path, domain_experts):
    """search.step_weight prices steps in the search only: with the reward's step cost at 0 (GRPO then
    pays for accuracy alone) the search still prefers the short right plans when its own cost is set."""
    warmup, search = "examples = 16\ntargets_per_prompt = 4", 'candidates = 60\nselection = "domain"\nquestions = 8\n'
    mean_steps = lambda summary: sum(map(sum, (d["kept_steps"] for d in summary["domains"]))) / 8  # noqa: E731
    cfg = _domain_config(tmp_path, warmup, search + "step_weight = 0.05")
    cfg.reward.step_weight = 0.0
    *_, summary = _select(cfg)
    assert all(d["best"] == pytest.approx(0.95) for d in summary["domains"])  # ranked with the search's cost
    assert mean_steps(summary) < 1.6
    cfg = _domain_config(tmp_path, warmup, search)
    cfg.reward.step_weight = 0.0  # no cost anywhere: every right plan ties at 1.0, whatever its length
    *_, summary = _select(cfg)
    assert all(d["best"] == pytest.approx(1.0) for d in summary["domains"])
    with pytest.raises(TrainConfigError, match="needs selection = 'domain'"):
        _config(tmp_path, "examples = 8", "candidates = 16\nstep_weight = 0.01")
    with pytest.raises(TrainConfigError, match="search.step_weight: Input should be greater than or equal to 0"):
        _config(tmp_path, "examples = 8", 'candidates = 16\nselection = "domain"\nstep_weight = -0.1')
    # search.token_weight prices each plan's tokens in the search alone, in the same way.
    cfg = _domain_config(tmp_path, warmup, search + "token_weight = 0.05")
    cfg.reward.step_weight = 0.0
    assert cfg.reward.token_weight == 0.0
    *_, summary = _select(cfg)
    assert all(0.9 < d["best"] < 1.0 for d in summary["domains"]) and mean_steps(summary) < 1.6
    with pytest.raises(TrainConfigError, match="search.token_weight is the domain search's per-1k-token cost"):
        _config(tmp_path, "examples = 8", "candidates = 16\ntoken_weight = 0.01")
    with pytest.raises(TrainConfigError, match="search.token_weight: Input should be greater than or equal to 0"):
        _config(tmp_path, "examples = 8", 'candidates = 16\nselection = "domain"\ntoken_weight = -1')


def test_with_a_python_tool_the_domain_search_finds_write_then_run_chains(tmp_path):
    """Real path for the tool: the python worker runs each program in the bubblewrap sandbox. The coder
    (SIMULATED) answers 7 when asked directly but, asked for a program, writes one that computes 40 + 2;
    only the write -> run(-> answer) chains the warm-up draws for pools with a code runner can be right."""
    def coder(spec, messages, rng):
        asked = str(messages[-1].get("content", "")).rsplit("assigned subtask", 1)[-1]
        if "Python" in asked:
            return "```python\nprint('Final answer:', 40 + 2)\n```"
        return "Final answer: 7"

    register_responder("coder")(coder)
    try:
        (tmp_path / "pool.toml").write_text(
            'name = "with-tool"\n[[workers]]\nname = "coder"\nprovider = "simulated"\noptions = { world = "coder" }\n'
            '[[workers]]\nname = "python"\nprovider = "python"\nmax_retries = 0\noptions = { wall_s = 10, cpu_s = 5 }\n')
        data = tmp_path / "q.jsonl"
        data.write_text("".join(json.dumps({"question": f"What is 40 + 2? (#{i}.)", "reference": "42", "task": "numeric", "domain": "calc"}) + "\n"
                                for i in range(6)))
        path = tmp_path / "train.toml"
        path.write_text(f'pool = "{tmp_path / "pool.toml"}"\n[prompt]\nmax_steps = 3\nexamples = false\n'
                        f'[data]\nkind = "jsonl"\npath = "{data}"\nn_train = 6\nn_eval = 0\n[reward]\nstep_weight = 0.01\n'
                        '[warmup_sft]\nexamples = 4\ntargets_per_prompt = 2\n[search]\ncandidates = 24\nselection = "domain"\nquestions = 3\n')
        spec, rows, shown, targets, summary = _select(load_train_config(path))
    finally:
        RESPONDERS.pop("coder", None)
    assert summary["domains"][0]["best"] == pytest.approx(0.98)  # right on every ranking question, 2 steps
    for text in targets:
        steps = parse(text).steps
        assert [s.worker for s in steps[:2]] == [0, 1] and "Python" in steps[0].subtask, text


def test_keep_within_copies_only_the_plans_near_the_domains_best(tmp_path, domain_experts):
    warmup, search = "examples = 16\ntargets_per_prompt = 4", 'candidates = 60\nselection = "domain"\nquestions = 8\n'
    *_, loose = _select(_domain_config(tmp_path, warmup, search))
    spec, rows, shown, targets, tight = _select(_domain_config(tmp_path, warmup, search + "keep_within = 0.0"))
    for loose_d, tight_d in zip(loose["domains"], tight["domains"]):
        assert tight_d["kept_mean"] == pytest.approx(tight_d["best"])  # only plans as good as the best
        assert tight_d["kept_mean"] >= loose_d["kept_mean"] and len(tight_d["kept_steps"]) == 4  # repeated to fill
        # The manifest names the kept plans (each once), so a reader can see what the conductor was taught.
        assert [k["workflow"] for k in tight_d["kept"]] == list(dict.fromkeys(t for r, t in zip(shown, targets) if r.domain == tight_d["domain"]))
        assert all(k["mean_reward"] == pytest.approx(tight_d["best"], abs=1e-4) for k in tight_d["kept"])
        ranked = [f["mean_reward"] for f in tight_d["finalists"]]  # every finalist with its ranking score
        assert ranked == sorted(ranked, reverse=True) and ranked[0] == pytest.approx(tight_d["best"], abs=1e-4) and len(ranked) >= 4
    assert len(targets) == 16
    assert any(d["kept_mean"] < d["best"] for d in loose["domains"])  # without the margin, weaker plans are kept too
    with pytest.raises(TrainConfigError, match="keep_within is a margin"):
        _config(tmp_path, "examples = 8", "candidates = 16\nkeep_within = 0.1")


def test_a_domain_can_search_a_smaller_size_and_single_worker_plans_join_the_candidates(tmp_path, domain_experts):
    """[search.domains.b] shrinks domain b's search (a slow domain, e.g. code), and single_worker_plans
    adds "ask worker i" for every model: of 4 random candidates none need ask b's expert, yet every plan
    kept for b (only those as good as its best) does."""
    warmup, search = "examples = 16\ntargets_per_prompt = 2", 'candidates = 60\nselection = "domain"\nquestions = 8\n'
    small = search + ("keep_within = 0.0\nsingle_worker_plans = true\nrank_rounds = 2\n"
                      "[search.domains.b]\ncandidates = 4\nquestions = 3\nscreen_rounds = 1\nrank_rounds = 1\n")
    spec, rows, shown, targets, summary = _select(_domain_config(tmp_path, warmup, small))
    a, b = summary["domains"]
    assert (a["domain"], a["ranked_on"], a["rank_rounds"]) == ("a", 8, 2) and (b["domain"], b["ranked_on"], b["screen_rounds"], b["rank_rounds"]) == ("b", 3, 1, 1)
    # a's second ranking round ran its better half only; b ranked once, so every finalist is a contender.
    assert sum(f["contender"] for f in a["finalists"]) == max(2, -(-len(a["finalists"]) // 2)) and all(f["contender"] for f in b["finalists"])
    assert b["candidates"] <= 4 + len(spec.workers)  # its random draws plus one plan per worker (all are models here)
    expert = [w.name for w in spec.workers].index("b-expert")
    for row, text in zip(shown, targets):
        if row.domain == "b":
            assert [s.worker for s in parse(text).steps][-1] == expert, text
    with pytest.raises(TrainConfigError, match="names \\['c'\\], which are not domains of the warm-up's prompts"):
        _select(_domain_config(tmp_path, warmup, search + "[search.domains.c]\ncandidates = 8\n"))
    with pytest.raises(TrainConfigError, match="search.domains.b.candidates must be >= targets_per_prompt = 2"):
        _domain_config(tmp_path, warmup, search + "[search.domains.b]\ncandidates = 1\n")
    with pytest.raises(TrainConfigError, match="search.domains.b.screen_rounds: Input should be greater than or equal to 1"):
        _domain_config(tmp_path, warmup, search + "[search.domains.b]\nscreen_rounds = 0\n")
    with pytest.raises(TrainConfigError, match="need selection = 'domain' and candidates > 0"):
        _config(tmp_path, "examples = 8", "candidates = 16\nsingle_worker_plans = true")
    with pytest.raises(TrainConfigError, match="need selection = 'domain' and candidates > 0"):
        _config(tmp_path, "examples = 8", 'selection = "domain"\nrank_rounds = 2')


def test_single_worker_plans_ask_each_model_but_no_tool():
    from openconductor.pool import PoolSpec, WorkerSpec
    from openconductor.train.warmup import single_worker_plans

    spec = PoolSpec(name="p", workers=[WorkerSpec(name="m", provider="simulated"), WorkerSpec(name="python", provider="python"),
                                       WorkerSpec(name="r", provider="retrieval"), WorkerSpec(name="n", provider="simulated")])
    plans = [parse(t) for t in single_worker_plans(spec)]
    assert [[s.worker for s in wf.steps] for wf in plans] == [[0], [3]]
    assert all(wf.steps[0].access == () for wf in plans)


def test_constrained_rollouts_must_admit_the_warmup_targets(tmp_path, responders):
    """A warm-up subtask longer than the rollout format's bound would be cut in every GRPO sample: a config error."""
    from openconductor.train.trainer import _check_rollouts_admit, row_format
    from openconductor.train.warmup import format_targets

    cfg = _config(tmp_path, "examples = 4", extra="[rollout]\nconstrained = true\nsubtask_chars = 12\n")
    spec = load_pool(cfg.pool_path)
    rows = build_rows(cfg, spec, load_items(cfg))
    long = 'Reasoning: one agent answers.\nmodel_id = [2]\nsubtasks = ["Solve the task and give the final answer."]\naccess_list = [[]]'
    _check_rollouts_admit(cfg, spec, rows[:1], ['Reasoning: one.\nmodel_id = [2]\nsubtasks = ["Solve it."]\naccess_list = [[]]'])
    with pytest.raises(TrainConfigError, match="subtask_chars = 12"):
        _check_rollouts_admit(cfg, spec, rows[:1], [long])
    # The shipped real-pool recipe admits every target it can draw, the write-a-program wording included.
    for recipe in ("train_local_tools.toml", "train_local_tools_reasoning.toml"):
        real = load_train_config(Path(__file__).resolve().parents[1] / "examples" / recipe)
        targets = format_targets(300, 3, real.prompt.max_steps, 0, code_runners=(2,))
        assert any("Python program" in t for t in targets)
        fmt = row_format(real, TrainRow(prompt=[], question="q", workers=[0, 1, 2]), load_pool(real.pool_path))
        assert all(fmt.complete(fmt.advance(fmt.start(), t)) for t in targets)
