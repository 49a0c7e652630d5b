"""The graded tasks (sbd_core.tasks.graded): math and code_chain with one problem in nine a computation a tiny model
cannot learn. The mix's order and ids, the easy problems being the easy task's own, the hard problems' answers against
an evaluation written here, their splits, and the code scorer on the folded bodies."""

import math
import re

import pytest

from test_report_stats import scored

from sbd_core.benchmarks import get_benchmark
from sbd_core.report import build_report
from sbd_core.tasks import code_affine_task, code_chain_task, get_task, graded, math_task
from sbd_core.training_data.sources import get_source


@pytest.mark.parametrize("name, easy, prefix", [("math_graded", math_task.make_problems, "math/"),
                                                ("code_graded", code_chain_task.make_problems, "HumanEval/")])
def test_every_ninth_problem_is_hard_and_the_others_are_the_easy_tasks_own(name, easy, prefix):
    problems = get_task(name).make_problems("dev", 50, 4)
    assert [p["task_id"] for p in problems] == [f"{prefix}{i}" for i in range(50)]
    hard = [i for i, p in enumerate(problems) if p.get("_kind") == "mul" or p.get("entry_point", "").startswith("fold_")]
    assert hard == [8, 17, 26, 35, 44] and graded.HARD_EVERY == 9
    drop_id = lambda p: {k: v for k, v in p.items() if k != "task_id"}  # noqa: E731
    assert [drop_id(p) for i, p in enumerate(problems) if i not in hard] == [drop_id(p) for p in easy("dev", 45, 4)]
    assert problems == get_task(name).make_problems("dev", 50, 4)


def test_math_graded_products_are_right_and_keep_the_math_split():
    """A hard math problem: a 2-digit times a 3-digit number, written at once, its answer the product; its key hashes
    to the split asked for under the math task's rule; distinct problems."""
    task = get_task("math_graded")
    products = [p for p in task.make_problems("test", 900, 0) if p["_kind"] == "mul"]
    assert len(products) == 100 and len({repr(p["_ops"]) for p in products}) == 100
    for p in products:
        [[a, op, b]] = p["_ops"]
        assert op == "*" and 10 <= a <= 99 and 100 <= b <= 999 and p["answer"] == str(a * b)
        assert task.target_text(p) == f" {a}*{b}={a * b}.\n#### {a * b}"
        assert task.extract_answer(task.target_text(p)) == p["answer"]
        assert f"has {a} boxes of {b} " in task.prompt_text(p)
        assert math_task.split_of(repr([(a, op, b)])) == "test"
    assert get_task("math_graded").extract_answer is math_task.extract_answer
    with pytest.raises(ValueError, match="unknown split"):
        math_task.make_products("valid", 3, 0)


def test_code_graded_folds_compute_what_the_docstring_says():
    """A hard code problem: a chain of three or four steps of times, plus, minus, subtracted from with at least two
    times, on constants 11-39 (three steps) or 11-19 (four), its body one slope and one intercept, equal to the
    docstring's steps applied one by one on every input; the slope is the product of the times constants (so never a
    one- or two-digit number). 77 families, and a 1,000-problem test set's 111 hard problems span all of them."""
    assert len(code_affine_task.FOLD_FAMILIES) == 77
    task = get_task("code_graded")
    folds = [p for p in task.make_problems("test", 1000, 0) if p["entry_point"].startswith("fold_")]
    assert len(folds) == 111 and len({p["entry_point"] for p in folds}) == 77
    apply = {"times": lambda y, c: y * c, "plus": lambda y, c: y + c, "minus": lambda y, c: y - c,
             "from": lambda y, c: c - y}
    for p in folds:
        doc = p["prompt"].split('"""')[1].split("\n")[0]
        steps = p["entry_point"].split("_")[1:]
        consts = [int(c) for c in re.findall(r"\d+", doc)]
        assert doc.endswith(", as one slope and one intercept.") and len(consts) == len(steps) in (3, 4)
        assert steps.count("times") >= 2 and all(11 <= c <= (39 if len(steps) == 3 else 19) for c in consts)
        env: dict = {}
        exec(p["prompt"] + p["canonical_solution"], env)  # noqa: S102 (our own canonical body)
        fn = env[p["entry_point"]]
        for [x] in p["base_input"] + p["plus_input"]:
            y = x
            for step, c in zip(steps, consts):
                y = apply[step](y, c)
            assert fn(x) == y
        slope = math.prod(c for step, c in zip(steps, consts) if step == "times")
        assert slope > 100 and f"x * {slope}" in p["canonical_solution"]
        assert code_affine_task.FOLD_TABLE.split_of(code_affine_task.FOLD_TABLE.signature(
            p["entry_point"], {f"c{i}": c for i, c in enumerate(consts, 1)})) == "test"


