"""Former home of the code scorer; it now lives in ``sbd_core.evaluation.code`` (import from there)."""

from .code import DATASETS, MISSING_STATUS, Isolation, detect_isolation, evaluate_code, validate_problems

__all__ = ["evaluate_code", "validate_problems", "detect_isolation", "Isolation", "MISSING_STATUS", "DATASETS"]
