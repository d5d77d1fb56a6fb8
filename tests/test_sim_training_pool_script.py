"""benchmarks/sim_training_pool.py's command line and its pooled line (SIMULATED; the table itself runs a conductor and is
run by docs/results.md's commands)."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pytest

from openconductor.evaluation.simulated import Result

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "sim_training_pool.py"
spec = importlib.util.spec_from_file_location("sim_training_pool", SCRIPT)
tp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tp)


def test_held_out_sets_are_named_by_distinct_seeds():
    assert tp.eval_seeds("1000") == [1000]
    assert tp.eval_seeds("1000,2000") == [1000, 2000]
    with pytest.raises(argparse.ArgumentTypeError, match="whole numbers"):
        tp.eval_seeds("1000,x")
    with pytest.raises(argparse.ArgumentTypeError, match="twice"):
        tp.eval_seeds("1000,1000")


def test_the_pooled_line_is_the_mean_margin_over_the_sets_with_an_interval_from_each_sets_questions():
    lookup = "best lookup: one plan per subtopic"
    # set one: the conductor wins 20 more of 100 questions; set two: the same questions. Mean +10 points.
    one = [Result("conductor c", [1] * 60 + [0] * 40, [0] * 100), Result(lookup, [1] * 40 + [0] * 60, [0] * 100)]
    two = [Result("conductor c", [1] * 50 + [0] * 50, [0] * 100), Result(lookup, [1] * 50 + [0] * 50, [0] * 100)]
    line = tp.pooled_line([one, two], [lookup])
    assert line.startswith("pooled over 2 held-out sets (200 questions): conductor c 55.0; vs best lookup: one plan per subtopic +10.0 [")
    lo, hi = (float(x) for x in line.rsplit("[", 1)[1].rstrip("]").split(", "))
    assert 0 < lo < 10 < hi < 20  # set one's 20 questions resampled: above 0, not a point
