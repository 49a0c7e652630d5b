"""The likelihood stage (Table 2): the task registry against lm-eval's own task files, the settings, the
multiple-choice builder of the embedded analogue, and both stage functions on local data, offline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from likelihood_fixtures import (ARC_ROWS, hellaswag_rows, save_checkpoint, winogrande_rows, write_arc_copy,
                                 write_gpqa_copy, write_hub_copy, write_mmlu_copy)
from sbd_core.likelihood import PAPER_TASKS, TASKS, get_task, multiple_choice, planned_tasks
from sbd_core.pipeline.likelihood import LikelihoodDataError, run_likelihood, run_likelihood_data
from sbd_core.tasks import code_task, get_task as get_synthetic_task

ROOT = Path(__file__).resolve().parent.parent
OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    for key, value in OFFLINE.items():
        monkeypatch.setenv(key, value)


class _Loader(yaml.SafeLoader):
    """lm-eval's task YAMLs with their ``!function`` tags read as plain strings."""


_Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


def lm_eval_config(folder: Path, name: str) -> dict:
    """The YAML (with its includes) that defines task or group ``name`` in ``folder``."""
    for path in sorted(folder.rglob("*.yaml")) + sorted(folder.rglob("_*yaml")):
        config = yaml.load(path.read_text(), Loader=_Loader) or {}
        if config.get("task") == name or config.get("group") == name:
            include = config.get("include")
            return {**(lm_eval_config_file(path.parent / include) if include else {}), **config}
    raise KeyError(name)


def lm_eval_config_file(path: Path) -> dict:
    config = yaml.load(path.read_text(), Loader=_Loader) or {}
    include = config.get("include")
    return {**(lm_eval_config_file(path.parent / include) if include else {}), **config}


# ------------------------------------------------------------------------------------------------ registry
def test_paper_columns_in_the_papers_order():
    assert PAPER_TASKS == ("mmlu", "gpqa", "hellaswag", "winogrande", "arc_easy", "arc_challenge")
    assert [TASKS[t].column for t in PAPER_TASKS] == ["MMLU", "GPQA", "HellaSwag", "Winogrande", "ARC-E", "ARC-C"]


@pytest.mark.parametrize("name", [t for t in TASKS if t != "mmlu"])
def test_registry_matches_lm_evals_own_task_files(name):
    """Each task is lm-eval's (or our shipped) YAML: its data set, its metrics; no dataset_kwargs to lose when the
    stage points dataset_path at a local folder."""
    task = get_task(name)
    settings = task.settings(None)
    config = lm_eval_config(task.lm_eval_dir(), task.lm_eval_task(settings))
    assert config["output_type"] == "multiple_choice" and "dataset_kwargs" not in config
    assert {m["metric"] for m in config["metric_list"]} == set(task.metrics)
    assert settings.metric in task.metrics
    if task.synthetic:
        assert config["dataset_path"] == "json" and config["test_split"] == "test"
    else:
        assert config["dataset_path"] == task.dataset


def test_mmlu_is_lm_evals_group_of_57_subjects():
    task = get_task("mmlu")
    folder = task.lm_eval_dir()
    group = lm_eval_config(folder, "mmlu")
    assert task.group and group["aggregate_metric_list"][0]["metric"] == "acc" and task.metrics == ("acc",)
    subjects = [lm_eval_config_file(p) for p in sorted((folder / "default").glob("mmlu_*.yaml"))]
    assert len(subjects) == 57 and {s["dataset_path"] for s in subjects} == {"cais/mmlu"}
    assert all("dataset_kwargs" not in s for s in subjects) and task.dataset == "cais/mmlu"


def test_defaults_are_our_reading_of_the_paper():
    shots = {name: getattr(TASKS[name].settings(None), "num_fewshot") for name in PAPER_TASKS}
    assert shots == {"mmlu": 5, "gpqa": 0, "hellaswag": 0, "winogrande": 0, "arc_easy": 0, "arc_challenge": 0}
    metrics = {name: TASKS[name].settings(None).metric for name in PAPER_TASKS}
    assert metrics == {"mmlu": "acc", "gpqa": "acc", "hellaswag": "acc_norm", "winogrande": "acc",
                       "arc_easy": "acc_norm", "arc_challenge": "acc_norm"}


def test_gpqa_subset_and_shots_pick_lm_evals_task():
    gpqa = get_task("gpqa")
    assert gpqa.lm_eval_task(gpqa.settings(None)) == "gpqa_main_zeroshot"
    assert gpqa.lm_eval_task(gpqa.settings({"subset": "diamond", "num_fewshot": 5})) == "gpqa_diamond_n_shot"


