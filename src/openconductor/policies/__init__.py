"""Conductor policies: the LM conductor and the hand-made baselines, all on one interface."""

from .base import Plan, PlanRequest, Policy, Previous, make_policy, policy_names, register_policy

__all__ = ["Plan", "PlanRequest", "Policy", "Previous", "make_policy", "policy_names", "register_policy"]
