"""scripts/claim_frontier.py: which plain SBD row it picks for a budget and task, and when a point is in the claim's
region (the NTP arm in [75, 97] and that row's interval inside +-2 points), on a summary written here."""

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

_SPEC = importlib.util.spec_from_file_location("claim_frontier",
                                               Path(__file__).parents[1] / "scripts" / "claim_frontier.py")
frontier = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(frontier)


def _row(objective, sampler, mode, accuracy, speedup=1.0, diff=None, lo=None, hi=None, lossless=None,
         bench="math", steps=100, seed=0):
    return {"train_seed": seed, "train_steps": steps, "benchmark": bench, "objective": objective, "sampler": sampler,
            "mode": mode, "lossless": lossless, "label": f"{objective}/{sampler}", "accuracy": accuracy,
            "nfe_speedup": speedup, "diff_vs_ntp": diff, "diff_lo": lo, "diff_hi": hi}


def _summary(ntp_accuracy, bench="math"):
    rows = [_row("ntp", "ntp", "ntp", ntp_accuracy, bench=bench),
            _row("sbd", "ntp", "ntp", ntp_accuracy, diff=0.0, lo=-0.001, hi=0.001, bench=bench),  # NTP mode: not plain
            _row("sbd", "g1-verify", "sbd", ntp_accuracy, 4.0, 0.0, -0.001, 0.001, lossless="yes", bench=bench),
            _row("sbd", "g0.3", "sbd", ntp_accuracy - 0.001, 2.0, -0.001, -0.005, 0.003, bench=bench),  # below 2.5x
            _row("sbd", "g0.1", "sbd", ntp_accuracy - 0.005, 3.0, -0.005, -0.015, 0.006, bench=bench),
            _row("sbd", "g1", "sbd", ntp_accuracy - 0.05, 4.5, -0.05, -0.07, -0.03, bench=bench),
            _row("sbd", "g0.1", "sbd", 0.0, 3.0, -0.9, -0.95, -0.85, bench=bench, seed=1)]  # another seed: not read
    return pd.DataFrame(rows)


def test_the_closest_plain_row_at_the_speedup_decides_the_region():
    table = frontier.frontier({"a": _summary(0.90), "b": _summary(0.99, "code")})
    assert table[["run", "benchmark", "row", "nfe_speedup", "in_region"]].values.tolist() == [
        ["a", "math", "sbd/g0.1", 3.0, True], ["b", "code", "sbd/g0.1", 3.0, False]]  # b: the NTP arm above 97
    assert "| a | 100 | math | 90.0 | sbd/g0.1 (3.00x) | -0.5 [-1.5, +0.6] | yes |" in frontier.markdown(table)


def test_no_row_fast_enough_or_an_interval_past_the_margin_is_outside():
    slow = _summary(0.90)
    slow.loc[slow["sampler"].isin(["g0.1", "g1"]), "nfe_speedup"] = 2.4
    table = frontier.frontier({"slow": slow})
    assert table["row"].tolist() == [""] and not table["in_region"].any()
    assert "| slow | 100 | math | 90.0 | none |  | no |" in frontier.markdown(table)
    wide = _summary(0.90)
    wide.loc[wide["sampler"] == "g0.1", "diff_lo"] = -0.021
    assert frontier.frontier({"wide": wide})["in_region"].tolist() == [False]


def test_the_command_line_prints_the_table_and_draws_the_figure(tmp_path, capsys):
    path = tmp_path / "run" / "report" / "summary.csv"
    path.parent.mkdir(parents=True)
    _summary(0.90).to_csv(path, index=False)
    frontier.main([str(path), "--plot", str(tmp_path / "f.png")])
    assert "| run | 100 | math | 90.0 | sbd/g0.1 (3.00x)" in capsys.readouterr().out
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"


def test_discordance_is_the_share_of_problems_the_two_modes_disagree_on_by_the_lower_accuracy():
    def pair(ntp, mode, better, worse, seed=0, n=1000):
        return [{**_row("ntp", "ntp", "ntp", ntp, seed=seed), "n_problems": n, "n_better": None, "n_worse": None},
                {**_row("sbd", "ntp", "ntp", mode, seed=seed), "n_problems": n, "n_better": better, "n_worse": worse}]
    # lower accuracies 0.91, 0.92, 0.96 (the SBD mode's 0.96 against the arm's 0.975); 0.80 has no NTP arm to pair
    one = pd.DataFrame(pair(0.93, 0.91, 30, 50) + pair(0.92, 0.94, 60, 40, seed=1))
    two = pd.DataFrame(pair(0.975, 0.96, 10, 25, n=500) + [{**_row("sbd", "ntp", "ntp", 0.80, seed=3),
                                                             "n_problems": 1000, "n_better": 5, "n_worse": 5}])
    table = frontier.discordance({"one": one, "two": two}).set_index("lo")
    assert table.loc[0.90, "pairs"] == 2
    assert table.loc[0.90, ["least", "median", "largest"]].tolist() == pytest.approx([0.08, 0.09, 0.10])
    assert table.loc[0.95, "pairs"] == 1 and table.loc[0.95, "median"] == pytest.approx(0.07)  # 35 of 500
    assert table.loc[0.75, "pairs"] == 0 and table["pairs"].sum() == 3
    text = frontier.discordance_markdown(table.reset_index())
    assert "| 90-93% | 2 | 8.0% / 9.0% / 10.0% |" in text and "| 75-85% | 0 | - |" in text
