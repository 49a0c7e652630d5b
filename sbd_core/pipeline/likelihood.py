"""The likelihood stage (the paper's Table 2): ``likelihood-data`` (one data folder per task) and ``likelihood`` (one
model arm on one task, through lm-eval and the ``sbd`` model's NTP ``loglikelihood``, the paper's eq. 9a).

* ``likelihood-data`` writes ``<out>/dataset/`` and ``<out>/provenance.json``. ``dataset/`` is the data set in the hub
  repository's own layout (README ``configs`` plus data files), which ``datasets.load_dataset(<folder>, <config>)``
  reads offline: a snapshot of the hub data set at a commit (the config's ``revision``, else ``main`` resolved to its
  commit and recorded), a copy of a local folder (``data``), or, for the synthetic tasks, the generated multiple-choice
  documents (``test.jsonl``). It then builds lm-eval's tasks from the folder once, so missing configs or splits fail
  here, in one line, before any GPU job starts. Downloads run on the submitting node, like the other data jobs.
* ``likelihood`` runs lm-eval's own task (or group) with its ``dataset_path`` pointed at that folder: a small group
  YAML written to a scratch folder names the task with the overrides (lm-eval 0.4.13 passes a group member's keys down
  to every task under it; given as an inline dict at the top level instead, the group's own ``task`` list would leak
  into its members). It writes one score file per (model, arm, task): lm-eval's metrics with their standard errors,
  the headline ``accuracy`` (the task's ``metric``), ``n``, per document the log-likelihood and greedy flag of every
  choice and whether it was answered right (``per_doc``, keyed by lm-eval's task name, each with ``doc_id`` and
  ``doc_hash``, so arms can be paired question by question, and the document's ``cluster`` where it has one), and
  provenance.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import yaml

from .. import hub
from ..errors import UserError
from ..io_utils import atomic_dir, write_json_atomic, write_jsonl_atomic, write_text_atomic
from ..likelihood import SCORING_ONLY, HubSettings, LikelihoodTask, Settings, get_task
from ..provenance import model_recipe, provenance
from ..settings import RuntimeSettings

__all__ = ["LikelihoodDataError", "run_likelihood_data", "run_likelihood", "task_manager"]

log = logging.getLogger("sbd_core")
DATASET = "dataset"
PROVENANCE = "provenance.json"


class LikelihoodDataError(UserError):
    """A likelihood task's data cannot be had (offline, a wrong local copy): one line that says what to do."""


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"


# ------------------------------------------------------------------------------------------------ lm-eval tasks
def task_manager(task: LikelihoodTask, settings: Settings, dataset_dir: Path, work_dir: Path):
    """``(TaskManager, name)``: lm-eval's task index of ``task``'s folder plus a group (written into ``work_dir``) that
    runs its lm-eval task or group on ``dataset_dir``; ``name`` is that group's, to pass to ``simple_evaluate``."""
    from lm_eval.tasks import TaskManager

    work_dir = Path(work_dir).resolve()
    overrides = {"dataset_path": str(Path(dataset_dir).resolve()),
                 "dataset_kwargs": {"cache_dir": str(work_dir / "hf_datasets_cache")}}
    if isinstance(settings, HubSettings):
        overrides["num_fewshot"] = settings.num_fewshot
    key = "group" if task.group else "task"
    name = f"sbd_likelihood_{task.name}"
    spec = {"group": name, "task": [{key: task.lm_eval_task(settings), **overrides}]}
    write_text_atomic(yaml.safe_dump(spec, sort_keys=False), work_dir / "tasks" / f"{name}.yaml")
    manager = TaskManager(include_path=[str(task.lm_eval_dir()), str(work_dir / "tasks")], include_defaults=False)
    return manager, name


