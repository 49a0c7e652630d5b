"""Which of the paper's Figures 5, 12 and 13 a run draws, by the solver families its SBD arm is decoded with.

Kept free of pandas and matplotlib: the workflow imports it to list the report's files when it parses the config.
"""

from __future__ import annotations

#: Figure stem -> the solver families (of the SBD arm) it compares, drawn in this order (:mod:`.curves`).
FIGURES = {"figure5": ("eb-entropy",), "figure12": ("eb-entropy", "factor"),
           "figure13": ("eb-confidence", "factor")}


def planned_figures(sbd_families) -> list[str]:
    """The figure stems a run draws, given the solver families its SBD arm is decoded with."""
    families = set(sbd_families)
    return [stem for stem, needed in FIGURES.items() if set(needed) <= families]
