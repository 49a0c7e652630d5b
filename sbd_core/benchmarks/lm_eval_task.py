"""Benchmarks scored by lm-eval 0.4.13 from a shipped task YAML (``lm_eval_tasks/<task>.yaml``).

The YAML is the one home of the benchmark's protocol: prompt (``doc_to_text``, a function in
:mod:`sbd_core.benchmarks.lm_eval_hooks`), system prompt (``description``), generation settings
(``generation_kwargs``), hub dataset and revision, filters and metrics. The benchmark's settings defaults are read
from it, :meth:`LmEvalBenchmark.prompt` calls its ``doc_to_text`` and renders the chat as lm-eval does, and scoring
runs lm-eval on it. Hence the same task run outside the DAG,

    python -m sbd_core.lm_eval_adapter.cli run --model sbd --model_args pretrained=CKPT,... \\
        --tasks sbd_gsm8k --include_path sbd_core/benchmarks/lm_eval_tasks --apply_chat_template

hands the model byte-identical prompts and scores the same generations to the same number as the DAG.

Scoring stored generations (the DAG's score stage) writes a *derived* task into the work directory
(:func:`write_lm_eval_task`): ``include:`` of the shipped YAML with the test file as a local JSON dataset, the run's
system prompt (none for plain prompts) and generation settings; lm-eval then evaluates it with ``ReplayLM``, which
answers every request with the stored completion of its problem id. The same derived task serves offline runs of
``--model sbd`` on local data (``--include_path <work dir>``).
"""

from __future__ import annotations

import importlib
import shutil
from functools import lru_cache
from pathlib import Path
from typing import Callable, Mapping

import yaml

from sbd_core.io_utils import write_jsonl_atomic, write_text_atomic

from .base import ID_KEY, Benchmark
from .chat import chat_messages, render_chat
from .settings import Settings

__all__ = ["TASKS_DIR", "LmEvalBenchmark", "metric_name", "task_config", "write_lm_eval_task"]

TASKS_DIR = Path(__file__).resolve().parent / "lm_eval_tasks"


class _TaskLoader(yaml.SafeLoader):
    """Reads a task YAML with ``!function a.b.f`` values resolved to the function ``f`` of module ``a.b``."""


def _function(loader: yaml.SafeLoader, node: yaml.Node) -> Callable:
    module, _, name = loader.construct_scalar(node).rpartition(".")
    return getattr(importlib.import_module(module), name)


_TaskLoader.add_constructor("!function", _function)


@lru_cache(maxsize=None)
def task_config(task: str) -> dict:
    """The shipped YAML of ``task`` as a dict (``!function`` values as the functions lm-eval calls)."""
    path = TASKS_DIR / f"{task}.yaml"
    with path.open(encoding="utf-8") as handle:
        return yaml.load(handle, Loader=_TaskLoader)  # noqa: S506 (SafeLoader plus !function, on our own files only)


def _defaults(task: str) -> Settings:
    """Settings defaults taken from the task YAML: token limit and system prompt (its stop strings are the
    benchmark's ``stops``)."""
    config = task_config(task)
    gen = config["generation_kwargs"]
    return Settings(max_new_tokens=gen["max_gen_toks"], system_prompt=config.get("description") or None)


