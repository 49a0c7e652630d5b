"""The files the stages exchange, one module per format, each the only place that writes and reads it:
:mod:`.generations` (the decode stage's records, their provenance and the cost they carry: widths and blocks),
:mod:`.score` (the score stage's file: verdicts, cost totals and per-problem costs),
:mod:`.timing` (the time(k) file of the timing stage) and :mod:`.speed` (the speed stage's file). Torch-free: the
report and the workflow read them without loading a model.
"""