def _document_counts(task: LikelihoodTask, settings: Settings, dataset_dir: Path, work_dir: Path) -> dict[str, int]:
    """Build lm-eval's tasks from ``dataset_dir`` (as the scoring job will) and count each one's documents."""
    manager, name = task_manager(task, settings, dataset_dir, work_dir)
    counts = {}
    for leaf, lm_task in sorted(manager.load([name])["tasks"].items()):
        counts[leaf] = len(lm_task.eval_docs)
        shots = getattr(settings, "num_fewshot", 0)
        if shots and len(lm_task.fewshot_docs() or []) < shots:
            raise ValueError(f"{leaf} has fewer than {shots} few-shot examples")
    return counts


# ------------------------------------------------------------------------------------------------ data
def _resolved_revision(task: LikelihoodTask, settings: HubSettings) -> str:
    """The configured commit, else the hub's current ``main`` as a commit hash (so the record names exact data)."""
    if settings.revision:
        return settings.revision
    from huggingface_hub import HfApi

    return HfApi().dataset_info(task.dataset, revision="main").sha


def _fetch(task: LikelihoodTask, settings: Settings, dataset_dir: Path) -> dict:
    """Fill ``dataset_dir``; return what it came from."""
    where = f"likelihood.tasks.{task.name}"
    if task.synthetic:
        docs = task.build_docs(settings.problems, settings.seed)
        write_jsonl_atomic(docs, dataset_dir / "test.jsonl")
        return {"generator": f"{task.build_docs.__module__}.{task.build_docs.__name__}", "problems": len(docs),
                "seed": settings.seed}
    if settings.data:
        source = Path(settings.data).expanduser().resolve()
        if not source.is_dir():
            raise LikelihoodDataError(f"{where}.data: {settings.data} is not a folder (expected a local copy of "
                                      f"{task.dataset} in the hub repository's layout)")
        shutil.copytree(source, dataset_dir, ignore=shutil.ignore_patterns(".git", ".cache"))
        return {"dataset": task.dataset, "local_copy": str(source)}
    try:
        revision = _resolved_revision(task, settings)
        hub.snapshot(task.dataset, revision, dataset_dir, ["*"], repo_type="dataset")
    except Exception as err:  # noqa: BLE001 - any download failure gets the same hint
        raise LikelihoodDataError(
            f"{where}: cannot download {task.dataset} ({_first_line(err)}); offline, set {where}.data to a local copy "
            f"in the hub's layout (hf download {task.dataset} --repo-type dataset --local-dir DIR)") from err
    return {"dataset": task.dataset, "revision": revision}


def run_likelihood_data(name: str, settings_mapping: dict | None, out_dir: Path) -> Path:
    """Write task ``name``'s data folder (see the module doc) and check that lm-eval's tasks load from it."""
    task = get_task(name)
    settings = task.settings(settings_mapping)
    with atomic_dir(out_dir) as tmp:
        source = _fetch(task, settings, tmp / DATASET)
        try:
            counts = _document_counts(task, settings, tmp / DATASET, tmp / "work")
        except Exception as err:  # noqa: BLE001 - the data's fault, whatever lm-eval or datasets raised
            origin = source.get("local_copy") or source.get("dataset") or "the generated documents"
            raise LikelihoodDataError(f"likelihood.tasks.{name}: lm-eval's {task.lm_eval_task(settings)} does not "
                                      f"load from {origin} ({_first_line(err)})") from err
        shutil.rmtree(tmp / "work")
        record = {"task": name, "source": source, "documents": counts, "settings": asdict(settings)}
        write_json_atomic(provenance("likelihood_data", record), tmp / PROVENANCE)
    print(f"{name}: {sum(counts.values())} documents in {len(counts)} lm-eval task(s) from {source}")
    return Path(out_dir)


# ------------------------------------------------------------------------------------------------ scoring
def _number(value):
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _metrics(block: dict) -> dict:
    """lm-eval's ``{"acc,none": x, "acc_stderr,none": s, ...}`` as ``{"acc": x, "acc_stderr": s}`` (numbers only)."""
    out = {}
    for key, value in block.items():
        metric, _, filter_name = key.partition(",")
        if filter_name == "none" and _number(value) is not None:
            out[metric] = _number(value)
    return out


