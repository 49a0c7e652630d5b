"""lm-eval's ``sbd`` model (:mod:`.model`) and a CLI that registers it (:mod:`.cli`): the layer above the benchmarks.

Named ``lm_eval_adapter``, not ``lm_eval``, so that inside the package it can never shadow the ``lm_eval`` library.
"""
