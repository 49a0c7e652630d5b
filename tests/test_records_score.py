"""The score file's format (sbd_core.records.score): the decode cost a score adds, hand-computed, and the reader's
round trip and errors."""

import json

import pytest

from sbd_core.records.score import ScoreFileError, add_decode_cost, read_score, tokens_digest, write_score


def _records():
    # two SBD problems: 10 tokens in 4 forwards (blocks recorded), 7 tokens in 2 forwards (no blocks: by formula)
    return [{"id": "a", "completion": "x", "nfe": 4, "num_tokens": 10, "token_ids": [1, 2], "blocks": 2},
            {"id": "b", "completion": "y", "nfe": 2, "num_tokens": 7, "token_ids": [3], "accepted": [3],
             "drafted": [6]}]


def test_decode_cost_totals_and_per_problem_costs_by_hand():
    verdict = {"accuracy": 0.5, "per_problem": {"a": {"correct": True}, "b": {"correct": False}}}
    settings = {"sampler_spec": {"solver": "eb", "mode": "sbd"}, "block_size": 6, "batch_size": 50,
                "engine": "fast", "mean_prompt_tokens": 30.0, "recipe": {"objective": "sbd"}}
    result = add_decode_cost(verdict, _records(), settings)
    assert (result["n_problems"], result["total_nfe"], result["total_tokens"]) == (2, 6, 17)
    assert result["mean_nfe"] == 3.0 and result["tokens_per_forward"] == pytest.approx(17 / 6)
    assert result["mean_tokens_per_forward"] == pytest.approx((10 / 4 + 7 / 2) / 2)
    assert result["total_blocks"] == 2 + 2  # recorded 2; ceil(7 / 6) = 2 by the formula
    assert result["per_problem"]["a"] == {"correct": True, "nfe": 4, "num_tokens": 10,
                                          "tokens_sha": tokens_digest([1, 2])}
    assert result["per_problem"]["b"]["accepted"] == [3] and result["per_problem"]["b"]["drafted"] == [6]
    assert result["engine"] == "fast" and result["block_size"] == 6


def test_a_hand_written_file_gets_no_cost():
    verdict = {"accuracy": 1.0, "per_problem": {"a": {"correct": True}}}
    result = add_decode_cost(dict(verdict), [{"id": "a", "completion": "x"}], None)
    assert result == verdict


def test_round_trip_and_errors_name_the_file(tmp_path):
    score = {"model": "m", "objective": "ntp", "sampler": "ntp", "benchmark": "math", "accuracy": 0.9,
             "n_problems": 10, "total_nfe": 100, "total_tokens": 100, "mean_nfe": 10.0, "tokens_per_forward": 1.0,
             "sampler_spec": {"solver": "ntp", "family": "ntp"}}
    path = tmp_path / "math.json"
    write_score(score, path)
    assert read_score(path) == score
    path.write_text(json.dumps({k: v for k, v in score.items() if k != "total_nfe"}))
    with pytest.raises(ScoreFileError, match=r"math.json: missing required key\(s\) \['total_nfe'\]"):
        read_score(path)
    path.write_text(json.dumps({**score, "accuracy": 1.5}))
    with pytest.raises(ScoreFileError, match="math.json: accuracy must be a fraction"):
        read_score(path)
