"""The README is a front page: short, its first screen says where results land and how to rerun, redraw and run on
SLURM, every number of its results tables comes from the shipped run, and every link of it and of docs/ resolves.
(Its rerun and redraw commands run as printed in tests/test_workflow.py, on the smoke run's products.)"""

import re
from pathlib import Path

import pandas as pd
import pytest

from sbd_core.report.seeds import final_budget

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
REFERENCE = ROOT / "results" / "reference"
# each results section of the README: its heading, the shipped run it quotes, that run's benchmarks
RESULTS = {"## What the claim run shows": (REFERENCE / "claim" / "summary.csv", ["code_graded", "math_graded"]),
           "## The quick run: what the embedded default shows": (REFERENCE / "embedded" / "summary.csv",
                                                                  ["code", "math"])}


def test_readme_is_a_front_page():
    lines = README.splitlines()
    assert len(lines) <= 200
    first_screen = "\n".join(lines[:50])
    for what in ("results/embedded/report/",  # where the report lands
                 "snakemake --forcerun score",  # rerun one stage
                 "rm results/embedded/report/speedup_math.png && snakemake",  # redraw a figure
                 "--configfile config/figures.yaml",  # redraw Figures 5, 12, 13
                 "--profile profiles/slurm",  # SLURM
                 "--configfile config/config.yaml my.yaml",  # stack a config
                 "--report report.html"):
        assert what in first_screen, what
    quick_reference = README.split("## Quick reference", 1)[1].split("\n## ", 1)[0]
    assert "lm_eval_adapter.cli run --model sbd" in quick_reference


def results_tables(heading: str) -> list[list[dict[str, str]]]:
    """The markdown tables of one results section of the README, as rows keyed by header."""
    section = README.split(heading + "\n", 1)[1].split("\n## ", 1)[0]
    tables = []
    for block in re.findall(r"(?:^\|.*\|\n)+", section, re.M):
        header, _, *body = [[cell.strip() for cell in line.strip("|").split("|")] for line in block.splitlines()]
        tables.append([dict(zip(header, row)) for row in body])
    return tables


def shipped(summary: Path) -> dict[tuple[str, str], dict]:
    """The rows of a shipped run's summary.csv that its report's Table 1 shows (fine-tune seed 0, the final budget:
    a run with checkpoints has rows for every budget), by (label, benchmark)."""
    table = pd.read_csv(summary)
    rows = final_budget(table[table["train_seed"] == 0])
    return {(row["label"], row["benchmark"]): row for row in rows.to_dict("records")}


def pct(value: str, signed: bool = False) -> str:
    return f"{100 * float(value):{'+' if signed else ''}.1f}"


def x(value: str) -> str:
    return f"{float(value):.2f}"


ACCURACY = re.compile(r"(?P<acc>[\d.]+) \[(?P<lo>[\d.]+), (?P<hi>[\d.]+)\] \((?P<nfe>[\d.]+)x"
                      r"(?:; wall (?P<wall>[\d.]+)x \[(?P<wall_lo>[\d.]+), (?P<wall_hi>[\d.]+)\])?"
                      r"(?:; latency (?P<latency>[\d.]+)x)?\)")
DIFFERENCE = re.compile(r"(?P<diff>[+-][\d.]+) \[(?P<lo>[+-][\d.]+), (?P<hi>[+-][\d.]+)\] pt, "
                        r"p=(?P<p_diff>[<\d.e+-]+) / (?P<p_equiv>[<\d.e+-]+): (?P<verdict>.+)")


def p_value(value: str) -> str:
    """A Holm-adjusted p value as the README prints it."""
    return "<0.001" if float(value) < 0.001 else f"{float(value):.2g}"


