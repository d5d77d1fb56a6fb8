"""benchmarks/copy_fidelity.py's command line (SIMULATED; the probe itself runs a conductor and is run by docs/results.md [39])."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "copy_fidelity.py"
spec = importlib.util.spec_from_file_location("copy_fidelity", SCRIPT)
cf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cf)


def test_a_conductor_is_named_with_the_price_its_training_pool_targets_were_searched_at():
    assert cf.conductor_price("builtin:sim-subtopic=0.03") == ("builtin:sim-subtopic", 0.03)
    assert cf.conductor_price("runs/a=b/warmup=0") == ("runs/a=b/warmup", 0.0)  # the last "=" splits


@pytest.mark.parametrize("text", ["builtin:sim-subtopic", "=0.03", "runs/x=cheap", "runs/x=-0.1", "runs/x=nan"])
def test_a_conductor_without_a_usable_price_is_refused_with_the_form_to_write(text):
    with pytest.raises(argparse.ArgumentTypeError, match="write CKPT=PRICE"):
        cf.conductor_price(text)
