"""``conductor sim-pool``: write a generated SIMULATED pool as an ordinary pool file."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..cli_shared import console, fail
from .pools import PROFILE_QUESTIONS


def sim_pool_command(
    seed: int = typer.Option(..., "--seed", help="The pool's seed: the same seed writes the same pool."),
    out: Path = typer.Option(..., "--out", "-o", help="Where to write the pool file (TOML)."),
    held_out: bool = typer.Option(False, "--held-out", help="Draw from every family, with at least one held out of training."),
    latency: bool = typer.Option(False, "--latency", help="Workers sleep their nominal latency (default: described, not slept)."),
    checkpoint: Optional[str] = typer.Option(None, "--checkpoint", help="A trained conductor the pool names (e.g. builtin:sim-bucket)."),
    min_workers: int = typer.Option(3, help="Fewest workers."),
    max_workers: int = typer.Option(8, help="Most workers."),
    profile: Optional[str] = typer.Option(None, "--profile", help="Each worker's measured accuracy per 'area' (4 ranking lines) or per 'subtopic' "
                                          "(16). Default: as the --checkpoint was trained to read, else area."),
    profile_questions: int = typer.Option(PROFILE_QUESTIONS, "--profile-questions", help="How many questions the profile is measured on "
                                          "(960: 60 a subtopic; more is a finer measurement of the same skills)."),
):
    """Write a random SIMULATED pool (world v3) generated from a seed: workers, descriptions, prices, limits."""
    from .pools import PROFILES, generate_pool, pool_toml

    if profile is None and checkpoint:
        from ..conductor.manifest import ManifestError, read_manifest
        from ..pool import PoolConfigError
        from ..conductor.checkpoint import checkpoint_path

        try:
            profile = read_manifest(checkpoint_path(checkpoint)).ranking
        except (PoolConfigError, ManifestError) as exc:
            fail(f"--checkpoint {checkpoint}: {exc}")
    profile = profile or "area"
    if profile not in PROFILES:
        fail(f"--profile {profile!r}: use one of {', '.join(PROFILES)}")
    try:
        pool = generate_pool(seed, held_out=held_out, min_workers=min_workers, max_workers=max_workers)
    except ValueError as exc:
        fail(str(exc))
    try:
        text = pool_toml(pool, latency=latency, checkpoint=checkpoint, profile=profile, profile_questions=profile_questions)
    except ValueError as exc:
        fail(f"--profile-questions {profile_questions}: {exc}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    console.print(f"wrote {out}: pool {pool.name}, {len(pool.workers)} SIMULATED workers ({', '.join(f'{w.name} [{w.family}]' for w in pool.workers)})",
                  markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    app.command("sim-pool")(sim_pool_command)
