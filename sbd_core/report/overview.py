"""The head of report.md (what the run holds, what its cells mean), Table 1 with the A/A floor beside it, and the
training recipe of each arm."""

from __future__ import annotations

import pandas as pd

from ..solver_rules import INFERENCE_DEPARTURES
from .outputs import TABLE1
from .paper import comparison
from .render import csv_bytes, to_latex, to_markdown
from .section import Context, Section, derived
from .seeds import seeds_note
from .speed import floor
from .tables import table1, table1_display

#: Shown at the top of report.md when the run has no model standing for a row of the paper's table.
SYNTHETIC_NOTE = (
    "Speedups measured on a tiny model on synthetic tasks (the embedded default, the claim run) are not comparable "
    "with the paper's 8B-model numbers; only runs of the paper's models on the paper's benchmarks can be compared "
    "with Table 1. A short fine-tune leaves SBD's masked mode far below the NTP arm, as the paper says of SBD (its "
    "Figure 5). The claim run trains long enough to test the paper's claim on a CPU: `snakemake --cores all "
    "--configfile config/claim.yaml`, its shipped numbers in results/reference/claim/, the study that chose its "
    "recipe in docs/claim-study.md."
)
DEFINITIONS = (
    "Cells read `accuracy % [{level} interval] (NFE speedup x [interval], wall wall-clock speedup x [interval])`: "
    "Wilson score intervals of the accuracy (problems of one family counted through a design effect), bootstrap "
    "intervals of the NFE speedups (see Differences to the NTP arm), intervals of the wall speedups over the speed "
    "stage's rounds (see Wall-clock). **NFE speedup** = forward passes of the NTP "
    "arm (NTP-trained model, NTP decoding, same model and benchmark) / forward passes of the row: the paper's "
    "measure. **Wall speedup** = the NTP arm's decode time / the row's, measured by the speed stage on a subset of "
    "the test problems at the decode batch size, alone on the machine: the median over rounds of the per-round "
    "paired ratio, its interval over rounds, beside the A/A control (see Wall-clock): what the NFE reduction buys "
    "on the hardware of this run. The mean NFE speedup is the arithmetic mean over benchmarks, as the paper's "
    "Speedup column. **Peers** (NTP / HF generate, NTP / prompt lookup (k)): training-free decoding of the NTP arm "
    "with Hugging Face `generate`, greedy, to show what SBD buys over a free speedup; their NFE counts every forward "
    "of `generate` (its first also prefills the prompt), so HF generate costs the NTP arm's NFE for the same tokens; "
    "a prompt-lookup forward verifies up to k draft tokens copied from the text, and its tokens per forward are 1 + "
    "the drafts accepted per forward. Prompt lookup decodes one problem at a time (transformers supports batch 1 "
    "only; `batch_size` 1 in summary.csv), so its wall speedup sets batch 1 against the NTP arm's batch. "
    "Machine-readable: [summary.csv](summary.csv) (one row per run, sampler parameters as columns), "
    "[table1.csv](table1.csv)."
)


@derived
def _table1(ctx: Context) -> tuple[pd.DataFrame, pd.DataFrame]:
    table = table1(ctx.summary)
    return table, table1_display(table)


class Head(Section):
    """The report's head and Table 1 (``table1.{csv,md,tex}``)."""

    def files(self, ctx: Context) -> dict[str, bytes]:
        table, disp = _table1(ctx)
        caption = (f"SBD reproduction: accuracy % [{100 * ctx.stats.confidence:g}% interval] (NFE speedup x "
                   f"[interval], wall-clock speedup x [interval]). {seeds_note(ctx.summary)}")
        return dict(zip(TABLE1, (csv_bytes(table), to_markdown(disp).encode(), to_latex(disp, caption).encode())))

    def markdown(self, ctx: Context) -> list[str]:
        summary = ctx.summary
        models = ", ".join(sorted(summary["model"].unique()))
        benchmarks = ", ".join(f"{bench} ({', '.join(sorted(rows['split'].unique()))} split)"
                               for bench, rows in summary.groupby("benchmark"))
        parts = ["# SBD benchmark report\n",
                 f"{len(summary)} score files; models: {models}; benchmarks: {benchmarks}.\n"]
        if comparison(ctx) is None:
            parts.append(f"> **Note.** {SYNTHETIC_NOTE}\n")
        return parts + [DEFINITIONS.format(level=f"{100 * ctx.stats.confidence:g}%") + "\n",
                        "## Reproduction (Table 1 layout)\n", to_markdown(_table1(ctx)[1]), floor(ctx),
                        f"_{seeds_note(summary)}_\n"]


class Recipe(Section):
    """Which departures from the paper's training recipe each arm was trained with, and which samplers depart from its
    inference (listed only when one does)."""

    def markdown(self, ctx: Context) -> list[str]:
        arms = ctx.summary[["model", "objective", "departures"]].drop_duplicates()
        lines = ["## Training recipe\n", "Departures from the paper's recipe, per arm (none: the paper's recipe):\n"]
        lines += [f"- {r.model} / {r.objective}: {r.departures or 'none'}" for r in arms.itertuples(index=False)]
        if ctx.summary["trained_on"].ne("").any():  # records older than the models' hardware in them name none
            where = ctx.summary[["model", "objective", "trained_on"]].drop_duplicates()
            lines += ["", "Where each arm was fine-tuned (its model's provenance; torch's CPU kernels set the floats, "
                      "so runs on CPUs of two kernels take two training paths):\n"]
            lines += [f"- {r.model} / {r.objective}: {r.trained_on or 'not recorded'}"
                      for r in where.itertuples(index=False)]
        departing = [(tag, key, value) for key in INFERENCE_DEPARTURES if key in ctx.summary
                     for tag, value in sorted(ctx.summary[["sampler", key]].dropna().drop_duplicates().values.tolist())]
        if departing:  # a spec holds such a parameter only when it is set (solver_rules.INFERENCE_DEPARTURES)
            lines += ["", "Departures from the paper's inference, per sampler (docs/definitions.md):\n"]
            lines += [f"- {tag}: {key}={value} ({INFERENCE_DEPARTURES[key]})" for tag, key, value in departing]
        return ["\n".join(lines) + "\n"]
