"""Training conductors with GRPO (TRL) against a live pool; see docs/training.md.

Importing this package is cheap; torch/TRL load only when a trainer is built.
"""