class LmEvalBenchmark(Benchmark):
    """A benchmark whose protocol is the lm-eval task YAML ``task``.

    ``headline`` names the lm-eval metric that is the benchmark's accuracy (``"<metric>,<filter>"`` as in lm-eval's
    results). ``defaults`` and ``source`` are read from the YAML unless given (generated benchmarks give both).
    ``answer_of(response)`` gives the answer the scorer reads, for the per-problem record, when the task has no
    filter that extracts it.
    """

    def __init__(self, *, task: str, headline: str, defaults: Settings | None = None, source: dict | None = None,
                 answer_of: Callable[[str], str | None] | None = None, **kwargs):
        config = task_config(task)
        if source is None:
            source = {"dataset": config["dataset_path"], "config": config.get("dataset_name"),
                      "split": config["test_split"], "revision": config["dataset_kwargs"]["revision"]}
        kwargs.setdefault("stops", tuple(config.get("generation_kwargs", {}).get("until", ())))
        super().__init__(defaults=defaults or _defaults(task), source=source, **kwargs)
        self.task, self.headline, self.answer_of = task, headline, answer_of

    def _source_rows(self, settings: Settings) -> list[dict]:
        """The test split of the pinned hub dataset."""
        import datasets

        src = self.source
        try:
            rows = datasets.load_dataset(src["dataset"], src["config"], split=src["split"], revision=src["revision"])
        except Exception as err:  # noqa: BLE001 (any download failure gets the same hint)
            raise RuntimeError(f"{self.name}: could not load {src['dataset']}@{src['revision']} ({err}); offline, set "
                               f"benchmarks.{self.name}.data to a local JSON-lines copy in the hub schema") from err
        return [dict(row) for row in rows]

    def prompt(self, problem: dict, tokenizer, settings: Settings) -> str:
        """The task's ``doc_to_text`` (a function) applied to ``problem``; in chat mode wrapped as lm-eval's
        ``--apply_chat_template`` wraps a zero-shot request: ``[system?, user]`` through the chat template."""
        text = task_config(self.task)["doc_to_text"](problem)
        if not settings.chat:
            return text
        return render_chat(tokenizer, chat_messages(text, settings.system_prompt))

    def score(self, problems: list[dict], completions: Mapping[str, str], work_dir, settings: Settings) -> dict:
        """lm-eval's metrics of the stored completions (replayed by problem id, cut at the stop strings)."""
        import lm_eval
        from lm_eval.evaluator import evaluate
        from lm_eval.tasks import TaskManager

        from .replay import ReplayLM

        self.check_completions(problems, completions)
        work_dir = Path(work_dir).resolve()
        write_lm_eval_task(self, problems, settings, work_dir)
        # lm-eval's evaluate, the function simple_evaluate runs: simple_evaluate adds only what a replay does not use
        # (model construction, seeds of the few-shot sampler and of torch, for tasks that all declare zero shots) and
        # an environment report (torch.utils.collect_env: it imports torch and runs pip and other commands, 2-5 s of
        # a score job that otherwise needs about one second and no torch)
        manager = TaskManager(include_path=str(work_dir), include_defaults=False)
        results = evaluate(lm=ReplayLM(dict(completions)), task_dict=manager.load([self.task]), bootstrap_iters=0,
                           log_samples=True)
        metrics = {metric_name(key): float(value) for key, value in results["results"][self.task].items()
                   if "," in key and "_stderr" not in key}
        per_problem = self._per_problem(results["samples"][self.task])
        if len(per_problem) != len(problems):
            raise RuntimeError(f"lm-eval scored {len(per_problem)} problems, expected {len(problems)}")
        return {"accuracy": metrics[metric_name(self.headline)], "metrics": metrics, "n": len(problems),
                "per_problem": per_problem, "lm_eval_version": str(lm_eval.__version__)}

    def _per_problem(self, samples: list[dict]) -> dict:
        """``{id: {"correct", "extracted"}}`` from lm-eval's logged samples of the headline filter; ``extracted`` is
        None when the scorer found no answer."""
        metric, filter_name = self.headline.split(",")
        out = {}
        for sample in samples:
            if sample.get("filter", "none") != filter_name:
                continue
            filtered = sample["filtered_resps"][0]
            answer = self.answer_of(filtered) if self.answer_of else None if filtered == "[invalid]" else filtered
            out[sample["doc"][ID_KEY]] = {"correct": bool(sample[metric]), "extracted": answer}
        return out


def metric_name(key: str) -> str:
    """lm-eval's ``"<metric>,<filter>"`` as a name without a comma: ``"exact_match/flexible-extract"``, or just the
    metric when the filter is ``none``."""
    metric, _, filter_name = key.partition(",")
    return metric if filter_name in ("", "none") else f"{metric}/{filter_name}"


def write_lm_eval_task(benchmark: LmEvalBenchmark, problems: list[dict], settings: Settings, out_dir) -> str:
    """Write ``<task>.jsonl`` (the problems) and ``<task>.yaml`` (the shipped task over them, with ``settings``) into
    ``out_dir``; return the task name. Paths are absolute (lm-eval resolves relative data files against the CWD),
    and the datasets cache lives in ``out_dir`` and is cleared, so rewritten problems are never read from a stale
    cache."""
    out_dir = Path(out_dir).resolve()
    task = benchmark.task
    max_new_tokens, stops = benchmark.generation(settings)
    data = write_jsonl_atomic(problems, out_dir / f"{task}.jsonl")
    cache = out_dir / "hf_datasets_cache"
    shutil.rmtree(cache, ignore_errors=True)
    derived = {
        "include": str(TASKS_DIR / f"{task}.yaml"),
        "task": task,
        "dataset_path": "json",
        "dataset_name": None,
        "dataset_kwargs": {"data_files": {"test": str(data)}, "cache_dir": str(cache)},
        "test_split": "test",
        "description": (settings.system_prompt or "") if settings.chat else "",
        "generation_kwargs": {"until": list(stops), "max_gen_toks": max_new_tokens, "do_sample": False},
    }
    text = yaml.safe_dump(derived, sort_keys=False, allow_unicode=True)
    write_text_atomic(text, out_dir / f"{task}.yaml")
    return task
