"""The report's verified runs (sbd_core.report.lossless): each checked against its arm's NTP decoding problem by problem
(an error naming the first differing problem), marked lossless in the summary, Table 1, the peers and the figures, and
their acceptance, from hand-made score files."""

import json
import logging
from pathlib import Path

import pytest
from test_report import score_dict

from sbd_core.records.score import tokens_digest
from sbd_core.report import ScoreFileError, build_report, load_scores, summarize, table1
from sbd_core.samplers import sampler_spec

TOKENS = {f"math/{i}": [10 + i, 11, 12] for i in range(4)}  # the SBD arm's NTP-mode tokens per problem
VERIFY = {"gamma": 0.3, "verify": "greedy"}


def scored(root: Path, objective, solver, params, tokens=TOKENS, drafts=None, nfe=12) -> Path:
    """A score file of 4 math problems (3 right) with each problem's token digest, cost and (verified) drafts."""
    tag = sampler_spec(solver, **params)["tag"]
    data = score_dict(objective, tag, solver, params, "math", 0.75, nfe * len(tokens), n_problems=len(tokens))
    data.update(per_problem={
        pid: {"correct": i != 0, "nfe": nfe, "tokens_sha": tokens_digest(ids), **(drafts or {})}
        for i, (pid, ids) in enumerate(tokens.items())})
    path = root / f"{objective}_{tag}.json"
    path.write_text(json.dumps(data))
    return path


def runs(root: Path, verified_tokens=TOKENS, sbd_ntp=True) -> list[Path]:
    paths = [scored(root, "ntp", "ntp", {}, tokens={k: v[::-1] for k, v in TOKENS.items()}),
             scored(root, "sbd", "eb", {"gamma": 0.3}, nfe=3),
             scored(root, "sbd", "eb", VERIFY, verified_tokens, drafts={"accepted": [5, 2], "drafted": [5, 5]}, nfe=4)]
    return paths + ([scored(root, "sbd", "ntp", {})] if sbd_ntp else [])


def test_verified_runs_are_checked_marked_and_their_acceptance_reported(tmp_path):
    summary = summarize(load_scores(runs(tmp_path))).set_index(["objective", "sampler"])
    verified = summary.loc[("sbd", "eb-entropy-g0.3-verify")]
    assert verified["lossless"] == "yes" and verified["label"] == "SBD / EB \u03b3=0.3 + verify (lossless)"
    # 4 problems, each with drafts of 5 tokens keeping 5 and 2: 28 of 40 kept, half the drafts whole
    assert verified["acceptance_rate"] == pytest.approx(28 / 40) and verified["drafts_whole"] == 0.5
    assert verified["accepted_hist"] == "2:4 5:4" and verified["nfe_speedup"] == pytest.approx(3.0)
    plain = summary.loc[("sbd", "eb-entropy-g0.3")]
    assert plain["lossless"] == "" and plain["label"] == "SBD / EB \u03b3=0.3"
    table = table1(summarize(load_scores(runs(tmp_path))))
    assert "SBD / EB \u03b3=0.3 + verify (lossless)" in set(table["label"])
    report = build_report(runs(tmp_path), paper_table=None)["report.md"].decode()
    section = report.split("## Lossless SBD (verify)")[1].split("\n## ")[0]
    assert "| math | SBD / EB \u03b3=0.3 + verify (lossless) | yes | 75.0 | " in section
    assert "| 3.00x |" in section and "| 70% | 50% | 2:4 5:4 |" in section


def test_a_verified_run_with_other_tokens_is_an_error_naming_the_problem(tmp_path):
    wrong = {**TOKENS, "math/2": [12, 11, 99]}
    with pytest.raises(ScoreFileError, match=r"sbd_eb-entropy-g0.3-verify.json: problem 'math/2' differs from the sbd "
                                             r"arm's NTP decoding \(.*sbd_ntp.json\)"):
        summarize(load_scores(runs(tmp_path, verified_tokens=wrong)))


def test_unchecked_and_sampled_runs_say_so(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="sbd_core.report"):
        summary = summarize(load_scores(runs(tmp_path, sbd_ntp=False)))
    verified = summary[summary["sampler"] == "eb-entropy-g0.3-verify"].iloc[0]
    assert verified["lossless"] == "not checked" and "(lossless)" not in verified["label"]
    assert "no NTP-mode run of its arm" in caplog.text
    sampled = {"gamma": 0.3, "verify": "sample", "temperature": 0.7}
    paths = runs(tmp_path) + [scored(tmp_path, "sbd", "eb", sampled, drafts={"accepted": [1], "drafted": [5]})]
    summary = summarize(load_scores(paths)).set_index("sampler")
    assert summary.loc["eb-entropy-g0.3-verify-t0.7-s0", "lossless"] == "in distribution"
