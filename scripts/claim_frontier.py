"""Where runs stand against the paper's claim, as issue 26 states it (docs/claim-study.md).

For every fine-tune budget and task of each run's ``summary.csv``: the NTP arm's accuracy, and the plain SBD row
(masked mode, no verify) with an NFE speedup of at least ``--min-speedup`` whose paired difference to the NTP arm is
closest to equivalence (the highest lower bound). A point is in the claim's region when the NTP arm is inside
``[--floor, --ceiling]`` and that row's interval lies inside +-``--margin``. Prints one markdown table and, with
``--plot``, draws the points (the NTP arm's accuracy against the difference, with its interval) and the region.
With ``--discordance``, also how often the SBD model's NTP mode and the NTP arm disagree (problems one solves and the
other does not), by the lower of the two accuracies: what decides how many problems a 2-point equivalence needs.

    python scripts/claim_frontier.py results/reference/claim-dev/summary.csv results/study-r8/report/summary.csv \\
        --plot docs/claim_frontier.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib
import pandas as pd

from sbd_core.report.keys import is_baseline

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 (after the backend is chosen)

COLUMNS = ["run", "train_steps", "benchmark", "ntp_arm", "row", "nfe_speedup", "diff", "diff_lo", "diff_hi",
           "in_region"]


def frontier(summaries: dict[str, pd.DataFrame], min_speedup: float = 2.5, floor: float = 0.75,
             ceiling: float = 0.97, margin: float = 0.02) -> pd.DataFrame:
    """One row per (run, budget, task) of seed 0: the NTP arm's accuracy and the best plain SBD row that reaches
    ``min_speedup`` (``row`` empty and the differences NaN where none does)."""
    out = []
    for run, df in summaries.items():
        df = df[df["train_seed"] == 0]
        for (steps, bench), group in df.groupby(["train_steps", "benchmark"], sort=True):
            arm = group[is_baseline(group)]
            plain = group[(group["objective"] == "sbd") & (group["mode"] == "sbd") & (group["lossless"] != "yes")
                          & (group["nfe_speedup"] >= min_speedup)]
            ntp = float(arm["accuracy"].iloc[0]) if len(arm) else float("nan")
            if len(plain):
                best = plain.loc[plain["diff_lo"].idxmax()]
                inside = bool(floor <= ntp <= ceiling and -margin < best["diff_lo"] and best["diff_hi"] < margin)
                out.append([run, int(steps), bench, ntp, best["label"], float(best["nfe_speedup"]),
                            float(best["diff_vs_ntp"]), float(best["diff_lo"]), float(best["diff_hi"]), inside])
            else:
                out.append([run, int(steps), bench, ntp, "", float("nan"), float("nan"), float("nan"),
                            float("nan"), False])
    return pd.DataFrame(out, columns=COLUMNS)


#: accuracy bands of the discordance table: the lower of the two arms' accuracies
BANDS = [(0.75, 0.85), (0.85, 0.90), (0.90, 0.93), (0.93, 0.95), (0.95, 0.97), (0.97, 1.0)]


def discordance(summaries: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Per accuracy band (the lower of the NTP arm's and the SBD model's NTP-mode accuracy, every seed and budget of
    every run): how many pairs, and the least, median and largest share of problems on which the two disagree. Pairs
    below the first band (the NTP arm still learning) are left out."""
    shares = []
    for df in summaries.values():
        arm = df[is_baseline(df)].set_index(["train_seed", "train_steps", "benchmark"])["accuracy"]
        mode = df[(df["objective"] == "sbd") & (df["sampler"] == "ntp")].dropna(subset=["n_better"])
        for r in mode.itertuples():
            key = (r.train_seed, r.train_steps, r.benchmark)
            if key in arm.index:
                shares.append((min(arm[key], r.accuracy), (r.n_better + r.n_worse) / r.n_problems))
    pairs = pd.DataFrame(shares, columns=["accuracy", "share"])
    out = []
    for lo, hi in BANDS:
        band = pairs[(pairs["accuracy"] >= lo) & ((pairs["accuracy"] < hi) | (hi == 1.0))]["share"]
        out.append([lo, hi, len(band), band.min(), band.median(), band.max()])
    return pd.DataFrame(out, columns=["lo", "hi", "pairs", "least", "median", "largest"])


