"""``conductor fit`` under ``accelerate launch``: the main process runs every stage; the others wait for its GRPO,
train beside it (each sampling, executing and grading its share of the rollouts, through the fit's replay store)
and end. Only the main process writes the fit's folder, and it counts the others' worker calls into its spend."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Optional

from ...pool import PoolSpec
from ..config import TrainConfig, TrainConfigError
from ..data import Item
from ..distributed import distributed
from .spend_caps import MeteredStore

# The other processes wait in a collective through the profile, search and copy, which take hours on a real pool.
WAIT = timedelta(hours=48)


@dataclasses.dataclass
class GrpoJob:
    """What the main process's GRPO stage trains on, sent to the others."""

    cfg: TrainConfig
    resume: bool
    items: list[Item]
    spec: PoolSpec


def fit_state():
    """accelerate's process state, its group made to wait as long as the stages before GRPO may take."""
    return distributed(timeout=WAIT)


class Relay:
    """The main process's side: tells the others, once, the GRPO to join, or that there is none."""

    def __init__(self, settings) -> None:
        state = fit_state()
        self.sent = state.num_processes == 1
        if not self.sent and (settings.max_calls or settings.max_cost):
            raise TrainConfigError(f"--max-calls/--max-cost are checked in one process, and GRPO runs in {state.num_processes} here: "
                                   "run the fit without accelerate launch, or without a cap")

    def send(self, job: Optional[GrpoJob]) -> None:
        if not self.sent:
            from accelerate.utils import broadcast_object_list

            broadcast_object_list([job])
            self.sent = True


def share_spend(meter: MeteredStore) -> None:
    """After GRPO, in every process (a collective): the main process's meter adds what the others spent."""
    from accelerate.utils import gather_object

    spends = gather_object([meter.spend])
    if distributed().is_main_process:
        meter.spend = sum(spends[1:], spends[0])


def follow(settings) -> None:
    """A process other than the main one: train in the main process's GRPO when it runs one, then end."""
    from accelerate.utils import broadcast_object_list

    from ..trainer import train

    job = broadcast_object_list([None])[0]
    if job is None:
        return
    meter = MeteredStore(settings.out / "replay.sqlite3", workers={w.name for w in job.spec.workers})
    try:
        train(job.cfg, resume=job.resume, items=job.items, cache=meter, pool_spec=job.spec)
        share_spend(meter)
    finally:
        meter.close()
