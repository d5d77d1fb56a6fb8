"""Simulated worlds: stand-in pools whose workers are formulas, not models. Every number measured with
them is SIMULATED. The ``simulated`` provider loads a built-in world when a pool names it."""