@pytest.mark.parametrize("name, mapping, match", [
    ("hellaswag", {"shots": 5}, r"tasks.hellaswag: unknown setting\(s\) \['shots'\]; allowed: .*num_fewshot"),
    ("mmlu", {"metric": "acc_norm"}, r"likelihood.tasks.mmlu.metric must be one of \['acc'\]"),
    ("gpqa", {"subset": "experts"}, r"likelihood.tasks.gpqa.subset must be one of \['main', 'diamond', 'extended'\]"),
    ("arc_easy", {"revision": "main"}, r"revision must be a 40-character commit hash, got 'main'"),
    ("math_mc", {"problems": 0}, r"likelihood.tasks.math_mc.problems must be an integer >= 1, got 0"),
    ("math_mc", {"num_fewshot": 2}, r"unknown setting\(s\) \['num_fewshot'\]"),
    ("nope", {}, r"unknown likelihood task 'nope'"),
])
def test_bad_settings_name_the_key(name, mapping, match):
    with pytest.raises(ValueError, match=match):
        get_task(name).settings(mapping)


def test_the_planned_tasks_are_the_sections_unless_it_is_turned_off():
    tasks = {"math_mc": {"problems": 5}, "code_mc": None}
    assert planned_tasks({"tasks": tasks}) == {"math_mc": {"problems": 5}, "code_mc": {}}
    assert planned_tasks({"enabled": True, "tasks": tasks}) == planned_tasks({"tasks": tasks})
    assert planned_tasks({"enabled": False, "tasks": tasks}) == {} and planned_tasks(None) == {}
    with pytest.raises(ValueError, match=r"likelihood.enabled must be true or false, got 'no'"):
        planned_tasks({"enabled": "no", "tasks": tasks})


# ------------------------------------------------------------------------------------------------ multiple choice
@pytest.fixture(scope="module")
def math_docs():
    return multiple_choice.math_docs(300, 0)


@pytest.fixture(scope="module")
def code_docs():
    return multiple_choice.code_docs(code_task.capacity("test"), 0)


def test_math_questions_are_the_right_solution_against_near_misses(math_docs):
    task = get_synthetic_task("math")
    problems = {p["task_id"]: p for p in task.make_problems("test", 300, 0)}
    assert len(math_docs) == 300 and [d["sbd_id"] for d in math_docs] == list(problems)
    for doc in math_docs:
        problem, right = problems[doc["sbd_id"]], doc["choices"][doc["gold"]]
        answer = int(problem["answer"])
        assert doc["context"] == task.prompt_text(problem)  # the question only: no step, no answer
        assert "####" not in doc["context"] and "So " not in doc["context"]
        assert problem["solution"] not in doc["context"]
        assert right == problem["solution"] and doc["kinds"][doc["gold"]] == "answer"
        assert len(doc["choices"]) == 4 and len(set(doc["choices"])) == 4 and sorted(doc["kinds"])[0] == "answer"
        head = right.rsplit("So ", 1)[0]
        finals = {}
        for kind, choice in zip(doc["kinds"], doc["choices"]):
            assert choice.startswith(head)  # the same column steps; only the final answer differs
            number = int(choice.rsplit("#### ", 1)[1])
            assert choice.endswith(f"So {number}.\n#### {number}") and number >= 0
            finals[kind] = number
        assert abs(finals["off_by_one"] - answer) == 1 and abs(finals["off_by_ten"] - answer) == 10
        if "digit_swap" in finals:
            assert str(finals["digit_swap"])[-2:] == str(answer)[-2:][::-1] and finals["digit_swap"] != answer
    golds = np.bincount([d["gold"] for d in math_docs], minlength=4)
    assert golds.min() > 40  # the right answer is not parked at one position


def test_code_questions_are_the_right_body_against_wrong_programs(code_docs):
    problems = {p["task_id"]: p for p in code_task.make_problems("test", len(code_docs), 0)}
    for doc in code_docs:
        problem = problems[doc["sbd_id"]]
        assert doc["context"] == problem["prompt"] and problem["canonical_solution"] not in doc["context"]
        assert doc["cluster"] == problem["entry_point"]  # the family, for the report's intervals
        assert doc["choices"][doc["gold"]] == problem["canonical_solution"] and len(set(doc["choices"])) == 4
        right = multiple_choice._outputs(problem, problem["canonical_solution"])
        for kind, choice in zip(doc["kinds"], doc["choices"]):
            if kind != "answer":  # a wrong program: it runs, and returns something else on the problem's own tests
                wrong = multiple_choice._outputs(problem, choice)
                assert wrong is not None and wrong != right, (doc["sbd_id"], choice)