def discordance_markdown(table: pd.DataFrame) -> str:
    """The discordance table in percent, as docs/claim-study.md shows it."""
    lines = ["| lower accuracy of the two | pairs | disagree on (least / median / largest) |", "|---|---|---|"]
    for r in table.itertuples():
        shares = "-" if not r.pairs else f"{100 * r.least:.1f}% / {100 * r.median:.1f}% / {100 * r.largest:.1f}%"
        lines.append(f"| {100 * r.lo:.0f}-{100 * r.hi:.0f}% | {r.pairs} | {shares} |")
    return "\n".join(lines)


def markdown(table: pd.DataFrame) -> str:
    """The table in points, as docs/claim-study.md shows it."""
    lines = ["| run | steps | task | NTP arm | best plain SBD row (NFE speedup) | difference [interval] | in the region |",
             "|---|---|---|---|---|---|---|"]
    for r in table.itertuples():
        best = (f"{r.row} ({r.nfe_speedup:.2f}x)", f"{100 * r.diff:+.1f} [{100 * r.diff_lo:+.1f}, "
                f"{100 * r.diff_hi:+.1f}]") if r.row else ("none", "")
        lines.append(f"| {r.run} | {r.train_steps:,} | {r.benchmark} | {100 * r.ntp_arm:.1f} | {best[0]} | {best[1]} "
                     f"| {'yes' if r.in_region else 'no'} |")
    return "\n".join(lines)


def plot(table: pd.DataFrame, path: Path, floor: float, ceiling: float, margin: float) -> None:
    """The points with their intervals, one marker per task, and the claim's region shaded."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.add_patch(plt.Rectangle((100 * floor, -100 * margin), 100 * (ceiling - floor), 200 * margin, color="tab:green",
                               alpha=0.15, label="the claim's region"))
    shown = table.dropna(subset=["diff"])
    for marker, (bench, group) in zip("osD^v<>", shown.groupby("benchmark")):
        ax.errorbar(100 * group["ntp_arm"], 100 * group["diff"],
                    yerr=[100 * (group["diff"] - group["diff_lo"]), 100 * (group["diff_hi"] - group["diff"])],
                    fmt=marker, capsize=2, label=bench)
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_xlabel("NTP arm accuracy (%)")
    ax.set_ylabel("best plain SBD row - NTP arm (points)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("summaries", nargs="+", help="summary.csv files, or NAME=PATH to name a run")
    parser.add_argument("--min-speedup", type=float, default=2.5)
    parser.add_argument("--floor", type=float, default=0.75)
    parser.add_argument("--ceiling", type=float, default=0.97)
    parser.add_argument("--margin", type=float, default=0.02)
    parser.add_argument("--plot", type=Path, help="write the figure here (PNG)")
    parser.add_argument("--discordance", action="store_true",
                        help="also print how often the SBD NTP mode and the NTP arm disagree, by accuracy band")
    args = parser.parse_args(argv)
    named = {}
    for item in args.summaries:
        name, _, path = item.rpartition("=")
        if not Path(path).is_file():
            parser.error(f"{path}: no such summary.csv")
        named[name or Path(path).parent.parent.name] = pd.read_csv(path)
    table = frontier(named, args.min_speedup, args.floor, args.ceiling, args.margin)
    print(markdown(table))
    if args.discordance:
        print("\n" + discordance_markdown(discordance(named)))
    if args.plot:
        plot(table, args.plot, args.floor, args.ceiling, args.margin)


if __name__ == "__main__":
    main()
