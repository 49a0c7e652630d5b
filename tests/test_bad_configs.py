"""A mistake in the config stops the workflow before any job, with one line naming the key (its own file, beside
tests/test_workflow.py, so that the two run on different workers)."""

import pytest
import yaml

from snakemake_runs import ROOT, snakemake

SLOW = pytest.mark.slow  # the default tier keeps one case of each kind of check, the slow tier runs every case


@pytest.mark.parametrize("edit, words", [
    (lambda c: c["decode"].update(blocksize=16), ["blocksize"]),  # the schema
    pytest.param(lambda c: c["decode"].update(block_size="16"), ["block_size", "16"], marks=SLOW),
    (lambda c: c["decode"]["samplers"].append({"solver": "eb", "gamma": -1}), ["gamma", "-1"]),  # a sampler
    pytest.param(lambda c: c["decode"]["samplers"].append({"solver": "eb", "threshold": 0.5}), ["threshold", "gamma"],
                 marks=SLOW),
    pytest.param(lambda c: c["decode"]["samplers"].append({"solver": "eb", "verify": "greedy", "temperature": 0.7}),
                 ["verify='greedy'", "temperature 0"], marks=SLOW),
    (lambda c: c["finetune"].update(tokens_per_step=1000), ["tokens_per_step=1000", "batch_size x max_length"]),
    pytest.param(lambda c: c["data"]["sources"][0].pop("problems"), ["math", "problems"], marks=SLOW),
    (lambda c: c["data"].update(sources=[{"name": "gsm8k"}]), ["scratch", "synthetic", "tiny-llama"]),  # sections
    pytest.param(lambda c: c["finetune"].update(seeds=[0, 1], seed=1), ["seed or seeds"], marks=SLOW),
    pytest.param(lambda c: c["finetune"].update(eval_at_steps=[4]), ["eval_at_steps", "max_steps=4"], marks=SLOW),
    (lambda c: c["benchmarks"]["math"].update(split="train"), ["benchmarks.math.split", "'dev', 'test'", "train"]),
    pytest.param(lambda c: c["decode"].update(timing_repeats=2), ["timing_repeats"], marks=SLOW),  # the speed stage's
    pytest.param(lambda c: c.update(speed={"rounds": 1}), ["speed", "rounds", "minimum of 2"], marks=SLOW),
    (lambda c: c["decode"].update(samplers=c["decode"]["samplers"] + [{"solver": "hf_generate"}],
                                  restrict={"sbd": ["ntp", "hf-generate"]}),
     ["decode.restrict.sbd", "hf-generate", "NTP arm only"]),  # the workflow's own checks
    pytest.param(lambda c: c.update(report={"stats": {"margin_pts": 200}}), ["margin_pts", "200"], marks=SLOW),
    pytest.param(lambda c: c.update(report={"stats": {"confidence": 0.95, "margins_pts": {"code": 0}}}),
                 ["report", "stats", "margins_pts", "code"], marks=SLOW),
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
