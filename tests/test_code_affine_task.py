"""The code task whose body must be computed (sbd_core.tasks.code_affine_task): its grammar, the folded bodies against
an evaluation of the docstring written here step by step, the split partition, and the scorer on right and wrong
slopes and intercepts; and math_long (the math task on longer numbers) and math_direct (results written without
working), the math tasks beside it in the claim study."""

import math
import re
from collections import Counter

import pytest

from sbd_core.benchmarks import get_benchmark
from sbd_core.tasks import code_affine_task, get_task, math_task

_STEPS = {  # a step applied to the running value y, as the docstring's words say
    "times": lambda y, c: y * c, "plus": lambda y, c: y + c, "minus": lambda y, c: y - c,
    "from": lambda y, c: c - y, "mod": lambda y, c: y - c * math.floor(y / c), "div": lambda y, c: math.floor(y / c),
}


def _reference(problem):
    """The function's value, from the entry point's steps and the docstring's constants, step by step."""
    steps = problem["entry_point"].split("_")
    consts = [int(t) for t in re.findall(r"-?\d+", problem["prompt"].split('"""')[1].split("\n")[0])]
    assert len(steps) == len(consts)

    def value(x):
        for step, c in zip(steps, consts):
            x = _STEPS[step](x, c)
        return x
    return value


@pytest.fixture(scope="module")
def test_problems():
    return code_affine_task.make_problems("test", 1000, seed=0)


def test_grammar_gives_144_families():
    names = [f.name.split("_") for f in code_affine_task.FAMILIES]
    assert len({tuple(n) for n in names}) == len(names) == (4 * 3 + 4 * 3 * 3) * 3
    chains = [n[:-1] if n[-1] in ("mod", "div") else n for n in names]
    assert all(set(c) <= {"times", "plus", "minus", "from"} and len(c) in (2, 3) for c in chains)
    assert all(a != b for c in chains for a, b in zip(c, c[1:]))
    fams = {f.name: f for f in code_affine_task.FAMILIES}
    assert dict(fams["plus_times_minus_mod"].grid) == {"c1": tuple(range(1, 10)), "c2": (2, 3, 4, 5),
                                                        "c3": tuple(range(1, 10)), "m": tuple(range(2, 8))}


@pytest.mark.parametrize("steps, consts, slope, intercept, text", [
    (("plus", "times", "minus"), (4, 3, 5), 3, 7, "x * 3 + 7"),
    (("times", "from"), (4, 2), -4, 2, "2 - x * 4"),
    (("minus", "times", "minus"), (5, 5, 2), 5, -27, "x * 5 - 27"),
    (("from", "plus", "from"), (2, 1, 8), 1, 5, "x + 5"),
    (("from", "minus", "times"), (1, 3, 4), -4, -8, "-8 - x * 4"),
    (("plus", "minus"), (3, 3), 1, 0, "x"),
    (("times", "from", "times"), (2, 0, 3), -6, 0, "-x * 6"),
    (("minus", "from"), (2, 7), -1, 9, "9 - x"),
])
def test_fold_and_its_text_by_hand(steps, consts, slope, intercept, text):
    assert code_affine_task.fold(steps, consts) == (slope, intercept)
    assert code_affine_task.affine_text(slope, intercept) == text


def test_hand_written_problem():
    problem = code_affine_task.build_problem("plus_times_minus_mod", {"c1": 4, "c2": 3, "c3": 5, "m": 7})
    assert problem["canonical_solution"] == "    return (x * 3 + 7) % 7\n"
    assert problem["prompt"].startswith('def plus_times_minus_mod(x: int) -> int:\n    """Return x plus 4, times 3, '
                                        'minus 5, modulo 7.\n    >>> plus_times_minus_mod(')


def test_folded_bodies_compute_what_the_docstring_says(test_problems):
    """Every test problem's body, run on its base and plus inputs, gives the step-by-step value of its docstring, and
    so does its doctest example; the body is one line of the folded form."""
    for p in test_problems:
        scope = {}
        exec(p["prompt"] + p["canonical_solution"], scope)  # noqa: S102 - the generator's own code
        fn, want = scope[p["entry_point"]], _reference(p)
        for (arg,) in p["base_input"] + p["plus_input"]:
            assert fn(arg) == want(arg), (p["prompt"], arg)
        call, shown = re.search(r">>> (.*)\n\s*(.*)\n", p["prompt"]).groups()
        assert eval(call, scope) == eval(shown)  # noqa: S307
        assert re.fullmatch(r"    return \(?(-?\d+ - )?-?x( \* \d+)?( [+-] \d+)?\)?( (%|//) \d)?\n",
                            p["canonical_solution"]), p["canonical_solution"]


def test_a_1000_problem_test_set_spans_the_families(test_problems):
    """The round-robin draw: 1,000 distinct test problems over all 144 families, deterministic in the seed and apart
    from the train problems (the split partition itself: tests/test_code_chain_task.py, for both chain tasks)."""
    counts = Counter(p["entry_point"] for p in test_problems)
    assert len({p["prompt"] for p in test_problems}) == 1000 and len(counts) == 144
    assert code_affine_task.make_problems("test", 1000, seed=0) == test_problems  # deterministic in the seed
    train = {p["prompt"] for p in code_affine_task.make_problems("train", 2000, seed=0)}
    assert not train & {p["prompt"] for p in test_problems}


def test_registered_as_task_source_and_benchmark():
    task = get_task("code_affine")
    problem = task.make_problems("dev", 3, 0)[0]
    assert task.prompt_text(problem) == problem["prompt"] and task.target_text(problem).startswith("    return ")
    assert get_benchmark("code_affine").cluster(problem) == problem["entry_point"]


