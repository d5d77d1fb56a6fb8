"""Characters that str.isdigit() accepts and int() does not ("²", "①"): every place that reads an index from
untrusted text refuses them with its own error, instead of crashing in int(). (A constrained sampler met "²" in the
id part of a plan, sampling at temperature 2.)"""

import pytest

from openconductor.json_schemas import SchemaProblem, check_schema
from openconductor.policies.baselines import worker_index
from openconductor.pool import load_default_pool
from openconductor.traces import Owner

ODD = ("²", "①")


@pytest.mark.parametrize("odd", ODD)
def test_a_worker_named_by_an_odd_digit_is_an_unknown_worker(odd):
    with pytest.raises(ValueError) as refused:
        worker_index(load_default_pool(), odd)
    assert "invalid literal" not in str(refused.value)


@pytest.mark.parametrize("odd", ODD)
def test_a_schema_reference_through_an_odd_digit_points_at_nothing(odd):
    with pytest.raises(SchemaProblem, match="points at nothing"):
        check_schema({"prefixItems": [{"type": "string"}], "items": {"$ref": f"#/prefixItems/{odd}"}})


@pytest.mark.parametrize("odd", ODD)
def test_a_trace_owner_with_an_odd_pid_is_not_an_owner(odd):
    assert Owner.parse(f"host/boot/{odd}/123") is None
    assert Owner.parse("host/boot/42/123") is not None


def test_checkpoint_names_with_an_odd_digit_are_not_steps(tmp_path):
    pytest.importorskip("torch")
    from openconductor.train.evaluate import choose_checkpoint
    from openconductor.train.trainer import _latest_checkpoint

    for name in ("checkpoint-²", "checkpoint-3", "checkpoint-12"):
        (tmp_path / name).mkdir()
    assert _latest_checkpoint(tmp_path) == tmp_path / "checkpoint-12"
    (tmp_path / "validation").mkdir()
    (tmp_path / "validation" / "checkpoint-².json").write_text("[]")
    with pytest.raises(ValueError, match="expected warmup.json, checkpoint-<step>.json or final.json"):
        choose_checkpoint(tmp_path / "validation")
