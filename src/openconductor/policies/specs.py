"""``--policy`` specs as ``conductor eval`` and ``conductor ask`` read them, parsed into each policy's options.

A spec is ``name``, ``name:ARG`` (the policy's positional option: ``single:WORKER``, ``fixed:NAME``,
``router:PATH``, ``lookup:PATH``) or ``name:key=value,key=value``; ``single:*`` means one per worker.
Values arrive as text and are validated by the policy's ``Options`` model; every policy is checked
against the pool before anything runs, so a typo'd worker or workflow is one error, not a row of failed runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Optional

from ..pool import TOOL_PROVIDERS, PoolSpec
from .base import Policy, PolicyError, make_policy, policy_class


def parse_policy_specs(specs: Iterable[str], pool: PoolSpec) -> list[tuple[str, Policy]]:
    """(label, policy) pairs; the label is what the table and results file call the policy."""
    out: list[tuple[str, Policy]] = []
    for spec in specs:
        name, _, arg = spec.partition(":")
        name = name.strip()
        if name == "single" and arg == "*":
            for w in pool.workers:  # language models only: a tool alone answers nothing (name it to try)
                if w.provider != "conductor" and w.provider not in TOOL_PROVIDERS:
                    out.append((f"single:{w.name}", checked_policy(name, {"worker": w.name}, pool, spec)))
            continue
        options = _options(spec, name, arg)
        out.append((policy_label(spec, name, options), checked_policy(name, options, pool, spec)))
    labels = [label for label, _ in out]
    if len(set(labels)) != len(labels):
        raise PolicyError(f"a policy is listed twice: {labels}")
    return out


def _options(spec: str, name: str, arg: str) -> dict[str, Any]:
    """The text options of ``name:arg`` (validated later by the policy's Options)."""
    if not arg:
        return {}
    if "=" in arg:
        options = {}
        for part in arg.split(","):
            key, eq, value = part.partition("=")
            if not eq:
                raise PolicyError(f"policy {spec!r}: expected key=value pairs, got {part!r}")
            options[key.strip()] = value.strip()
        return options
    positional = policy_class(name).Options.positional
    if positional is None:
        raise PolicyError(f"policy {spec!r}: {name!r} takes key=value options, not a bare argument")
    return {positional: arg}


def checked_policy(name: str, options: dict[str, Any], pool: PoolSpec, spec: Optional[str] = None) -> Policy:
    """The policy ``name`` with ``options``, checked against ``pool`` now (``Policy.check``). PolicyError says
    what is wrong, prefixed with the spec."""
    spec = spec or name
    if name == "fixed" and "workflow" not in options:
        declared = ", ".join(sorted(pool.workflows)) or "none in this pool"
        raise PolicyError(f"the fixed policy needs a workflow: --policy fixed:NAME (declared: {declared}) or fixed:PATH.toml")
    try:
        policy = make_policy(name, **options)
        policy.check(pool)
    except PolicyError as exc:
        message = str(exc).removeprefix(f"policy {name!r}: ")
        raise PolicyError(f"policy {spec!r}: {message}") from None
    except ValueError as exc:  # what only the policy can tell: a workflow file that is missing, a router that is not a model
        raise PolicyError(f"policy {spec!r}: {exc}") from exc
    return policy


def policy_label(spec: str, name: str, options: dict) -> str:
    """The spec as written, except a router is named by its model file's stem, not its whole path."""
    if name == "router" and "model" in options:
        stem = Path(str(options["model"])).stem
        return "router" if stem == "router" else f"router:{stem}"
    return spec
