"""Our runs beside the paper's Table 1, cell by cell, with the difference in points and in speedup.

Which of our runs fills which cell of the paper's table:

* the model: a model of the config whose ``paper_base`` names a row group of the table (``Llama-3.1 8B``, ``Qwen-3 8B``);
* ``Loss=NTP, Sampling=NTP``: the NTP arm decoded with NTP; ``Loss=SBD, Sampling=NTP``: the SBD arm decoded with NTP;
* ``SBD (gamma_low)`` / ``SBD (gamma_high)``: the SBD arm decoded with the EB-Sampler (entropy proxy, greedy, the
  config's block size) at the paper's gamma for the benchmark's group: reasoning benchmarks (MATH500, AIME25,
  LiveCodeBench) 0.1 / 0.35, chat benchmarks (GSM8K, HumanEval+, MBPP) 0.35 / 0.6 (the paper's section 3.1). A cell
  stays empty when that sampler was not decoded or the benchmark is not available (the note says why).

Speedups are NFE speedups, as in the paper; its NTP rows print none (1x by definition). The mean speedup is the
arithmetic mean of the row's per-benchmark speedups (how the paper's Speedup column is computed), over the benchmarks
the row has.
"""

from __future__ import annotations

import pandas as pd

from ..errors import UserError
from .tables import DASH, PAPER_BENCHMARKS

#: The paper's gamma per benchmark group and row.
PAPER_GAMMAS = {"reasoning": {"gamma_low": 0.1, "gamma_high": 0.35}, "chat": {"gamma_low": 0.35, "gamma_high": 0.6}}
#: The paper's rows of one base model: (Loss, Sampling, our objective, which gamma or None for NTP sampling).
PAPER_ROWS = (("NTP", "NTP", "ntp", None), ("SBD", "NTP", "sbd", None),
              ("SBD", "SBD (gamma_high)", "sbd", "gamma_high"), ("SBD", "SBD (gamma_low)", "sbd", "gamma_low"))
COMPARISON_COLUMNS = ["model", "paper_base", "loss", "sampling", "benchmark", "paper_column", "sampler",
                      "accuracy_pct", "nfe_speedup", "paper_accuracy_pct", "paper_speedup", "delta_pts",
                      "delta_speedup", "note"]


def paper_sampler(group: str, which: str | None) -> str:
    """Our sampler tag for a paper row: ``ntp``, or the EB-Sampler at the paper's gamma for the benchmark's group."""
    from ..samplers import sampler_spec

    return "ntp" if which is None else sampler_spec("eb", gamma=PAPER_GAMMAS[group][which])["tag"]


def _paper_cells(paper: pd.DataFrame, base: str, loss: str, sampling: str) -> pd.Series | None:
    rows = paper[(paper["base"] == base) & (paper["loss"] == loss) & (paper["sampling"] == sampling)]
    return rows.iloc[0] if len(rows) else None


def _our_cell(summary: pd.DataFrame, model: str, objective: str, sampler: str, benchmark: str):
    rows = summary[(summary["model"] == model) & (summary["objective"] == objective)
                   & (summary["sampler"] == sampler) & (summary["benchmark"] == benchmark)]
    return rows.iloc[0] if len(rows) else None


def compare(summary: pd.DataFrame, paper: pd.DataFrame, bases: dict[str, str]) -> pd.DataFrame:
    """One row per (model, paper row, paper benchmark): our accuracy and NFE speedup, the paper's, the differences;
    UserError when ``bases`` names a base model the paper's table does not have."""
    from ..benchmarks import BENCHMARKS

    known = sorted(set(paper["base"]))
    unknown = {model: base for model, base in bases.items() if base not in known}
    if unknown:
        raise UserError(f"paper bases {unknown} name no base model of the paper table; its bases: {known} (config: "
                        "models.<name>.paper_base)")
    paper_benchmarks = [b for b in BENCHMARKS.values() if b.paper_column]
    rows = []
    for model, base in bases.items():
        for loss, sampling, objective, which in PAPER_ROWS:
            printed = _paper_cells(paper, base, loss, sampling)
            for bench in paper_benchmarks:
                sampler = paper_sampler(bench.group, which)
                ours = _our_cell(summary, model, objective, sampler, bench.name)
                acc = float("nan") if ours is None else 100 * ours["accuracy"]
                speed = float("nan") if ours is None else ours["nfe_speedup"]
                p_acc = float("nan") if printed is None else printed[f"{bench.paper_column}_accuracy_pct"]
                p_speed = 1.0 if which is None else (float("nan") if printed is None
                                                      else printed[f"{bench.paper_column}_speedup"])
                note = bench.reason if not bench.available else ("" if ours is not None else f"{sampler} not run")
                rows.append({"model": model, "paper_base": base, "loss": loss, "sampling": sampling,
                             "benchmark": bench.name, "paper_column": bench.paper_column, "sampler": sampler,
                             "accuracy_pct": acc, "nfe_speedup": speed, "paper_accuracy_pct": p_acc,
                             "paper_speedup": p_speed, "delta_pts": acc - p_acc, "delta_speedup": speed - p_speed,
                             "note": note})
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


def _cell(rec: pd.Series) -> str:
    if pd.isna(rec["accuracy_pct"]):
        return DASH
    return (f"{rec['accuracy_pct']:.1f} ({rec['nfe_speedup']:.2f}x) vs {rec['paper_accuracy_pct']:.1f} "
            f"({rec['paper_speedup']:.2f}x): {rec['delta_pts']:+.1f} pt, {rec['delta_speedup']:+.2f}x")


def comparison_display(long: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """The comparison as a table in the paper's layout: 'ours (x) vs paper (x): delta' per cell, mean speedups."""
    names = dict(PAPER_BENCHMARKS)
    rows = []
    for (model, base, loss, sampling), grp in long.groupby(["model", "paper_base", "loss", "sampling"], sort=False):
        printed = _paper_cells(paper, base, loss, sampling)
        ours_mean = grp["nfe_speedup"].dropna().mean() if grp["nfe_speedup"].notna().any() else float("nan")
        paper_mean = float("nan") if printed is None else printed["mean_speedup"]
        row = {"Model": f"{model} ({base})", "Loss": loss, "Sampling": sampling.replace("gamma_", "\u03b3_"),
               "Speedup (ours vs paper)": DASH if pd.isna(ours_mean) else f"{ours_mean:.2f}x vs {paper_mean:.1f}x"}
        for rec in grp.itertuples(index=False):
            row[names[rec.paper_column]] = _cell(pd.Series(rec._asdict()))
        rows.append(row)
    return pd.DataFrame(rows).astype(str)