def test_questions_are_deterministic_and_depend_on_the_seed(math_docs):
    assert multiple_choice.math_docs(300, 0) == math_docs
    assert multiple_choice.code_docs(20, 3) == multiple_choice.code_docs(20, 3)
    assert multiple_choice.math_docs(20, 1) != math_docs[:20]


def test_near_miss_numbers_stay_distinct_and_non_negative():
    import random

    for answer in list(range(0, 200)):
        misses = multiple_choice.near_miss_numbers(answer, random.Random(answer))
        values = [v for _, v in misses]
        assert len(set(values)) == 3 and answer not in values and min(values) >= 0


# ------------------------------------------------------------------------------------------------ the stage
@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return save_checkpoint("llama", tmp_path_factory.mktemp("llama"))


def test_a_real_lm_eval_task_on_a_local_copy_in_the_hub_layout(checkpoint, tmp_path):
    """lm-eval's own arc_easy YAML (prompt, choices, acc and acc_norm) on a local ai2_arc copy: data job, then the
    score file with lm-eval's metrics and per-document results (the arms' pairing is checked in the DAG test)."""
    local = write_arc_copy(tmp_path / "ai2_arc")
    data = run_likelihood_data("arc_easy", {"data": str(local)}, tmp_path / "data")
    prov = json.loads((data / "provenance.json").read_text())["settings"]
    assert prov["documents"] == {"arc_easy": len(ARC_ROWS)} and prov["source"]["local_copy"] == str(local)
    out = tmp_path / "score.json"
    run_likelihood(checkpoint, "arc_easy", {"data": str(local)}, data, out, names={"model": "tiny", "objective": "ntp"})
    score = json.loads(out.read_text())
    assert (score["task"], score["lm_eval_task"], score["metric"]) == ("arc_easy", "arc_easy", "acc_norm")
    assert score["n"] == 6
    docs = score["per_doc"]["arc_easy"]
    assert [d["doc_id"] for d in docs] == list(range(6)) and [d["target"] for d in docs] == [r[2] for r in ARC_ROWS]
    for doc, (_, choices, _) in zip(docs, ARC_ROWS):
        lls = np.array(doc["loglikelihoods"])
        assert len(lls) == 4 and (lls < 0).all() and len(doc["is_greedy"]) == 4
        assert doc["acc"] == float(np.argmax(lls) == doc["target"])
        norm = lls / np.array([len(c) for c in choices])  # lm-eval's acc_norm: per character of the choice
        assert doc["acc_norm"] == float(np.argmax(norm) == doc["target"])
    assert score["accuracy"] == pytest.approx(np.mean([d["acc_norm"] for d in docs]))
    assert score["metrics"]["acc"] == pytest.approx(np.mean([d["acc"] for d in docs]))
    acc = np.array([d["acc"] for d in docs])
    assert score["metrics"]["acc_stderr"] == pytest.approx(acc.std(ddof=1) / np.sqrt(6))  # lm-eval's, recorded
    assert score["provenance"]["stage"] == "likelihood" and score["model_args"]["solver"] == "ntp"
    assert (score["model"], score["objective"], score["subtasks"]["arc_easy"]["num_fewshot"]) == ("tiny", "ntp", 0)


@pytest.mark.parametrize("name, configs, documents", [
    ("hellaswag", {"default": {"train": hellaswag_rows(), "validation": hellaswag_rows(4)}}, {"hellaswag": 4}),
    ("winogrande", {"winogrande_xl": {"train": winogrande_rows(), "validation": winogrande_rows(5)}},
     {"winogrande": 5}),
])
def test_the_data_job_builds_lm_evals_task_from_a_local_copy(tmp_path, name, configs, documents):
    """lm-eval's own YAML (its process_docs, its config name, its split) loads from a copy in the hub's layout."""
    local = write_hub_copy(tmp_path / name, configs)
    data = run_likelihood_data(name, {"data": str(local)}, tmp_path / "data")
    assert json.loads((data / "provenance.json").read_text())["settings"]["documents"] == documents
    assert (data / "dataset" / "README.md").is_file() and not (data / "work").exists()


def test_the_embedded_analogue_through_the_same_stage(checkpoint, tmp_path):
    data = run_likelihood_data("code_mc", {"problems": 12}, tmp_path / "data")
    docs = [json.loads(line) for line in (data / "dataset" / "test.jsonl").read_text().splitlines()]
    assert docs == multiple_choice.code_docs(12, 0)
    score = run_likelihood(checkpoint, "code_mc", {"problems": 12}, data, tmp_path / "code_mc.json",
                           names={"model": "tiny", "objective": "ntp"})
    per_doc = score["per_doc"]["sbd_synth_code_mc"]
    assert score["n"] == 12 and [d["target"] for d in per_doc] == [d["gold"] for d in docs]
    assert score["accuracy"] == pytest.approx(np.mean([d["acc"] for d in per_doc]))
    assert [d["cluster"] for d in per_doc] == [d["cluster"] for d in docs]  # each question's problem family
    assert score["data"] == {"generator": "sbd_core.likelihood.multiple_choice.code_docs", "problems": 12, "seed": 0}


