"""The protocol of the report's topics: each topic module offers its summary columns, its files and its part of
report.md as a :class:`Section`, and :mod:`.build` walks the list of them over one :class:`Context`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..settings import StatsSettings


@dataclass(frozen=True)
class Context:
    """What the report is built from: the loaded score rows and the other stages' files, the settings, and (once the
    sections have added their columns) the summary. Values derived from it are computed once (:func:`derived`)."""

    scores: pd.DataFrame
    stats: StatsSettings = StatsSettings()
    speed_docs: tuple = ()
    timings: dict = field(default_factory=dict)
    likelihood_paths: tuple = ()
    paper_path: Path | None = None
    paper_bases: dict = field(default_factory=dict)
    summary: pd.DataFrame | None = None
    memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)


def derived(make):
    """Decorate ``make(ctx)``: computed once per :class:`Context`, then read from it."""
    @functools.wraps(make)
    def get(ctx: Context):
        if make not in ctx.memo:
            ctx.memo[make] = make(ctx)
        return ctx.memo[make]
    return get


class Section:
    """One topic of the report; a topic overrides what it has (the defaults add nothing).

    * ``column_names``: the summary columns :meth:`columns` adds (their order in summary.csv);
    * :meth:`columns`: the summary with this topic's columns (the sections run in order, each on the last one's
      frame);
    * :meth:`files`: the files it writes beside report.md (``{name: bytes}``);
    * :meth:`markdown`: its paragraphs of report.md, joined with the other sections' by newlines (none: the topic has
      no part in this run; an empty paragraph keeps its blank line).
    """

    column_names: tuple[str, ...] = ()

    def columns(self, frame: pd.DataFrame, ctx: Context) -> pd.DataFrame:
        return frame

    def files(self, ctx: Context) -> dict[str, bytes]:
        return {}

    def markdown(self, ctx: Context) -> list[str]:
        return []
