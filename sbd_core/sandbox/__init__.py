"""The code sandbox: execution-based scoring of generated code, judged outside a Linux sandbox: HumanEval+ and MBPP+
(evalplus's rules) and LiveCodeBench (lcb_runner's rules). Below the benchmarks; it imports none of them.

Public API, imported from its module (the package itself imports nothing, so :mod:`.limits` stays cheap for the
benchmarks' settings): ``scorer.evaluate_code`` (HumanEval+/MBPP+), ``lcb_grader.evaluate_lcb`` (LiveCodeBench),
``problems.validate_problems`` (schema check of an evalplus problem list), ``pool.detect_isolation`` (which sandbox
this machine supports), ``scorer.MISSING_STATUS``, ``problems.DATASETS``.

Modules: ``scorer`` (evalplus's two phases and the result), ``problems`` (schema, programs, inputs), ``oracle``
(evalplus's comparison rules), ``lcb_grader`` (LiveCodeBench's grading), ``lcb_tests`` (its test cases, decoded
without unpickling), ``plain_data`` (the type-tagged JSON that crosses the sandbox boundary), ``pool`` (host side:
worker pool), ``worker``, ``lcb_child`` and ``jail`` (the sandbox side; standard library + evalplus only).
"""
