"""A policy file (or dict) turned into a :class:`LoadedPolicy`, every problem reported with its
line; and the policy tests (``examples``, test files) run against it."""

from callwarden.policyfile.compile import compile_policy, load_policy_file, load_policy_text
from callwarden.policyfile.settings import LoadedPolicy

__all__ = ["LoadedPolicy", "compile_policy", "load_policy_file", "load_policy_text"]