def _per_doc(samples: list[dict]) -> list[dict]:
    """Per document: its id and hash, the right choice's index, each choice's (log-likelihood, greedy), the
    document's 0/1 metrics and, where the document names one, its ``cluster`` (a problem family), in document
    order."""
    out = []
    for sample in sorted(samples, key=lambda s: s["doc_id"]):
        scores = sample["filtered_resps"]
        record = {"doc_id": sample["doc_id"], "doc_hash": sample["doc_hash"], "target": sample["target"],
                  "loglikelihoods": [float(s[0]) for s in scores], "is_greedy": [bool(s[1]) for s in scores]}
        record.update({metric: float(sample[metric]) for metric in sample.get("metrics", []) if metric in sample})
        cluster = (sample.get("doc") or {}).get("cluster")
        if isinstance(cluster, str):
            record["cluster"] = cluster
        out.append(record)
    return out


def run_likelihood(model_dir: Path, name: str, settings_mapping: dict | None, data_dir: Path, out_path: Path,
                   runtime: RuntimeSettings = RuntimeSettings(), names: dict | None = None) -> dict:
    """Score one model on likelihood task ``name`` with the data folder ``data_dir`` (the data stage's); write and
    return the score record (see the module doc) and print one summary line."""
    import lm_eval

    from ..lm_eval_adapter.model import SBDLM

    task = get_task(name)
    settings = task.settings(settings_mapping)
    data = json.loads((Path(data_dir) / PROVENANCE).read_text())["settings"]
    made_with = {k: v for k, v in data["settings"].items() if k not in SCORING_ONLY}
    if data["task"] != name or made_with != {k: v for k, v in asdict(settings).items() if k not in SCORING_ONLY}:
        raise ValueError(f"{data_dir} holds the data of likelihood task {data['task']!r} made with {made_with}, not "
                         f"of {name!r} with these settings; run likelihood-data with the same settings")
    lm_name = task.lm_eval_task(settings)
    model_args = {"pretrained": str(model_dir), "solver": "ntp", "batch_size": settings.batch_size,
                  "device": runtime.device, "dtype": runtime.dtype}
    model = SBDLM(**model_args)  # the registered "sbd" model; solver=ntp: loglikelihood on the causal NTP logits
    with tempfile.TemporaryDirectory(prefix=f"likelihood_{name}_") as work:
        manager, group = task_manager(task, settings, Path(data_dir) / DATASET, Path(work))
        start = time.perf_counter()
        results = lm_eval.simple_evaluate(model=model, tasks=[group], task_manager=manager,
                                          limit=getattr(settings, "limit", None), log_samples=True)
        elapsed = time.perf_counter() - start
    metrics = _metrics(results["results"][lm_name])
    per_doc = {leaf: _per_doc(samples) for leaf, samples in sorted(results["samples"].items())}
    subtasks = {leaf: {"n": len(docs), "num_fewshot": results["n-shot"].get(leaf),
                       "metrics": _metrics(results["results"][leaf])} for leaf, docs in per_doc.items()}
    record = {**(names or {}), "task": name, "column": task.column, "paper_column": task.paper,
              "lm_eval_task": lm_name, "metric": settings.metric, "accuracy": metrics[settings.metric],
              "stderr": metrics.get(f"{settings.metric}_stderr"), "n": sum(len(d) for d in per_doc.values()),
              "metrics": metrics, "subtasks": subtasks, "settings": asdict(settings), "data": data["source"],
              "recipe": model_recipe(Path(model_dir)), "wall_time_s": elapsed,
              "lm_eval_version": str(lm_eval.__version__), "model_args": model_args, "per_doc": per_doc}
    record["provenance"] = provenance("likelihood", {"model": str(model_dir), "data": str(data_dir),
                                                     **(names or {}), "task": name})
    write_json_atomic(record, out_path, indent=None)
    stderr = "" if record["stderr"] is None else f" +- {record['stderr']:.4f}"
    print(f"{name}: {settings.metric} {record['accuracy']:.4f}{stderr} on {record['n']} documents "
          f"({lm_name}, {elapsed:.1f} s)")
    return record
