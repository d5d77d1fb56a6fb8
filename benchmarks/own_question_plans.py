"""The plans a trained conductor writes for questions of our own, phrased unlike its training tasks.

Plans only (no worker runs): the conductor at CHECKPOINT (default: the pool's shipped one) plans each of
eight questions (a word problem, a percentage, a letter count, an equation, a syllogism, a function to
write, a capital city, a product) greedily under the runtime grammar, and prints each plan's steps. The
evaluation tasks all end in the same answer-format instruction; these do not, so a conductor that learned
the benchmark's phrasing rather than the pool shows it here (garbled subtasks, code for a capital city).

    PYTHONPATH=src python benchmarks/own_question_plans.py [CHECKPOINT]     # ~20 s on 2 cores

--with-instruction appends the training tasks' answer-format instruction to each question: a conductor
that garbles the bare questions but not these learned the instruction's presence, not the question.
"""

from __future__ import annotations

import argparse
import asyncio

from openconductor import Pool, load_default_pool, make_policy
from openconductor.policies.base import PlanRequest
from openconductor.conductor.checkpoint import trained_conductor
from openconductor.tasks.reasoning_gym_tasks import INSTRUCTION

QUESTIONS = [
    "A farmer has 17 sheep and buys 3 times as many goats as sheep. How many animals does he have?",
    "What is 15% of 240?",
    "How many times does the letter r appear in the word strawberry?",
    "If x + 7 = 19, what is x?",
    "All cats are animals. Some animals are pets. Does it follow that some cats are pets?",
    "Write a Python function is_palindrome(s) that returns True if s reads the same backwards.",
    "What is the capital of France?",
    "Calculate 1234 * 5678.",
]


async def main(checkpoint: str | None, with_instruction: bool = False) -> None:
    spec = load_default_pool()
    spec, _ = trained_conductor(spec, checkpoint or spec.conductor.checkpoint)
    policy = make_policy("conductor")
    async with Pool(spec) as pool:
        for i, question in enumerate(QUESTIONS):
            asked = f"{question}\n\n{INSTRUCTION}" if with_instruction else question
            plan = await policy.plan(PlanRequest(asked, pool, max_steps=spec.conductor.max_steps, seed=0))
            print(f"{i}. {question}")
            for step in plan.workflow.steps:
                print(f"     {spec.workers[step.worker].name}: {step.subtask}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", nargs="?", help="a trained conductor dir or builtin:NAME (default: the pool's)")
    parser.add_argument("--with-instruction", action="store_true", help="append the tasks' answer-format instruction to each question")
    args = parser.parse_args()
    asyncio.run(main(args.checkpoint, args.with_instruction))
