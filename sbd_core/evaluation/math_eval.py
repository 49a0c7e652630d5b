"""Score stored math generations with lm-eval's own machinery, without decoding again.

``score_math`` writes the problems (with the exact prompt the decoder saw) to a JSON-lines file and a
``generate_until`` task YAML (absolute ``data_files`` path, regex filter ``#### (-?\\d+)`` + ``take_first``,
``exact_match``) into ``work_dir``, then runs ``lm_eval.simple_evaluate`` with :class:`ReplayLM`, which answers each
prompt with its stored completion. The regex takes the first ``#### N`` of a completion, as
``math_task.extract_answer`` does; a completion without one is filtered to ``[invalid]`` and counts as wrong.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from sbd_core.io_utils import write_jsonl_atomic, write_text_atomic
from sbd_core.tasks import get_task

__all__ = ["TASK_NAME", "ANSWER_REGEX", "write_math_task", "score_math"]

TASK_NAME = "sbd_synth_math"
ANSWER_REGEX = r"#### (-?\d+)"
FILTER_NAME = "extract"
INVALID = "[invalid]"  # lm-eval's regex filter fallback when nothing matches


def _doc_records(problems: list[dict]) -> list[dict]:
    """Dataset rows: task_id, question, answer (string) and the decoder's exact prompt text."""
    if not problems:
        raise ValueError("no problems to score")
    task, rows, seen = get_task("math"), [], set()
    for i, p in enumerate(problems):
        missing = [k for k in ("task_id", "question", "answer") if k not in p]
        if missing:
            raise ValueError(f"problem {i} lacks field(s) {missing}")
        if p["task_id"] in seen:
            raise ValueError(f"duplicate task_id {p['task_id']!r}")
        seen.add(p["task_id"])
        rows.append({"task_id": str(p["task_id"]), "question": p["question"], "answer": str(p["answer"]),
                     "prompt": task.prompt_text(p)})
    return rows


def _task_config(data_path: Path, cache_dir: Path) -> dict:
    """The lm-eval task definition (absolute paths: lm-eval resolves relative data_files against the CWD)."""
    return {
        "task": TASK_NAME,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(data_path.resolve())}, "cache_dir": str(cache_dir.resolve())},
        "test_split": "test",
        "output_type": "generate_until",
        "doc_to_text": "{{prompt}}",
        "doc_to_target": "{{answer}}",
        "generation_kwargs": {"until": list(get_task("math").stop_sequences), "do_sample": False},
        "filter_list": [{"name": FILTER_NAME, "filter": [{"function": "regex", "regex_pattern": ANSWER_REGEX},
                                                         {"function": "take_first"}]}],
        "metric_list": [{"metric": "exact_match", "aggregation": "mean", "higher_is_better": True,
                         "ignore_case": False, "ignore_punctuation": False}],
        "metadata": {"version": 1.0},
    }


def write_math_task(problems: list[dict], work_dir: Path) -> Path:
    """Write ``<TASK_NAME>.jsonl`` and ``<TASK_NAME>.yaml`` into ``work_dir``; return the YAML path.

    The datasets cache for this task lives in ``work_dir/hf_datasets_cache`` and is cleared, so a rewritten
    problems file is never answered from a stale cache.
    """
    work_dir = Path(work_dir).resolve()
    data_path = write_jsonl_atomic(_doc_records(problems), work_dir / f"{TASK_NAME}.jsonl")
    cache_dir = work_dir / "hf_datasets_cache"
    shutil.rmtree(cache_dir, ignore_errors=True)
    text = yaml.safe_dump(_task_config(data_path, cache_dir), sort_keys=False, allow_unicode=True)
    return write_text_atomic(text, work_dir / f"{TASK_NAME}.yaml")


def _plain(value):
    """numpy scalars -> Python float; other values ("N/A" stderr) unchanged."""
    return float(value) if hasattr(value, "dtype") or isinstance(value, (int, float)) else value


def score_math(problems: list[dict], generations_path: Path, work_dir: Path) -> dict:
    """Exact-match accuracy of the stored completions in ``generations_path`` (JSON lines with ``prompt`` and
    ``completion``) on ``problems``, computed by ``lm_eval.simple_evaluate`` with :class:`ReplayLM`.

    Returns ``{"accuracy", "metrics": {"exact_match"}, "n", "per_problem": {task_id: {"correct", "extracted"}},
    "lm_eval_version"}``; ``extracted`` is None when a completion has no ``#### N``. A prompt without a stored
    completion raises :class:`~sbd_core.evaluation.lm_eval_model.MissingGenerationError`.
    """
    import lm_eval
    from lm_eval.tasks import TaskManager

    from sbd_core.evaluation.lm_eval_model import ReplayLM

    work_dir = Path(work_dir).resolve()
    write_math_task(problems, work_dir)
    results = lm_eval.simple_evaluate(
        model=ReplayLM(Path(generations_path).resolve()), tasks=[TASK_NAME],
        task_manager=TaskManager(include_path=str(work_dir), include_defaults=False),
        num_fewshot=0, bootstrap_iters=0, log_samples=True,
    )
    per_problem = {}
    for sample in results["samples"][TASK_NAME]:
        extracted = sample["filtered_resps"][0]
        per_problem[sample["doc"]["task_id"]] = {"correct": bool(sample["exact_match"]),
                                                 "extracted": None if extracted == INVALID else str(extracted)}
    if len(per_problem) != len(problems):
        raise RuntimeError(f"lm-eval scored {len(per_problem)} documents, expected {len(problems)}")
    exact = _plain(results["results"][TASK_NAME][f"exact_match,{FILTER_NAME}"])
    return {"accuracy": exact, "metrics": {"exact_match": exact}, "n": len(per_problem),
            "per_problem": per_problem, "lm_eval_version": str(lm_eval.__version__)}
