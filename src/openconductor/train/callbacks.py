"""The trainer's callbacks: every logged step to metrics files, a live progress bar, and a clean stop on a
time limit or a STOP file. Imported by ``trainer._callbacks`` when a run starts (transformers is heavy)."""

from __future__ import annotations

import csv
import json
import logging
import time
from pathlib import Path
from typing import Optional

from transformers import TrainerCallback

from .distributed import any_process

log = logging.getLogger("openconductor.train.trainer")  # the trainer's milestones, shown without -v


def read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class OnStep(TrainerCallback):
    """Calls ``advance(1)`` after every optimizer step: a caller's own progress (the fit's GRPO bar)."""

    def __init__(self, advance):
        self.advance = advance

    def on_train_begin(self, args, state, control, **kwargs):
        if state.global_step:  # resumed from a checkpoint: those steps are done
            self.advance(state.global_step)

    def on_step_end(self, args, state, control, **kwargs):
        self.advance(1)


class MetricsWriter(TrainerCallback):
    """Every logged step → metrics.jsonl and metrics.csv (columns grow as new metrics appear); under ``accelerate
    launch`` the main process writes them (TRL's logged metrics are already averaged over the processes)."""

    def __init__(self, out_dir: Path):
        self.out_dir = out_dir
        self.rows: list[dict] = []
        self.start = time.time()

    def on_train_begin(self, args, state, control, **kwargs):
        # Rows of an earlier run in this dir past the step we start from (a fresh start: all of them; a
        # resume: those after its checkpoint) would be mixed into this run's curves; drop them.
        path = self.out_dir / "metrics.jsonl"
        if path.exists() and state.is_world_process_zero:
            kept = [r for r in read_jsonl(path) if r.get("step", 0) <= state.global_step]
            path.write_text("".join(json.dumps(r) + "\n" for r in kept))
            self._write_csv(kept)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs or "reward" not in logs and not any(k.startswith("rewards/") for k in logs):
            return
        row = {"step": state.global_step, "elapsed_s": round(time.time() - self.start, 2), **{k: v for k, v in logs.items() if isinstance(v, (int, float))}}
        self.rows.append(row)
        with (self.out_dir / "metrics.jsonl").open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        self._write_csv(read_jsonl(self.out_dir / "metrics.jsonl"))

    def _write_csv(self, rows: list[dict]) -> None:
        keys = ["step", "elapsed_s"] + sorted({k for r in rows for k in r} - {"step", "elapsed_s"})
        with (self.out_dir / "metrics.csv").open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=keys)
            writer.writeheader()
            writer.writerows(rows)


class LiveBar(TrainerCallback):
    """A progress bar with the live reward, format-error rate and accuracy."""

    def __init__(self):
        self.bar = None

    def on_train_begin(self, args, state, control, **kwargs):
        from tqdm.auto import tqdm

        if not state.is_world_process_zero:
            return
        self.bar = tqdm(total=state.max_steps, initial=state.global_step, desc="GRPO", dynamic_ncols=True)

    def on_step_end(self, args, state, control, **kwargs):
        if self.bar is not None:
            self.bar.update(state.global_step - self.bar.n)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.bar is not None and logs and "reward" in logs:
            post = {"reward": f"{logs['reward']:.3f}"}
            for key, short in (("format_error_rate", "fmt_err"), ("accuracy", "acc"), ("steps_per_workflow", "steps")):
                if key in logs:
                    post[short] = f"{logs[key]:.2f}"
            self.bar.set_postfix(post)

    def on_train_end(self, args, state, control, **kwargs):
        if self.bar is not None:
            self.bar.close()


class TimeLimit(TrainerCallback):
    """Stop cleanly (save, then export) after ``run.max_minutes`` of training, or at the end of the step
    during which a file named ``STOP`` appeared in the run dir (``touch RUN/STOP``: a run stopped early
    keeps its last step, unlike an interrupt). Under ``accelerate launch`` every process stops when one sees it."""

    def __init__(self, minutes: Optional[float], stop_file: Path):
        self.deadline = None if minutes is None else time.time() + 60 * minutes
        self.stop_file = stop_file

    def on_step_end(self, args, state, control, **kwargs):
        why = None
        if self.deadline is not None and time.time() > self.deadline:
            why = "run.max_minutes reached"
        elif self.stop_file.exists():
            why = f"{self.stop_file} exists"
        if any_process(why is not None):
            why = why or "another process stopped"
            log.warning("%s at step %d; saving and stopping", why, state.global_step)
            control.should_training_stop = True
            control.should_save = True
