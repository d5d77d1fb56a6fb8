"""Conductor policies: the LM conductor and the hand-made baselines, all on one interface."""

from .base import Plan, PlanRequest, Policy, PolicyError, PolicyOptions, Previous, make_policy, policy_names, register_policy

__all__ = ["Plan", "PlanRequest", "Policy", "PolicyError", "PolicyOptions", "Previous", "make_policy", "policy_names", "register_policy"]