def test_the_code_scorer_passes_folded_and_unfolded_bodies_and_fails_a_wrong_slope_or_intercept(tmp_path):
    """Through the code scorer as the DAG scores it: the folded bodies and the unfolded chains of six families pass;
    each body with its intercept or its slope moved by 1 fails."""
    bench = get_benchmark("code_affine")
    names = ("plus_times", "times_from", "plus_times_minus", "from_minus_times_mod", "minus_times_plus_div",
             "times_plus_from")
    test_set = code_affine_task.make_problems("test", 2000, 0)
    problems = bench.problems([next(p for p in test_set if p["entry_point"] == name) for name in names], "generated")
    settings = bench.settings({"parallel": 2, "timeout_s": 300})

    def accuracy(bodies, folder):
        return bench.score(problems, {p["task_id"]: b for p, b in zip(problems, bodies)}, tmp_path / folder,
                           settings)["accuracy"]
    folded = [p["canonical_solution"] for p in problems]
    unfolded = []
    for p in problems:  # the chain written step by step, as code_chain writes it
        steps = p["entry_point"].split("_")
        consts = re.findall(r"-?\d+", p["prompt"].split('"""')[1].split("\n")[0])
        lines = ["y = x"] + [{"times": "y = y * {}", "plus": "y = y + {}", "minus": "y = y - {}",
                              "from": "y = {} - y", "mod": "y = y % {}", "div": "y = y // {}"}[s].format(c)
                             for s, c in zip(steps, consts)] + ["return y"]
        unfolded.append("".join(f"    {line}\n" for line in lines))
    assert accuracy(folded, "folded") == 1.0 and accuracy(unfolded, "unfolded") == 1.0
    wrong_intercept = [re.sub(r"([+-] )(\d+)", lambda m: f"{m.group(1)}{int(m.group(2)) + 1}", b, count=1)
                       if re.search(r"[+-] \d+", b) else b.replace("return ", "return 1 + ", 1) for b in folded]
    wrong_slope = [re.sub(r"x \* (\d+)", lambda m: f"x * {int(m.group(1)) + 1}", b) if "x *" in b
                   else b.replace("x", "x * 2", 1) for b in folded]
    assert all(w != b for w, b in zip(wrong_intercept + wrong_slope, folded + folded))
    assert accuracy(wrong_intercept, "intercept") == 0.0 and accuracy(wrong_slope, "slope") == 0.0


def test_math_long_takes_longer_operands_in_the_same_splits():
    """math_long: the math task's kinds and worked columns on longer operands; every problem's key hashes to the split
    asked for under the math task's own rule, and its answer is its computation's."""
    name, (one_step, two_step) = "math_long", ((3, 4, 5), (2, 3))
    assert math_task.LONG_DIGITS == (one_step, two_step)
    task = get_task(name)
    problems = task.make_problems("test", 400, 0)
    for p in problems:
        ops = [tuple(step) for step in p["_ops"]]
        assert math_task.split_of(repr([tuple(s) for s in p["_ops"]])) == "test"
        operands = (ops[0][0], ops[0][2]) + tuple(step[2] for step in ops[1:])
        assert {len(str(v)) for v in operands} <= set(one_step if len(ops) == 1 else two_step)
        x, op, y = ops[-1]
        assert p["answer"] == str(x + y if op == "+" else x - y) == task.extract_answer(task.target_text(p))
    assert {len(str(p["_ops"][0][0])) for p in problems if len(p["_ops"]) == 1} == set(one_step)
    assert get_benchmark(name).settings({"limit": 10}).max_new_tokens == 112


def test_math_direct_writes_each_result_at_once_on_shorter_numbers():
    """math_direct: the math task's kinds and questions on 2-3 digit numbers (two steps on 2 digits), each step written
    as ``x op y = result.`` with no column work and every result right; every problem's key hashes to the split asked
    for under the math task's own rule; the benchmark's token budget holds the longest solution."""
    assert math_task.DIRECT_DIGITS == ((2, 3), (2,))
    task = get_task("math_direct")
    problems = task.make_problems("dev", 400, 3)
    assert {p["_kind"] for p in problems} == set(math_task.KINDS)
    for p in problems:
        ops = p["_ops"]
        assert math_task.split_of(repr([tuple(s) for s in ops])) == "dev"
        operands = [ops[0][0], ops[0][2]] + [step[2] for step in ops[1:]]
        assert {len(str(v)) for v in operands} <= set(math_task.DIRECT_DIGITS[len(ops) > 1])
        steps = re.findall(r"(\d+)([+-])(\d+)=(-?\d+)\.", task.target_text(p))
        assert [[int(x), op, int(y)] for x, op, y, _ in steps] == ops
        assert all(int(r) == (int(x) + int(y) if op == "+" else int(x) - int(y)) for x, op, y, r in steps)
        assert ":" not in task.target_text(p) and "So" not in task.target_text(p)
        assert task.extract_answer(task.target_text(p)) == p["answer"] == steps[-1][3]
    assert {len(str(p["_ops"][0][0])) for p in problems if len(p["_ops"]) == 1} == set(math_task.DIRECT_DIGITS[0])
    assert math_task.direct_step(347, "+", 86) == "347+86=433." and math_task.direct_step(83, "-", 47) == "83-47=36."
    assert max(len(task.target_text(p)) for p in problems) < get_benchmark("math_direct").settings({}).max_new_tokens
