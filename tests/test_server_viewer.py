"""The trace viewer page in headless Chromium (Debian's `chromium`, driven by Playwright)."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import httpx
import openai
import pytest

from _server_kit import KEY, config, serve, sim_pool, sim_worker, write_pool

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
# The docs' screenshot is a tracked file: rewritten only on request (OPENCONDUCTOR_UPDATE_DOCS_SHOT=1 pytest
# tests/test_server_viewer.py), so an ordinary test run leaves the checkout clean.
DOCS_SHOT = Path(__file__).resolve().parents[1] / "docs" / "trace-viewer.png"

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium (apt-get install -y chromium)")]


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


def test_viewer_lists_runs_and_draws_the_workflow(tmp_path, browser):
    pool = sim_pool(tmp_path)
    cfg = config(tmp_path, {
        "conductor": {"version": "v1", "pool": pool, "policy": "conductor", "limits": {"max_calls": 6, "max_depth": 0}},
        "moa": {"version": "v1", "pool": pool, "policy": "moa"},
    })
    with serve(cfg) as url:
        c = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0)
        c.chat.completions.create(model="conductor", messages=[{"role": "user", "content": "What is 12 squared?"}])
        moa = c.chat.completions.create(model="moa", messages=[{"role": "user", "content": "Which is larger, 2^10 or 10^3?"}])
        run = httpx.get(f"{url}/v1/traces/{moa.model_extra['conductor']['trace_id']}", headers={"Authorization": f"Bearer {KEY}"}).json()

        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(url + "/")
        # The server needs a key: the page asks for one.
        page.wait_for_selector("#key-form:not([hidden])")
        page.fill("#key-input", KEY)
        page.click("#key-form button")
        page.wait_for_selector("#runs li[data-run]")
        items = page.locator("#runs li[data-run]")
        assert items.count() == 2
        assert "Which is larger" in items.nth(0).inner_text() and "12 squared" in items.nth(1).inner_text()

        items.nth(0).click()
        page.wait_for_selector(".graph svg .node")
        assert page.locator("#run-status").inner_text() == "ok"
        # Which conductor planned (issue 69): the run's metadata, as `conductor trace` says it.
        assert page.locator("#run-planner").inner_text() == "planned by policy moa (no conductor model plans)"
        nodes = page.locator(".graph svg .node")
        assert nodes.count() == 3
        names = [nodes.nth(i).locator("text.worker").text_content() for i in range(3)]
        assert names == [s["worker_name"] for s in run["steps"]] == ["alpha", "beta", "alpha"]
        # The aggregator sees both proposals: two access edges, and two edges from the task.
        assert page.locator(".graph svg path.access").count() == 2
        assert page.locator(".graph svg path.from-task").count() == 2
        outputs = page.locator(".step pre.output")
        assert [outputs.nth(i).inner_text() for i in range(3)] == [s["output"] for s in run["steps"]]
        assert page.locator("#final-answer").inner_text() == run["final_answer"]
        assert "worker calls" in page.locator(".totals").inner_text()
        page.locator(".step").nth(2).locator("details summary").click()
        assert "Overall task" in page.locator(".step").nth(2).locator("pre.context").inner_text()
        shot = tmp_path / "trace-viewer.png"
        page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    if os.environ.get("OPENCONDUCTOR_UPDATE_DOCS_SHOT") == "1":
        shutil.copyfile(shot, DOCS_SHOT)


def test_viewer_follows_a_run_in_progress(tmp_path, browser):
    workers = [sim_worker("alpha", 1.0), sim_worker("beta", 1.0)]
    pool = write_pool(tmp_path, "slow", workers)
    cfg = config(tmp_path, {"slow": {"version": "v1", "pool": pool, "policy": "self-reflection", "policy_options": {"rounds": 1}}},
                 keys=[])  # auth off: the page needs no key
    with serve(cfg) as url:
        c = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
        stream = c.chat.completions.create(model="slow", messages=[{"role": "user", "content": "Take your time."}], stream=True)
        first = next(iter(stream))
        trace_id = first.model_extra["conductor"]["trace_id"]
        rest: list = []
        reader = threading.Thread(target=lambda: rest.extend(stream), daemon=True)
        reader.start()

        page = browser.new_page()
        page.goto(f"{url}/#/run/{trace_id}")
        page.wait_for_selector("#run-status")
        assert page.locator("#run-status").inner_text() == "running"
        # Without reloading, the page shows the steps finishing and the run ending.
        page.wait_for_function("document.querySelector('#run-status').textContent === 'ok'", timeout=15000)
        reader.join(timeout=10)
        assert page.locator(".graph svg .node").count() == 2
        assert page.locator("#final-answer").inner_text() == "".join(ch.choices[0].delta.content or "" for ch in rest if ch.choices)
        assert page.locator(".step.ok").count() == 2
