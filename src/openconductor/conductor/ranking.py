"""The pool's measured ranking as a conductor reads it: per area, the workers with the best measured accuracy first
(a worker's ``profile``, or a simulated worker's accuracy measured in its world), the rank words that name them
("math#1"), and the words a trained conductor's ids are bound to on a pool."""

from __future__ import annotations

from typing import Optional

from ..providers.base import provider_class
from ..spec import PoolSpec

RANKED = 3  # workers named per area: the choice is among the best few, and the prompt stays short


def ranking(spec: PoolSpec) -> list[str]:
    """Per area, the workers with the best measured accuracy first ("math: atlas-pro 86, euclid-14b 84, ..."):
    a small conductor copies a name from a list far more reliably than it compares prose across workers."""
    ranked = ranked_by_area(spec)
    if not ranked:
        return []
    return ["Measured accuracy alone, best first:"] + [
        f"{area}: " + ", ".join(f"{spec.workers[i].name} {round(100 * a)}" for a, i in best) for area, best in ranked.items()]


def rank_aliases(spec: PoolSpec) -> tuple[tuple[str, int], ...]:
    """Words that name a worker by its place in ``ranking`` ("math#1": the best in math, "quantitative#2"),
    with the id each names: a conductor that writes them picks by what the pool measured, whatever its workers are called."""
    ranked = ranked_by_area(spec)
    keys = area_keys(list(ranked))
    return tuple((f"{keys[area]}#{k}", i) for area, best in ranked.items() for k, (_, i) in enumerate(best, 1))


def area_keys(areas: list[str]) -> dict[str, str]:
    """One word per area for ``rank_aliases``: its first word ("quantitative" for "quantitative reasoning"), or the
    whole area hyphenated where two areas share a first word."""
    firsts = [a.split()[0] if a.split() else a for a in areas]
    return {a: f if firsts.count(f) == 1 else "-".join(a.split()) for a, f in zip(areas, firsts)}


def ranked_by_area(spec: PoolSpec, top: Optional[int] = RANKED) -> dict[str, list[tuple[float, int]]]:
    """Per area (in the order the profiles name them), the ``top`` best (accuracy, id) (None: all), ties in pool order:
    the one ranking rule behind the prompt's lines, the rank aliases and the simulated rank lookup (``sim.pools.area_ranking``)."""
    profiles = [(i, w.profile or _measured(w)) for i, w in enumerate(spec.workers) if w.provider != "conductor"]
    areas = dict.fromkeys(a for _, p in profiles for a in p)
    return {area: sorted(((p[area], i) for i, p in profiles if area in p), key=lambda t: -t[0])[:top] for area in areas}


def binding(prompt, spec: PoolSpec) -> tuple[tuple[str, ...], tuple[tuple[str, int], ...]]:
    """The words a trained conductor's ids are bound to on ``spec`` (``prompt``: its ``PromptSettings`` or manifest
    ``PromptInfo``): the workers' names when its ids follow the names its reasoning gives, and with
    ``rank_aliases`` the ranking's words too; nothing for a conductor that writes ids."""
    if not prompt.ids_follow_names or prompt.show == "ids":
        return (), ()
    return tuple(w.name for w in spec.workers), (rank_aliases(spec) if prompt.rank_aliases else ())


def _measured(worker) -> dict[str, float]:
    if worker.provider != "simulated":
        return {}
    return provider_class(worker.provider).measured_profile(worker)  # measured in the world that answers it
