"""Execution-based scoring of HumanEval+ and MBPP+ samples: evalplus's rules, judged outside a Linux sandbox.

Public API: ``evaluate_code`` (scoring), ``validate_problems`` (schema check of a problem list for a dataset),
``detect_isolation`` (which sandbox this machine supports), ``MISSING_STATUS``, ``DATASETS``.

Modules: ``scorer`` (the two phases and the result), ``problems`` (schema, programs, inputs), ``oracle`` (evalplus's
comparison rules), ``plain_data`` (the type-tagged JSON that crosses the sandbox boundary), ``sandbox`` (host side:
worker pool), ``worker`` and ``jail`` (the sandbox side; standard library + evalplus only).
"""

from .problems import DATASETS, validate_problems
from .sandbox import Isolation, detect_isolation
from .scorer import MISSING_STATUS, evaluate_code

__all__ = ["evaluate_code", "validate_problems", "detect_isolation", "Isolation", "MISSING_STATUS", "DATASETS"]
