"""benchmarks/unseen_pools.py: which pools draw from the held-out families, the last line's margins and goals, its
command line, and `--jobs` scoring the same pools as one process does (SIMULATED)."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

import pytest

from openconductor.evaluation.simulated import Result

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "unseen_pools.py"
# Imported by name (appended, so nothing else is shadowed): `--jobs`' spawned processes import it again to score a pool.
sys.path.append(str(SCRIPT.parent))
up = importlib.import_module(SCRIPT.stem)

KEY = ("subtopic", 0.03)


def pool(seed: int, conductor: list[int], router: list[int], search: list[int], tokens: int = 20) -> "up.PoolScore":
    n = len(conductor)
    result = lambda name, correct, t=10: Result(name, correct, [t] * n)  # noqa: E731
    return up.PoolScore(seed, "—", 4, result("conductor", conductor, tokens), 2.0, result("best", [0] * n), result("router", router),
                        result("search", search), result("MoA", [0] * n, 100), {KEY: result("rank", router)}, {})


def test_every_other_pool_draws_from_the_held_out_families_as_the_simulated_evaluation_alternates_them():
    from openconductor.evaluation.simulated import held_out_flags

    assert held_out_flags(4, "alternate") == [False, True, False, True]
    assert held_out_flags(4, "all") == [True] * 4 and held_out_flags(4, "none") == [False] * 4


def test_the_last_line_is_the_mean_margin_over_pools_and_misses_a_goal_it_falls_short_of():
    # pool one: the conductor wins 4 of 10 more than the router; pool two: 2 more. Mean +30 points over the router.
    pools = [pool(1, [1] * 6 + [0] * 4, [1] * 2 + [0] * 8, [1] * 6 + [0] * 4), pool(2, [1] * 4 + [0] * 6, [1] * 2 + [0] * 8, [1] * 4 + [0] * 6)]
    lines, missed = up.summary(pools, 1.0)
    assert "vs oracle router +30.0 [" in lines[0] and "vs per-pool search re-run +0.0 [+0.0, +0.0]" in lines[0]
    assert "tokens 0.200x MoA" in lines[0] and "own prompt and plan 0.020x" in lines[0]
    assert lines[1].startswith("rank lookup (subtopic, 0.03): vs oracle router +0.0")
    assert not missed
    assert up.summary([pool(1, [1] * 6 + [0] * 4, [1] * 6 + [0] * 4, [1] * 6 + [0] * 4)], 1.0)[1]  # +0 over the router: missed
    assert up.summary([pool(1, [1] * 6 + [0] * 4, [0] * 10, [1] * 6 + [0] * 4, tokens=30)], 1.0)[1]  # 0.3x MoA's tokens: missed
    assert up.row(pools[0]).startswith("| 1 | — | 4 | 60.0 | 0.0 | 20.0 | 60.0 | 20.0 | +40.0 | +0.0 | +40.0 | 0.200x |")


def test_each_compared_conductor_is_named_once():
    assert up.compared(argparse.Namespace(compare="a, b,a,,")) == ["a", "b"]


@pytest.mark.parametrize("argv, message", [(["--seeds", "901", "--jobs", "0"], "--jobs must be at least 1"),
                                           (["--seeds", ","], "--seeds names no pool"),
                                           (["--seeds", "901", "--rank", "subtopic:x"], "is not a number")])
def test_the_command_line_refuses_what_it_cannot_run(argv, message, monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["unseen_pools.py", *argv])
    with pytest.raises(SystemExit) as exc:
        up.main()
    assert exc.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.heavy
def test_two_jobs_score_the_same_pools_in_seed_order_as_one_process_does():
    args = argparse.Namespace(conductor="builtin:sim-bucket", compare="", n=3, eval_seed=1000, held_out="alternate", rank_questions=1,
                              training_pool=str(SCRIPT.parents[1] / "examples" / "pools" / "simulated_paper_v3.toml"), show=None,
                              profile=None, profile_questions=None, rank=[KEY], jobs=1)
    seeds = [901, 902]
    alone = list(up.scored_pools(args, seeds))
    side_by_side = list(up.scored_pools(argparse.Namespace(**{**vars(args), "jobs": 2}), seeds))
    assert [p.seed for p in side_by_side] == seeds and [p.families != "—" for p in side_by_side] == [False, True]
    assert side_by_side == alone
    assert all(len(p.conductor.correct) == 3 and p.conductor.tokens and KEY in p.ranks for p in alone)
