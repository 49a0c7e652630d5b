"""The stages that only read and write files load no torch: data, benchmark, score (math through lm-eval, code through
evalplus), likelihood-data and report, each through ``python -m sbd_core``'s own entry point in one fresh interpreter.
A DAG runs dozens of their jobs (a score job per decode), and torch's import alone costs each about two seconds of CPU.
The stages that compute (base, pack, finetune, decode, likelihood, speed, timing) load it, as they must.
"""

import json
import os
import subprocess
import sys

from snakemake_runs import ROOT

NAMES = {"model": "tiny", "objective": "ntp", "sampler": "ntp"}


def test_the_file_only_stages_run_without_loading_torch(tmp_path):
    settings = json.dumps({"limit": 4})
    names = json.dumps(NAMES)
    stages = [
        ["data", "--spec", json.dumps({"sources": [{"name": "math", "problems": 8}]}), "--out", "data"],
        ["benchmark", "--name", "math", "--settings", settings, "--out", "bench"],
        ["benchmark", "--name", "code", "--settings", settings, "--out", "bench"],
        ["score", "--benchmark", "math", "--generations", "math.jsonl", "--data", "bench/math_test.jsonl",
         "--settings", settings, "--names", names, "--out", "scores/math.json"],
        ["score", "--benchmark", "code", "--generations", "code.jsonl", "--data", "bench/code_test.jsonl",
         "--settings", settings, "--names", names, "--out", "scores/code.json"],
        ["likelihood-data", "--task", "math_mc", "--settings", json.dumps({"problems": 8}), "--out", "math_mc"],
        ["report", "--scores", "decoded.json", "--out", "report"],
    ]
    # between the benchmark and the score stages: one completion per problem, the math answers right, the code wrong
    answers = ("import json\n"
               "for name in ('math', 'code'):\n"
               "    rows = [json.loads(line) for line in open(f'bench/{name}_test.jsonl')]\n"
               "    with open(f'{name}.jsonl', 'w') as f:\n"
               "        for r in rows:\n"
               "            text = f\"#### {r['answer']}\" if name == 'math' else '    return None'\n"
               "            f.write(json.dumps({'id': r['sbd_id'], 'completion': text}) + '\\n')\n")
    script = ("import sys\n"
              "from sbd_core.cli import main\n"
              f"for argv in {stages[:3]!r}:\n"
              "    assert main(['--no-progress', *argv]) == 0, argv\n"
              f"{answers}"
              f"for argv in {stages[3:]!r}:\n"
              "    assert main(['--no-progress', *argv]) == 0, argv\n"
              "print('loaded:', sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n")
    # the report reads the DAG's scores, which carry their decode's cost (a bare generations file has none)
    (tmp_path / "decoded.json").write_text(json.dumps({
        **NAMES, "benchmark": "math", "accuracy": 1.0, "n_problems": 4, "total_nfe": 16, "total_tokens": 16,
        "mean_nfe": 4.0, "tokens_per_forward": 1.0,
        "sampler_spec": {"mode": "ntp", "solver": "ntp", "params": {}, "family": "ntp", "tag": "ntp"}}))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=600,
                         env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                              "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    assert out.stdout.strip().splitlines()[-1] == "loaded: []", out.stdout[-3000:]
    math, code = (json.loads((tmp_path / "scores" / f"{name}.json").read_text()) for name in ("math", "code"))
    assert (math["accuracy"], math["n"], code["accuracy"], code["n"]) == (1.0, 4, 0.0, 4)  # the stages did their work
    assert "torch_threads" not in math["provenance"]["hardware"]  # recorded only by a stage that loaded torch
    assert (tmp_path / "report" / "summary.csv").is_file() and (tmp_path / "math_mc" / "provenance.json").is_file()
