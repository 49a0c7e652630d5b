"""Execution-based scoring of generated code, judged outside a Linux sandbox: HumanEval+ and MBPP+ (evalplus's rules)
and LiveCodeBench (lcb_runner's rules).

Public API: ``evaluate_code`` (HumanEval+/MBPP+), ``evaluate_lcb`` (LiveCodeBench), ``validate_problems`` (schema
check of an evalplus problem list), ``detect_isolation`` (which sandbox this machine supports), ``MISSING_STATUS``,
``DATASETS``.

Modules: ``scorer`` (evalplus's two phases and the result), ``problems`` (schema, programs, inputs), ``oracle``
(evalplus's comparison rules), ``lcb_grader`` (LiveCodeBench's grading), ``lcb_tests`` (its test cases, decoded
without unpickling), ``plain_data`` (the type-tagged JSON that crosses the sandbox boundary), ``sandbox`` (host side:
worker pool), ``worker``, ``lcb_child`` and ``jail`` (the sandbox side; standard library + evalplus only).
"""

from .lcb_grader import evaluate_lcb
from .problems import DATASETS, validate_problems
from .sandbox import Isolation, detect_isolation
from .scorer import MISSING_STATUS, evaluate_code

__all__ = ["evaluate_code", "evaluate_lcb", "validate_problems", "detect_isolation", "Isolation", "MISSING_STATUS",
           "DATASETS"]