def test_scoring_refuses_data_made_with_other_settings(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    made_with = {"metric": "acc", "batch_size": 32, "problems": 50, "seed": 0}
    record = {"settings": {"task": "math_mc", "settings": made_with}}
    (data / "provenance.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match=r"made with \{'problems': 50, 'seed': 0\}, not of 'math_mc'"):
        run_likelihood(tmp_path / "no-model", "math_mc", {"problems": 60}, data, tmp_path / "out.json")
    with pytest.raises(ValueError, match="holds the data of likelihood task 'math_mc'"):
        run_likelihood(tmp_path / "no-model", "code_mc", {"problems": 50}, data, tmp_path / "out.json")


def test_offline_without_data_fails_with_one_line(tmp_path):
    cmd = [sys.executable, "-m", "sbd_core", "likelihood-data", "--task", "hellaswag", "--out", str(tmp_path / "d")]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env={**__import__("os").environ, **OFFLINE})
    assert out.returncode == 1 and "Traceback" not in out.stderr
    lines = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "cannot download Rowan/hellaswag" in lines[0]
    assert "set likelihood.tasks.hellaswag.data to a local copy" in lines[0]
    assert not (tmp_path / "d").exists()


def test_a_local_copy_without_the_tasks_config_is_named(tmp_path):
    local = write_hub_copy(tmp_path / "ai2_arc", {"ARC-Easy": {"test": [{"id": "x"}]}})
    with pytest.raises(LikelihoodDataError, match=r"lm-eval's arc_challenge does not load from .*ai2_arc"):
        run_likelihood_data("arc_challenge", {"data": str(local)}, tmp_path / "data")
    with pytest.raises(LikelihoodDataError, match=r"likelihood.tasks.arc_easy.data: .*missing is not a folder"):
        run_likelihood_data("arc_easy", {"data": str(tmp_path / "missing")}, tmp_path / "data")
    assert not (tmp_path / "data").exists()


@pytest.mark.slow
def test_mmlu_group_five_shot_on_a_local_copy(checkpoint, tmp_path):
    """lm-eval's mmlu group on a local copy: the local folder and 5 shots reach all 57 subjects through the group; the
    headline is lm-eval's size-weighted aggregate of the subjects."""
    subjects = sorted(lm_eval_config_file(p)["dataset_name"]
                      for p in (get_task("mmlu").lm_eval_dir() / "default").glob("mmlu_*.yaml"))
    local = write_mmlu_copy(tmp_path / "mmlu", subjects)
    data = run_likelihood_data("mmlu", {"data": str(local)}, tmp_path / "data")
    score = run_likelihood(checkpoint, "mmlu", {"data": str(local)}, data, tmp_path / "mmlu.json",
                           names={"model": "tiny", "objective": "ntp"})
    assert len(score["subtasks"]) == 57 and score["n"] == 57 * 2
    assert {s["num_fewshot"] for s in score["subtasks"].values()} == {5}
    correct = [d["acc"] for docs in score["per_doc"].values() for d in docs]
    assert score["accuracy"] == pytest.approx(np.mean(correct))
    assert all(len(d["loglikelihoods"]) == 4 for docs in score["per_doc"].values() for d in docs)


@pytest.mark.slow
def test_gpqa_shuffles_its_choices_the_same_way_in_every_run(checkpoint, tmp_path):
    """lm-eval's gpqa_main_zeroshot on a local CSV copy: its choices are shuffled with the seeded global random, so
    two runs (two arms) score the same questions with the same choice order."""
    local = write_gpqa_copy(tmp_path / "gpqa")
    data = run_likelihood_data("gpqa", {"data": str(local)}, tmp_path / "data")
    runs = [run_likelihood(checkpoint, "gpqa", {"data": str(local)}, data, tmp_path / f"gpqa{i}.json",
                           names={"model": "tiny", "objective": arm}) for i, arm in enumerate(("ntp", "sbd"))]
    docs = [run["per_doc"]["gpqa_main_zeroshot"] for run in runs]
    assert len(docs[0]) == 6 and runs[0]["lm_eval_task"] == "gpqa_main_zeroshot"
    assert [(d["doc_hash"], d["target"]) for d in docs[0]] == [(d["doc_hash"], d["target"]) for d in docs[1]]
    assert len({d["target"] for d in docs[0]}) > 1  # the right answer moves between the four letters
