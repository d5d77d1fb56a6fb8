"""Fixed workflows as a policy (`fixed:NAME` from the pool file, `fixed:FILE.toml`), on simulated workers
(labelled: no model is involved; the numbers here are not measurements)."""

from pathlib import Path

import pytest

from openconductor.policies import PolicyError
from openconductor.policies.specs import parse_policy_specs
from openconductor.executor import solve
from openconductor.policies import PlanRequest, Previous, make_policy
from openconductor.policies.fixed import FixedWorkflowError
from openconductor.pool import Pool, PoolSpec

POOL = {
    "name": "p",
    "workers": [{"name": "a", "provider": "simulated"}, {"name": "b", "provider": "simulated"}],
    "workflows": {
        "b-then-a": {
            "description": "b drafts, a finishes",
            "steps": [{"worker": "b", "subtask": "Draft it.", "access": []}, {"worker": "a", "subtask": "Finish it.", "access": "all"}],
        }
    },
}


async def test_a_named_workflow_runs_its_steps_by_worker_name():
    spec = PoolSpec.model_validate(POOL)
    async with Pool(spec) as pool:
        run = await solve("q", make_policy("fixed", workflow="b-then-a"), pool)
    assert run.status == "ok" and run.policy == "fixed:b-then-a"
    assert [(s.worker_name, s.subtask, s.access) for s in run.steps] == [("b", "Draft it.", []), ("a", "Finish it.", "all")]
    assert run.plan.workflow.reasoning == "b drafts, a finishes"


async def test_a_workflow_file_is_resolved_against_the_pool_and_accepts_in_verification(tmp_path):
    path = tmp_path / "wf.toml"
    path.write_text('steps = [{ worker = "a", subtask = "Answer.", access = [] }]\n')
    spec = PoolSpec.model_validate(POOL)
    policy = make_policy("fixed", workflow=str(path))
    async with Pool(spec) as pool:
        plan = await policy.plan(PlanRequest("q", pool))
        again = await policy.plan(PlanRequest("q", pool, previous=Previous(answer="x")))
    assert [s.worker for s in plan.workflow.steps] == [0]
    assert again.workflow.is_accept


def test_eval_specs_check_fixed_workflows_up_front(tmp_path):
    spec = PoolSpec.model_validate(POOL)
    [(label, _)] = parse_policy_specs(["fixed:b-then-a"], spec)
    assert label == "fixed:b-then-a"
    with pytest.raises(PolicyError, match="declares no workflow 'nope' \\(declared: b-then-a\\)"):
        parse_policy_specs(["fixed:nope"], spec)
    with pytest.raises(PolicyError, match="workflow file not found"):
        parse_policy_specs([f"fixed:{tmp_path / 'missing.toml'}"], spec)
    ghost = tmp_path / "ghost.toml"
    ghost.write_text('steps = [{ worker = "ghost", subtask = "x" }]\n')
    with pytest.raises(PolicyError, match=r"unknown worker\(s\) ghost; the pool has a, b"):
        parse_policy_specs([f"fixed:{ghost}"], spec)
    bad = tmp_path / "bad.toml"
    bad.write_text("steps = []\n")
    with pytest.raises(FixedWorkflowError, match="not a workflow file"):
        make_policy("fixed", workflow=str(bad))


EXAMPLES = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "examples" / "workflows").glob("*.toml"))


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_example_workflow_files_resolve_on_the_offline_pool(name):
    """examples/workflows/*.toml (the plan shapes docs/fit.md probed) name the default pool's workers."""
    from openconductor.pool import load_default_pool

    path = Path(__file__).resolve().parents[1] / "examples" / "workflows" / f"{name}.toml"
    spec = load_default_pool()
    workflow = make_policy("fixed", workflow=str(path)).resolve(spec)
    assert workflow.steps[-1].worker == spec.index("python") and len(workflow.steps) in (2, 3)  # python runs the program last
