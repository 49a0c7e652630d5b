"""The report's Peers section: the training-free peers of the NTP arm (Hugging Face ``generate`` greedy, prompt lookup)
beside the NTP arm and every block-decoding run of the final budget, per model and benchmark: what SBD buys over a
free speedup (docs/peers.md).
"""

from __future__ import annotations

import pandas as pd

from ..samplers import PEER_MODE
from .render import number, x_text
from .section import Context, Section
from .seeds import final_runs
from .speed import floor_line, speeds


def peers_markdown(final: pd.DataFrame, speeds: pd.DataFrame) -> str:
    """The section (empty when the run decoded no peer); ``final``: one summary row per run (seed means); ``speeds``:
    the speed table (its A/A control)."""
    if not (final["mode"] == PEER_MODE).any():
        return ""
    shown = final[(final["objective"] == "ntp") | (final["mode"] == "sbd")]
    rank = shown["mode"].map({"ntp": 0, PEER_MODE: 1, "sbd": 2})
    shown = shown.assign(_rank=rank).sort_values(["model", "benchmark", "_rank", "nfe_speedup", "label"])
    lines = ["## Peers: what SBD buys over a free speedup\n",
             "| model | benchmark | run | accuracy % | tokens / forward | NFE x | wall x (batch) | latency x (batch 1) "
             "| tokens/s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in shown.itertuples(index=False):
        lines.append(f"| {r.model} | {r.benchmark} | {r.label} | {100 * r.accuracy:.1f} | {r.tokens_per_forward:.2f} "
                     f"| {x_text(r.nfe_speedup)} | {x_text(r.wall_speedup)} ({number(r.batch_size, '.0f')}) "
                     f"| {x_text(r.latency_speedup)} | {number(r.tokens_per_s, '.0f')} |")
    lines.append("\nAll speedups against the NTP arm (NTP model, NTP decoding) of the same model and benchmark. "
                 "wall x: the speed stage's decode time at the run's batch size (in brackets; prompt lookup decodes one "
                 "problem at a time); latency x: the speed stage's problems one at a time on both sides (- without a "
                 "speed stage); medians over rounds (intervals: Wall-clock). Tokens / forward: generated tokens / "
                 "forwards actually run (counted on the model). Two kinds of lossless speedup: prompt lookup drafts "
                 "from the text and keeps what the NTP arm's greedy decoding would write; a run marked (lossless) "
                 "drafts SBD blocks and keeps what the SBD arm's own NTP mode would write (checked problem by problem: "
                 "Lossless SBD).\n")
    lines.append(floor_line(speeds))
    return "\n".join(lines) + "\n"


class Peers(Section):
    """The Peers section (an empty paragraph without a peer's row)."""

    def markdown(self, ctx: Context) -> list[str]:
        return [peers_markdown(final_runs(ctx), speeds(ctx))]
