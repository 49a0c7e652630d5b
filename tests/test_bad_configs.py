"""A mistake in the config stops the workflow before any job, with one line naming the key (its own file, beside
tests/test_workflow.py, so that the two run on different workers)."""

from pathlib import Path

import pytest
import yaml

from snakemake_runs import snakemake

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("edit, words", [
    (lambda c: c["decode"].update(blocksize=16), ["blocksize"]),
    (lambda c: c["decode"].update(block_size="16"), ["block_size", "16"]),
    (lambda c: c["decode"]["samplers"].append({"solver": "eb", "gamma": -1}), ["gamma", "-1"]),
    (lambda c: c["decode"]["samplers"].append({"solver": "eb", "threshold": 0.5}), ["threshold", "gamma"]),
    (lambda c: c["decode"]["samplers"].append({"solver": "eb", "verify": "greedy", "temperature": 0.7}),
     ["verify='greedy'", "temperature 0"]),
    (lambda c: c["finetune"].update(tokens_per_step=1000), ["tokens_per_step=1000", "batch_size x max_length"]),
    (lambda c: c["data"]["sources"][0].pop("problems"), ["math", "problems"]),
    (lambda c: c["data"].update(sources=[{"name": "gsm8k"}]), ["scratch", "synthetic", "tiny-llama"]),
    (lambda c: c["finetune"].update(seeds=[0, 1], seed=1), ["seed or seeds"]),
    (lambda c: c["finetune"].update(eval_at_steps=[4]), ["eval_at_steps", "max_steps=4"]),
    (lambda c: c["benchmarks"]["math"].update(split="train"), ["benchmarks.math.split", "'dev', 'test'", "train"]),
    (lambda c: c["decode"].update(timing_repeats=2), ["timing_repeats"]),  # wall-clock is the speed stage's
    (lambda c: c.update(speed={"rounds": 1}), ["speed", "rounds", "minimum of 2"]),
    (lambda c: c["decode"].update(samplers=c["decode"]["samplers"] + [{"solver": "hf_generate"}],
                                  restrict={"sbd": ["ntp", "hf-generate"]}),
     ["decode.restrict.sbd", "hf-generate", "NTP arm only"]),
    (lambda c: c.update(report={"stats": {"margin_pts": 200}}), ["margin_pts", "200"]),
    (lambda c: c.update(report={"stats": {"confidence": 0.95, "margins_pts": {"code": 0}}}),
     ["report", "stats", "margins_pts", "code"]),
])
def test_bad_config_stops_before_any_work(tmp_path, edit, words):
    config = yaml.safe_load((ROOT / "tests" / "smoke.yaml").read_text())
    edit(config)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    out = snakemake(tmp_path, "-n", "--configfile", str(path), check=False)
    assert out.returncode != 0
    for word in words:
        assert word in out.stdout + out.stderr
    assert "Failed validating" not in out.stdout + out.stderr  # a line naming the key, not the schema
    assert not (tmp_path / "results").exists()
