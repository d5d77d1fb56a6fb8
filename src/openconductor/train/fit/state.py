"""A fit's record of itself (``fit.json``: each finished stage's digest and spend, an interrupted stage) and the
hooks the CLI watches it by."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from .spend_caps import MeteredStore, Spend

if TYPE_CHECKING:
    from pydantic import BaseModel

STATE_FILE = "fit.json"


def digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


class FitState:
    """``fit.json``: each finished stage's digest and spend, and the fit's total spend so far."""

    def __init__(self, out: Path):
        self.on_finish: Optional[Callable[[], None]] = None  # run_fit saves after every stage: a killed fit keeps its finished stages
        self.path = out / STATE_FILE
        data = json.loads(self.path.read_text()) if self.path.exists() else {}
        self.stages: dict[str, dict] = data.get("stages", {})
        self.previous_out: Optional[str] = data.get("settings", {}).get("out")  # where the fit's folder was when it last saved
        self.interrupted: dict = data.get("interrupted", {})  # the stage a Ctrl-C stopped, until a rerun finishes it
        spent = data.get("spend", {})
        self.spend = Spend(spent.get("calls", 0), spent.get("input_tokens", 0), spent.get("output_tokens", 0), spent.get("cost_usd", 0.0))

    def done(self, stage: str, key: str) -> bool:
        return self.stages.get(stage, {}).get("digest") == key

    def finish(self, stage: str, key: str, seconds: float, spend: dict) -> None:
        self.stages[stage] = {"digest": key, "seconds": round(seconds, 1), "spend": spend}
        if self.interrupted.get("stage") == stage:
            self.interrupted = {}
        if self.on_finish is not None:
            self.on_finish()

    def save(self, settings: "BaseModel", spend: Spend) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {"settings": json.loads(settings.model_dump_json()), "stages": self.stages, "spend": spend.as_dict()}
        if self.interrupted:
            data["interrupted"] = self.interrupted
        self.path.write_text(json.dumps(data, indent=1))


def spent_since(meter: MeteredStore, before: dict) -> dict:
    """What this invocation spent since ``before`` (``meter.spend.as_dict()`` then), without the per-worker split."""
    return {k: v - before.get(k, 0) for k, v in meter.spend.as_dict().items() if k != "per_worker"}


class Hooks:
    """What the CLI watches: a stage starting (with its expected runs), runs finishing, messages."""

    def stage(self, name: str, total: Optional[int]) -> None: ...
    def advance(self, n: int) -> None: ...
    def note(self, text: str) -> None: ...


class StageTracker(Hooks):
    """Passes every event on to ``inner`` and remembers the stage running, so that an interruption (Ctrl-C) is
    recorded against it (``fit.json``'s "interrupted") instead of the stage looking finished."""

    def __init__(self, inner: Hooks, state: FitState):
        self.inner, self.state, self.current = inner, state, ""

    def stage(self, name: str, total: Optional[int]) -> None:
        self.current = name
        before = self.state.interrupted
        if before.get("stage") == name:
            self.inner.note(f"{name}: going on from its interruption at {before.get('at', '?')} (what it paid for replays from the store)")
        self.inner.stage(name, total)

    def advance(self, n: int) -> None:
        self.inner.advance(n)

    def note(self, text: str) -> None:
        self.inner.note(text)

    def interrupted(self) -> None:
        if self.current:
            self.state.interrupted = {"stage": self.current, "at": time.strftime("%Y-%m-%d %H:%M:%S")}
