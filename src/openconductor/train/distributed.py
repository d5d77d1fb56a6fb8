"""Training under ``accelerate launch`` (data parallel: each process samples, executes on the pool and grades its
share of the rollouts; gradients are averaged): the process state and what a run records of it
(TRL's batch rule, with the process count: ``config.check_batch``).

One process when not launched. ``examples/accelerate/cpu_2proc.yaml`` runs two on CPUs (gloo; the CI test),
``zero3.yaml`` DeepSpeed ZeRO-3 on GPUs (docs/training.md says which of these was run).
"""

from __future__ import annotations

from typing import Any



def distributed(**group):
    """This process's place in an ``accelerate launch``: accelerate's ``PartialState``, on CPUs a gloo group, as
    ``GRPOConfig(use_cpu=...)`` makes it later. ``group``: ``init_process_group``'s arguments (e.g. ``timeout``), used
    by whichever call comes first."""
    import torch
    from accelerate import PartialState

    return PartialState(cpu=not torch.cuda.is_available(), **group)


def processes_record(trainer, reward_calls: int) -> dict[str, Any]:
    """For the manifest: the processes that trained, and the reward batches each one scored (a collective: every
    process calls it)."""
    from accelerate.utils import gather_object

    return {"processes": trainer.accelerator.num_processes, "reward_calls_per_process": gather_object([reward_calls])}


def any_process(flag: bool) -> bool:
    """True on every process when it is true on one (a stop must be taken by all together, or the others hang)."""
    state = distributed()
    if state.num_processes == 1:
        return flag
    from accelerate.utils import gather_object

    return any(gather_object([flag]))
