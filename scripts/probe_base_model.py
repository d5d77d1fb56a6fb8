"""Can the Gemma-3-270M base model answer worker subtasks? Two prompt formats on 12 held-out questions.

"worker": the executor's worker message as a plain completion prompt (what local_gguf sends a base
model). "fewshot": two solved examples, then "Question: ...\\nAnswer:", stopped at the next question.
Prints each answer, whether the task's grader accepts it, and the totals per format.

    PYTHONPATH=src nice -n 19 python scripts/probe_base_model.py
"""

from __future__ import annotations

import xllamacpp

from openconductor.providers.local_gguf import COMPLETION_STOP, completion_prompt, resolve_model
from openconductor.tasks import grade, load_task
from openconductor.worker_message import render

FEWSHOT = (
    "Question: What is 3 + 4?\nAnswer: 3 + 4 = 7. Final answer: 7\n\n"
    "Question: Spell 'cat' backward.\nAnswer: The letters reversed are t, a, c. Final answer: tac\n\n"
)


def main() -> None:
    path, _ = resolve_model("gemma3-270m")
    params = xllamacpp.CommonParams()
    params.model.path, params.n_parallel, params.n_ctx = str(path), 1, 4096
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = 1
    params.warmup, params.verbosity = False, -1
    server = xllamacpp.Server(params)
    questions = []
    for name in ["basic_arithmetic", "rg:letter_counting", "rg:simple_equations", "rg:syllogism"]:
        task = load_task(name, limit=3, seed=4242)
        questions += [(task.text(q), q) for q in task.questions]
    for mode in ["worker", "fewshot"]:
        correct = empty = 0
        for text, question in questions:
            if mode == "worker":
                message = render(text, [], "Solve the overall task and give the final answer.")
                body = {"prompt": completion_prompt([{"role": "user", "content": message}]), "stop": COMPLETION_STOP}
            else:
                body = {"prompt": f"{FEWSHOT}Question: {text}\nAnswer:", "stop": ["\nQuestion:", "\n\n"]}
            body.update(max_tokens=96, temperature=0.2, seed=1)
            out = server.handle_completions(body)["choices"][0]["text"]
            ok = bool(out.strip()) and grade(question, out).correct
            correct += ok
            empty += not out.strip()
            print(f"{mode}: {out[:100]!r} -> {'correct' if ok else 'wrong'}")
        print(f"== {mode}: {correct}/{len(questions)} correct, {empty} empty answers")


if __name__ == "__main__":
    main()