def test_the_code_scorer_passes_the_folds_and_fails_a_wrong_product(tmp_path):
    bench = get_benchmark("code_graded")
    problems = bench.problems([p for p in get_task("code_graded").make_problems("test", 27, 1)
                               if p["entry_point"].startswith("fold_")], "generated")
    settings = bench.settings({"parallel": 2, "timeout_s": 300})

    def accuracy(bodies, folder):
        return bench.score(problems, {p["task_id"]: b for p, b in zip(problems, bodies)}, tmp_path / folder,
                           settings)["accuracy"]
    right = [p["canonical_solution"] for p in problems]
    wrong = [re.sub(r"x \* (\d+)", lambda m: f"x * {int(m.group(1)) + 1}", b) for b in right]
    assert len(problems) == 3 and all(w != b for w, b in zip(wrong, right))
    assert accuracy(right, "right") == 1.0 and accuracy(wrong, "wrong") == 0.0


def test_registered_as_sources_and_benchmarks():
    for name in ("math_graded", "code_graded"):
        assert get_source(name).generated and get_benchmark(name).source["hard_every"] == graded.HARD_EVERY
        rows = get_benchmark(name).training_rows("train", 9, 0)
        assert len(rows) == 9 and rows[8]["task"] == name
    assert get_benchmark("code_graded").cluster({"entry_point": "fold_times_plus_times"}) == "fold_times_plus_times"


def test_level_of_reads_the_position_in_the_mix():
    assert [graded.level_of(f"math/{i}") for i in (0, 7, 8, 9, 17)] == ["easy", "easy", "hard", "easy", "hard"]
    assert graded.level_of("HumanEval/26") == "hard" and get_task("code_graded").level_of is graded.level_of
    assert get_task("math").level_of is None


def test_the_report_gives_a_graded_tasks_accuracy_by_level_and_nothing_for_other_tasks(tmp_path):
    """18 problems (ids 8 and 17 hard): the NTP arm solves 15 of the 16 easy ones and one hard one, the SBD row 12
    easy and no hard one; the cells count them, the NTP arm first. A run on the math task has no such section."""
    ntp = [1] * 18
    ntp[3] = ntp[8] = 0  # one easy miss, one hard miss (17 is solved)
    sbd = [1] * 12 + [0] * 6  # problems 0-11 solved: 11 easy ones and the hard one at 8
    paths = [scored(tmp_path, "sbd", "eb", {"gamma": 0.1}, sbd, 5, benchmark="math_graded"),
             scored(tmp_path, "ntp", "ntp", {}, ntp, 20, benchmark="math_graded")]
    md = build_report(paths, paper_table=None)["report.md"].decode()
    section = md[md.index("## Graded tasks: accuracy by difficulty"):]
    assert ("| tiny | NTP / NTP | 0 | 93.8 (15 / 16) | 50.0 (1 / 2) |\n"
            "| tiny | SBD / EB γ=0.1 | 0 | 68.8 (11 / 16) | 50.0 (1 / 2) |") in section
    (tmp_path / "plain").mkdir()
    plain = [scored(tmp_path / "plain", o, s, p, ntp, 20) for o, s, p in (("ntp", "ntp", {}), ("sbd", "ntp", {}))]
    assert "Graded tasks" not in build_report(plain, paper_table=None)["report.md"].decode()
