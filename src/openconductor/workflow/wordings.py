"""The one vocabulary of subtask wordings: the texts that hand-made, searched and taught workflows give their steps.

Workflows written in code (baselines, the plan search, calibration's fixed plans, the warm-up's targets, the
executor's added steps) take their subtasks from here, so that one wording is one constant. Pool files and shipped
checkpoints' manifests keep their own text (data, not code): a conductor trained on a wording is held to it.
"""

from __future__ import annotations

# The plan search's and calibration's roles (sim/plan_search.py, evaluation/calibration.py) and every one-step
# baseline (single worker, router, lookup, the LM policy's fallback).
SOLVE = "Solve the overall task and give the final answer."
CHECK = "Check the previous answer carefully, fix any error, and give the final answer."
PLAN = "Outline a plan: the key steps an expert would take for this task, without solving it."
IMPLEMENT = "Follow the plan from the previous agent to solve the task and give the final answer."
AGGREGATE = "Synthesise the previous answers into one: weigh them critically and give the final answer."

# The hand-made baselines (policies/baselines.py).
REVISE = ("Review the previous attempts for mistakes. If you find one, correct it; then give the final "
          "answer to the overall task.")
MOA_AGGREGATE = ("Several agents answered the overall task independently. Synthesise their responses into one "
                 "answer: weigh them critically, fix errors, and give the final answer.")
RANDOM_STEP = "Work on the overall task and report your findings."
RANDOM_LAST = "Give the final answer to the overall task."

# Steps the executor adds: an answer after a plan that ends in a tool, and a recursive round's review.
ANSWER_SUBTASK = "Using the work above, give the final answer to the overall task."
REVIEW_SUBTASK = "Review the round above: accept its answer, or revise it."

# The format warm-up's wordings per role (train/warmup.py draws one per step; the first of each is the one the
# fit's candidates use).
PHRASES = {
    "plan": [
        "Outline a plan; do not solve it yet.",
        "Break the task into key steps.",
        "Identify the key facts and sketch an approach.",
    ],
    "solve": [
        "Solve the task and give the final answer.",
        "Answer the question.",
        "Work out the final answer.",
    ],
    "implement": [
        "Follow the plan above and give the final answer.",
        "Implement the approach above.",
        "Use the plan to solve the task.",
    ],
    "check": [
        "Check the answer above and fix any error.",
        "Verify the solution above; give the final answer.",
        "Review the work above for mistakes.",
    ],
    "aggregate": [
        "Combine the answers above into one.",
        "Synthesise the answers above; give the final answer.",
        "Reconcile the answers above.",
    ],
    # Only for pools with a code-running tool (``code_runners``): a model writes a program, the tool
    # runs it, and optionally a model reads its output. Qwen2.5-Coder-0.5B is brittle here: a near
    # rewording can drop it from 5/8 to 0/8 (it prints a number it made up instead of computing it), so
    # these are wordings measured on training questions (seed 0, 8 per kind): the first computes
    # (arithmetic 5/8, equations 0/8), the second is the pool file's code-then-run wording (arithmetic
    # 80 % on stop 19's table), the third solves for an unknown by search (equations 6/8, arithmetic
    # 2/8). Which suits a question is what the search, then the conductor, learns.
    "code": [
        "Write a Python program that computes the answer to the overall task with Python arithmetic and prints: Final answer: <result>. Reply with one python block.",
        "Write a short Python program that computes the answer to the overall task and prints it as: Final answer: <answer>. If the result is a whole number, "
        "convert it with int() so that it prints without a decimal point. Reply with the code in one ```python block.",
        "Write a Python program that finds the unknown by trying every integer from -100000 to 100000 and prints: Final answer: <value>. Reply with one python block.",
    ],
    "run": [
        "Run the program.",
        "Run the code above.",
    ],
    "answer": [
        "Using the program and its output above, give the final answer.",
        "Read the output above and state the final answer.",
    ],
}
