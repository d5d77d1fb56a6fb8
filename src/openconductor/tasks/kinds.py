"""Which kinds of question a conductor trains on and which are kept aside to test whether it generalises.

Split BY KIND (a reasoning-gym generator, a benchmark, a category set of our own), not only by seed: a
held-out kind is never trained on, at any seed, so a score there measures planning for what a question
needs rather than recall of a kind seen in training. Evaluate held-out kinds at ``HELD_OUT_SEED`` (the
training seeds are 0 and 1000). The training kinds' own held-out questions are those kinds at that seed.

    python -m openconductor.tasks.kinds held-out      # the --task flags of the held-out kinds
"""

from __future__ import annotations

import sys

HELD_OUT_SEED = 4242

# The broad training mix: arithmetic, number theory, word problems, equations, strings, dates, logic,
# conversions, code, and everyday/knowledge questions of our own (their "train" split).
TRAIN_KINDS: tuple[str, ...] = (
    "basic_arithmetic", "gsm_symbolic", "rg:letter_counting", "rg:simple_equations", "rg:syllogism",  # the first conductor's five
    "rg:chain_sum", "rg:products", "rg:decimal_arithmetic", "rg:gcd", "rg:prime_factorization", "rg:count_bits",
    "rg:base_conversion", "rg:spell_backward", "rg:word_sorting", "rg:number_filtering", "rg:calendar_arithmetic",
    "rg:leg_counting", "rg:family_relationships", "humaneval", "everyday",
)
# The training mix's options: HumanEval 0-19 and the everyday test split are evaluation sets.
TRAIN_OPTIONS: dict[str, dict] = {"humaneval": {"offset": 20}, "everyday": {"split": "train"}}

# Kinds never trained on (at least 20 questions each at HELD_OUT_SEED). Every kind here and above generates the
# same questions in every process: ransom_note and isomorphic_strings do not (they iterate over sets, so their
# questions follow PYTHONHASHSEED), which would make a resumed eval refuse its own results. Some are near a training kind
# (lcm / gcd, decimal_chain_sum / chain_sum), some are not (coin_flip, caesar_cipher, aiw, time_intervals).
HELD_OUT_KINDS: tuple[str, ...] = (
    "rg:lcm", "rg:count_primes", "rg:decimal_chain_sum", "rg:complex_arithmetic", "rg:time_intervals",
    "rg:coin_flip", "rg:aiw", "rg:word_sequence_reversal", "rg:caesar_cipher", "rg:simple_geometry",
)

# Everyday questions kept aside: the test split of our own set (its categories also appear in training).
EVERYDAY_TEST: tuple[str, dict] = ("everyday", {"split": "test"})


def kind_name(task: str) -> str:
    """The kind a task name denotes (``rg:lcm`` -> ``lcm``), as the trainer names its domains."""
    return task.split(":", 1)[1] if task.startswith("rg:") else task


def _check_disjoint() -> None:
    overlap = {kind_name(t) for t in TRAIN_KINDS} & {kind_name(t) for t in HELD_OUT_KINDS}
    if overlap:  # a held-out kind that is trained on would flatter the generalisation figure
        raise AssertionError(f"kinds both trained on and held out: {sorted(overlap)}")


_check_disjoint()


def main(argv: list[str]) -> int:
    which = {"held-out": HELD_OUT_KINDS, "train": TRAIN_KINDS}
    if len(argv) != 1 or argv[0] not in which:
        print("usage: python -m openconductor.tasks.kinds held-out|train", file=sys.stderr)
        return 2
    print(" ".join(f"--task {t}" for t in which[argv[0]]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
