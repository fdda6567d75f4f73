"""A policy file (or dict) turned into a compiled policy, every problem reported with its line."""

from callwarden.policyfile.compile import compile_policy, load_policy_file, load_policy_text

__all__ = ["compile_policy", "load_policy_file", "load_policy_text"]
