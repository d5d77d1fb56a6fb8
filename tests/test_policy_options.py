"""Policy options are typed per policy (Policy.Options): what the command line, a server preset or Python
passes is validated into them, and a bad option is a PolicyError that names it and what is accepted."""

from __future__ import annotations

import pytest

from openconductor.policies import PolicyError, make_policy, policy_names
from openconductor.policies.specs import parse_policy_specs
from openconductor.pool import PoolSpec

POOL = PoolSpec.model_validate({"name": "p", "workers": [{"name": "a", "provider": "simulated"}, {"name": "b", "provider": "simulated"}]})


def test_text_from_the_command_line_becomes_typed_options():
    [(_, conductor)] = parse_policy_specs(["conductor:temperature=0.5,examples=false"], POOL)
    assert conductor.temperature == 0.5 and conductor.examples is False
    [(_, reflection)] = parse_policy_specs(["self-reflection:worker=b,rounds=3"], POOL)
    assert reflection.rounds == 3 and reflection.worker == "b"
    [(_, moa)] = parse_policy_specs(["moa:aggregator=random,proposers=4"], POOL)  # random is drawn per question, not a worker
    assert moa.aggregator == "random" and moa.proposers == 4


@pytest.mark.parametrize("name, options, message", [
    ("moa", {"colour": "red"}, "policy 'moa': bad option(s): unknown option 'colour' (accepted: aggregator, proposers)"),
    ("single", {"worker": True}, "worker: a worker is a name or an id, not True"),
    ("self-reflection", {"rounds": -1}, "rounds must be a whole number >= 0, got -1"),
    ("conductor", {"temperature": "hot"}, "temperature: Input should be a valid number"),
    ("fixed", {}, "workflow: Field required"),
    ("nope", {}, "unknown policy 'nope'; choose one of: "),
])
def test_a_bad_option_is_a_policy_error_that_names_it(name, options, message):
    with pytest.raises(PolicyError) as caught:
        make_policy(name, **options)
    assert message in str(caught.value)


def test_every_registered_policy_declares_its_options():
    from openconductor.policies.base import PolicyOptions, policy_class

    names = policy_names()
    assert {"conductor", "single", "self-reflection", "moa", "random", "router", "fixed", "lookup", "oracle"} <= set(names)
    for name in names:
        options = policy_class(name).Options
        assert issubclass(options, PolicyOptions)
        assert options.positional is None or options.positional in options.model_fields
        assert set(options.worker_options) <= set(options.model_fields)


def test_a_bare_argument_goes_to_the_positional_option_only():
    with pytest.raises(PolicyError, match="'random' takes key=value options, not a bare argument"):
        parse_policy_specs(["random:3"], POOL)
    with pytest.raises(PolicyError, match="policy 'moa:x': unknown worker 'x'; the pool has a, b"):
        parse_policy_specs(["moa:x"], POOL)