@pytest.mark.parametrize("heading", RESULTS)
def test_every_number_of_the_results_tables_is_the_shipped_runs(heading):
    """Each cell of the accuracy table and of the differences table of a results section (the claim run's, the quick
    run's) equals its shipped summary.csv's row for that label and benchmark, at the printed precision."""
    summary, names = RESULTS[heading]
    accuracy, differences, *_ = results_tables(heading)  # the claim run's third table: its seeds, tested below
    rows = shipped(summary)
    benchmarks = {column: column.split(":")[0] for column in accuracy[0] if column != "objective / sampling"}
    assert sorted(benchmarks.values()) == names
    for line in accuracy:
        for column, benchmark in benchmarks.items():
            row, cell = rows[(line["objective / sampling"], benchmark)], ACCURACY.fullmatch(line[column])
            assert cell, line[column]
            printed = {k: v for k, v in cell.groupdict().items() if v is not None}
            expected = {"acc": pct(row["accuracy"]), "lo": pct(row["accuracy_lo"]), "hi": pct(row["accuracy_hi"]),
                        "nfe": x(row["nfe_speedup"]), "wall": x(row["wall_speedup"]),
                        "wall_lo": x(row["wall_speedup_lo"]), "wall_hi": x(row["wall_speedup_hi"]),
                        "latency": x(row["latency_speedup"])}
            assert printed == {k: expected[k] for k in printed}, (line["objective / sampling"], benchmark)
    for line in differences:
        for benchmark in names:
            row, cell = rows[(line["difference to the NTP arm"], benchmark)], DIFFERENCE.fullmatch(line[benchmark])
            assert cell, line[benchmark]
            assert cell.groupdict() == {
                "diff": pct(row["diff_vs_ntp"], True), "lo": pct(row["diff_lo"], True),
                "hi": pct(row["diff_hi"], True), "p_diff": p_value(row["diff_p_holm"]),
                "p_equiv": p_value(row["equiv_p_holm"]), "verdict": row["accuracy_verdict"]}, \
                (line["difference to the NTP arm"], benchmark)


CLAIM_SEEDS = REFERENCE / "claim-seeds" / "summary.csv"


def test_the_claim_runs_seeds_table_is_the_shipped_seeds_run():
    """The claim run's third table (its three fine-tune seeds): each row ``<label>: <what>`` equals the shipped seeds
    run's summary.csv at the final budget, seeds 0, 1, 2 in order: the accuracies, the differences to each seed's NTP
    arm (with the NFE speedups of a block sampler), or the difference over seeds, then problems, with its words."""
    *_, seeds = results_tables("## What the claim run shows")
    table = final_budget(pd.read_csv(CLAIM_SEEDS))
    first = next(iter(seeds[0]))
    assert first == "three fine-tune seeds (0 / 1 / 2)" and len(seeds) == 5
    for line in seeds:
        label, what = line[first].rsplit(": ", 1)
        for benchmark in ("math_graded", "code_graded"):
            rows = table[(table["label"] == label) & (table["benchmark"] == benchmark)].sort_values("train_seed")
            assert list(rows["train_seed"]) == [0, 1, 2], (label, benchmark)
            if what == "accuracy per seed":
                expected = " / ".join(pct(v) for v in rows["accuracy"])
            elif what == "difference per seed":
                expected = " / ".join(pct(v, True) for v in rows["diff_vs_ntp"]) + " pt"
                if rows["sampler"].iloc[0] != "ntp":
                    expected += " (" + " / ".join(f"{x(v)}x" for v in rows["nfe_speedup"]) + ")"
            else:
                assert what == "over seeds, then problems", line[first]
                row = rows.iloc[0]
                expected = (f"{pct(row['seeds_diff'], True)} [{pct(row['seeds_diff_lo'], True)}, "
                            f"{pct(row['seeds_diff_hi'], True)}] pt: {row['seeds_accuracy_verdict']}")
            assert line[benchmark] == expected, (line[first], benchmark)


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", [ROOT / "README.md", ROOT / "config" / "README.md", ROOT / "results" / "README.md",
                                  *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    for target in LINK.findall(page.read_text()):
        if not re.match(r"[a-z]+://", target):
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links {target}"
