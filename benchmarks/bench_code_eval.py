"""Side-by-side timing: evalplus's own ``evaluate`` vs ``evaluate_code`` on the same problems and samples.

For each dataset (HumanEval built from the original test file, MBPP+ pre-release; see tests/code_eval_datasets.py,
which reads ../shared/benchmarks) both scorers get every problem's reference solution as its sample, the same
number of worker processes and the same memory limit:

* evalplus: ``evalplus.evaluate.evaluate`` in a child process, with the problems as its override file and an empty
  cache (so it computes the ground truth, as a first run does); the time is that of the ``evaluate`` call (its
  20-second exit thread and the interpreter start are not counted);
* ours: ``evaluate_code`` (reference phase + sample phase, sandboxed workers) in this process, wall time.

Every reference solution should pass; the JSON lists the ones each scorer failed (evalplus 0.3.1 fails HumanEval/32
because of its find_zero defect, see oracle.py, and may time out on the slowest MBPP+ problems under load). Prints a
table, then ONE JSON document as the last line.

    .venv/bin/python benchmarks/bench_code_eval.py [--datasets humaneval mbpp] [--parallel 2] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from code_eval_datasets import benchmarks_dir, humaneval_plus_like, mbpp_plus  # noqa: E402

from sbd_core.sandbox.pool import detect_isolation  # noqa: E402
from sbd_core.sandbox.scorer import evaluate_code  # noqa: E402

EVALPLUS_CHILD = r"""
import json, os, sys, time
config = json.loads(sys.argv[1])
from evalplus.evaluate import evaluate
start = time.perf_counter()
evaluate(dataset=config["dataset"], samples=config["samples"], parallel=config["parallel"])
seconds = time.perf_counter() - start
results = json.load(open(config["samples"].replace(".jsonl", "_eval_results.json")))["eval"]
failed = sorted(t for t, r in results.items() if not r[0]["base_status"] == r[0]["plus_status"] == "pass")
print("RESULT " + json.dumps({"seconds": seconds, "pass@1_plus": 1 - len(failed) / len(results),
                              "failed": failed}), flush=True)
os._exit(0)
"""


def load(dataset: str, folder: Path, limit: int | None) -> list[dict]:
    problems = humaneval_plus_like(folder) if dataset == "humaneval" else mbpp_plus(folder)
    return problems[:limit] if limit else problems


def reference_samples(problems: list[dict]) -> dict[str, str]:
    """Completions (HumanEval: body after the prompt) or full programs (MBPP+: the canonical solution)."""
    return {p["task_id"]: p["canonical_solution"] for p in problems}


def run_evalplus(problems: list[dict], samples: dict[str, str], dataset: str, parallel: int, memory: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench_evalplus_") as tmp:
        problems_path, samples_path = Path(tmp) / "problems.jsonl", Path(tmp) / "samples.jsonl"
        problems_path.write_text("".join(json.dumps(p) + "\n" for p in problems))
        key = "completion" if dataset == "humaneval" else "solution"
        samples_path.write_text("".join(json.dumps({"task_id": t, key: s}) + "\n" for t, s in samples.items()))
        env = {**os.environ, "XDG_CACHE_HOME": str(Path(tmp) / "cache"), "EVALPLUS_MAX_MEMORY_BYTES": str(memory),
               "HUMANEVAL_OVERRIDE_PATH" if dataset == "humaneval" else "MBPP_OVERRIDE_PATH": str(problems_path)}
        env.pop("EVALPLUS_TIMEOUT_PER_TASK", None)
        config = {"dataset": dataset, "samples": str(samples_path), "parallel": parallel}
        done = subprocess.run([sys.executable, "-c", EVALPLUS_CHILD, json.dumps(config)], env=env, cwd=tmp,
                              capture_output=True, text=True, check=False)
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if not lines:
            raise RuntimeError(f"evalplus failed ({done.returncode}):\n{done.stderr[-3000:]}")
        return json.loads(lines[-1][len("RESULT "):])


def run_ours(problems: list[dict], samples: dict[str, str], dataset: str, parallel: int, memory: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench_ours_") as tmp:
        start = time.perf_counter()
        result = evaluate_code(problems, samples, Path(tmp), dataset=dataset, parallel=parallel,
                               max_memory_bytes=memory, timeout_s=7200,
                               completion_format="append" if dataset == "humaneval" else "program")
        return {"seconds": time.perf_counter() - start, "pass@1_plus": result["pass@1_plus"],
                "failed": sorted(t for t, r in result["per_problem"].items() if not r["passed_plus"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["humaneval", "mbpp"], choices=["humaneval", "mbpp"])
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--max-memory-bytes", type=int, default=4 << 30, help="evalplus's default: 4 GiB")
    parser.add_argument("--limit", type=int, default=None, help="first N problems of each dataset (quick check)")
    args = parser.parse_args()
    folder = benchmarks_dir()
    if folder is None:
        sys.exit("../shared/benchmarks not found: nothing to benchmark")
    report: dict = {"datasets": {}, "parallel": args.parallel, "max_memory_bytes": args.max_memory_bytes,
                    "isolation": list(detect_isolation().prefix), "cpus": os.cpu_count(),
                    "python": platform.python_version(), "load_average_before": os.getloadavg()[0]}
    print(f"{'dataset':<10} {'problems':>8} {'evalplus s':>11} {'ours s':>9} {'ratio':>6}  pass@1+ (evalplus / ours)")
    for dataset in args.datasets:
        problems = load(dataset, folder, args.limit)
        samples = reference_samples(problems)
        theirs = run_evalplus(problems, samples, dataset, args.parallel, args.max_memory_bytes)
        ours = run_ours(problems, samples, dataset, args.parallel, args.max_memory_bytes)
        ratio = ours["seconds"] / theirs["seconds"]
        report["datasets"][dataset] = {"problems": len(problems), "evalplus_s": round(theirs["seconds"], 2),
                                       "ours_s": round(ours["seconds"], 2), "ratio": round(ratio, 3),
                                       "pass@1_plus": {"evalplus": theirs["pass@1_plus"], "ours": ours["pass@1_plus"]},
                                       "failed": {"evalplus": theirs["failed"], "ours": ours["failed"]}}
        print(f"{dataset:<10} {len(problems):>8} {theirs['seconds']:>11.1f} {ours['seconds']:>9.1f} {ratio:>6.2f}  "
              f"{theirs['pass@1_plus']:.3f} / {ours['pass@1_plus']:.3f}")
    total_theirs = sum(d["evalplus_s"] for d in report["datasets"].values())
    total_ours = sum(d["ours_s"] for d in report["datasets"].values())
    report["total"] = {"evalplus_s": round(total_theirs, 2), "ours_s": round(total_ours, 2),
                       "ratio": round(total_ours / total_theirs, 3)}
    report["load_average_after"] = os.getloadavg()[0]
    print(f"{'total':<10} {'':>8} {total_theirs:>11.1f} {total_ours:>9.1f} {total_ours / total_theirs:>6.2f}")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
