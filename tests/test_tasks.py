"""Tests for the synthetic tasks (sbd_core.tasks) and the BPE tokenizer (sbd_core.tokenizer)."""

import hashlib
import itertools
import math
import os
import re
import statistics
import subprocess
import sys
from collections import Counter

import pytest

from sbd_core.benchmarks import ID_KEY, get_benchmark
from sbd_core.tasks import EVALUATION_SPLITS, SPLITS, TASKS, code_task, get_task, math_task, training_texts
from sbd_core.tasks.splits import split_of, splits_of
from sbd_core.tokenizer import (BOS_TOKEN, EOS_TOKEN, PAD_TOKEN, RESERVED_TOKENS, SPECIAL_TOKENS,
                                build_tokenizer, load_tokenizer, save_tokenizer)

EVALPLUS_FIELDS = {"task_id", "prompt", "canonical_solution", "entry_point", "base_input", "plus_input",
                   "atol", "contract"}


@pytest.fixture(scope="module")
def problems():
    """A few hundred problems per task and split."""
    return {(name, split): get_task(name).make_problems(split, n, seed=0)
            for name in TASKS for split, n in (("train", 400), ("dev", 200), ("test", 200))}


@pytest.fixture(scope="module")
def tokenizer(problems):
    """Tokenizer trained on the train-split texts of both tasks."""
    return build_tokenizer([get_task(n).prompt_text(p) + get_task(n).target_text(p)
                            for (n, split), ps in problems.items() if split == "train" for p in ps])


def by_id(problems, texts):
    return {p[ID_KEY]: t for p, t in zip(problems, texts)}


def _full(name, problem):
    return get_task(name).prompt_text(problem) + get_task(name).target_text(problem)


# ---------------------------------------------------------------- determinism, schema and splits

@pytest.mark.parametrize("name", ["math", "code"])
def test_deterministic_in_seed(name):
    task = get_task(name)
    assert task.make_problems("train", 30, seed=5) == task.make_problems("train", 30, seed=5)
    assert task.make_problems("train", 30, seed=5) != task.make_problems("train", 30, seed=6)


@pytest.mark.parametrize("name,key", [("math", "question"), ("code", "prompt")])
def test_splits_disjoint(problems, name, key):
    held_out = {p[key] for p in problems[(name, "test")]}
    seen = {p[key] for split in ("train", "dev") for p in problems[(name, split)]}
    seen |= {p[key] for p in get_task(name).make_problems("train", 300, seed=1)}  # another seed too
    assert len(held_out) == len(problems[(name, "test")])  # unique within the split
    assert not held_out & seen


def _bucket(salt, key):
    """The split of a key as the rule states it (80 / 10 / 10 by the first 8 hex digits of a salted sha256),
    computed here without the generator."""
    value = int(hashlib.sha256((salt + key).encode()).hexdigest()[:8], 16) % 100
    return "train" if value < 80 else "dev" if value < 90 else "test"


def test_split_rule_and_names():
    assert SPLITS == ("train", "dev", "test") and EVALUATION_SPLITS == ("dev", "test")
    keys = [f"key{i}" for i in range(3000)]
    assert [split_of("salt", k) for k in keys] == [_bucket("salt", k) for k in keys]
    unicode = keys[:200] + [f"f\u00e9:{i}" for i in range(200)]  # the batched form: the salt hashed once
    assert splits_of("s\u00e4lt", unicode) == [_bucket("s\u00e4lt", k) for k in unicode]
    shares = Counter(split_of("salt", k) for k in keys)
    assert 0.77 < shares["train"] / 3000 < 0.83 and 0.08 < shares["dev"] / 3000 < 0.12


# ---------------------------------------------------------------- math

_ONE_STEP = re.compile(r"^\w+ has (\d+) \w+ and (?:buys|finds|gets) (\d+) more\. How many \w+ now\?$|"
                       r"^\w+ has (\d+) \w+ and (?:gives away|loses|sells) (\d+)\. How many \w+ are left\?$")
_TWO_STEP = re.compile(r"^\w+ has (\d+) \w+, (?:buys|finds|gets) (\d+) more, then (?:gives away|loses|sells) "
                       r"(\d+)\. How many \w+ are left\?$")


def _computation(question):
    """The steps ``(x, op, y)`` a question asks for, read from its words (not from the generator's fields)."""
    two = _TWO_STEP.match(question)
    if two:
        a, b, c = (int(v) for v in two.groups())
        return [(a, "+", b), (a + b, "-", c)]
    one = _ONE_STEP.match(question)
    assert one, question
    add_a, add_b, sub_a, sub_b = one.groups()
    return [(int(add_a), "+", int(add_b))] if add_a else [(int(sub_a), "-", int(sub_b))]


def _digit(n, i):
    return n // 10 ** i % 10


def _check_column_steps(x, op, y, columns):
    """Each column of ``x op y`` as the solution writes it, re-computed here: the operands' digits from the units up
    (the shorter one padded with 0), the carry ("+1") or borrow ("1" in front, "-1" after) of the previous column,
    and a result whose digits are those of ``x op y``."""
    width = len(str(x)) if op == "-" else max(len(str(x)), len(str(y)))
    assert len(columns) == width, (x, op, y, columns)
    result, carry = (x + y if op == "+" else x - y), 0
    for i, column in enumerate(columns):
        a, b = _digit(x, i), _digit(y, i)
        if op == "+":
            value = a + b + carry
            assert column == f"{a}+{b}{'+1' if carry else ''}={value}" and value % 10 == _digit(result, i)
            carry = value // 10
        else:
            borrow = a - carry < b
            value = a + 10 * borrow - carry - b
            assert column == f"{a + 10 * borrow}{'-1' if carry else ''}-{b}={value}"
            assert 0 <= value <= 9 and value == _digit(result, i)
            carry = int(borrow)
    assert op == "-" and carry == 0 or op == "+" and result // 10 ** width == carry


def _check_math(problem):
    """A math record against its question: schema, every step and column, the answer (all re-computed here)."""
    assert set(problem) == {"task_id", "question", "solution", "answer", "_kind", "_ops"}
    steps = _computation(problem["question"])
    assert [tuple(op) for op in problem["_ops"]] == steps
    text, answer_line = problem["solution"].split("\n")
    worked = re.findall(r"(\d+)([-+])(\d+): ([^.]*)\. So (\d+)\.", text)
    assert " ".join(f"{x}{op}{y}: {cols}. So {r}." for x, op, y, cols, r in worked) == text
    assert [(int(x), op, int(y)) for x, op, y, _, _ in worked] == steps
    for x, op, y, columns, result in worked:
        x, y, result = int(x), int(y), int(result)
        assert result == (x + y if op == "+" else x - y) >= 0
        _check_column_steps(x, op, y, columns.split(", "))
    final = int(worked[-1][4])
    assert answer_line == f"#### {final}" and problem["answer"] == str(final)
    assert math_task.extract_answer(problem["solution"]) == problem["answer"]
    return steps


def test_math_records_and_worked_solutions(problems):
    """Every record of every split: the question's computation, each column step and the answer, re-computed."""
    kinds = Counter()
    for split in SPLITS:
        for i, p in enumerate(problems[("math", split)]):
            steps = _check_math(p)
            assert p["task_id"] == f"math/{i}"
            kind = {1: {"+": "add", "-": "sub"}[steps[0][1]], 2: "add_sub"}[len(steps)]
            assert p["_kind"] == kind
            kinds[kind] += 1
            numbers = [steps[0][0], steps[0][2]] + [y for _, _, y in steps[1:]]
            if kind == "add_sub":
                assert all(10 <= v <= 99 for v in numbers) and numbers[2] <= steps[1][0]
            else:
                assert all(10 <= v <= 9999 for v in numbers)
    assert kinds == {"add": 200, "sub": 400, "add_sub": 200}  # of 800 problems: half subtract


def test_math_kinds_take_turns_and_carries_and_lengths_vary(problems):
    train = problems[("math", "train")]
    for i in range(0, len(train), 4):  # each turn of four: an addition, two subtractions, a two-step problem
        assert sorted(p["_kind"] for p in train[i:i + 4]) == ["add", "add_sub", "sub", "sub"]
    one_step = [p for p in train if p["_kind"] != "add_sub"]
    lengths = Counter(len(str(v)) for p in one_step for v in (p["_ops"][0][0], p["_ops"][0][2]))
    assert set(lengths) == {2, 3, 4} and min(lengths.values()) > 0.25 * sum(lengths.values())
    carries = sum("+1=" in p["solution"] for p in train if p["_kind"] == "add")
    borrows = sum("-1-" in p["solution"] for p in train if p["_kind"] == "sub")
    assert carries > 0.3 * len(train) / 4 and borrows > 0.3 * len(train) / 2  # the computed tokens are not rare


def test_math_problems_hash_to_their_split_by_computation():
    """The key of every problem, read from its question, falls in the problem's split by the stated rule (so no
    computation can be in two splits, over the whole space); the recipe's train sets, 1,000 dev and 1,000 test
    problems share no computation."""
    keys = {}
    for split, n, seeds in (("train", 3000, (0, 1)), ("dev", 1000, (0,)), ("test", 1000, (0,))):
        keys[split] = {repr(_computation(p["question"]))
                       for seed in seeds for p in math_task.make_problems(split, n, seed)}
        assert {_bucket("sbd-math-v1", key) for key in keys[split]} == {split}
    assert len(keys["dev"]) == len(keys["test"]) == 1000 and len(keys["train"]) > 5000
    assert not keys["train"] & keys["dev"] and not keys["train"] & keys["test"] and not keys["dev"] & keys["test"]
    assert repr(_computation("Ann has 47 pens and buys 38 more. How many pens now?")) == "[(47, '+', 38)]"


def test_shorter_results_are_the_math_tasks_problems_of_that_kind(problems):
    """math_shorter (a training source): each problem re-computed from its question as a math problem, and each holds
    a subtraction whose top column comes out 0 (read off the worked text, not by the generator's test); keyed and
    split as math's, distinct within a split, both kinds of problem that can have one, deterministic in the seed and
    not the math task's draws."""
    kinds = Counter()
    for split in SPLITS:
        rows = problems[("math_shorter", split)]
        assert len({repr(p["_ops"]) for p in rows}) == len(rows)
        for i, p in enumerate(rows):
            steps = _check_math(p)
            assert p["task_id"] == f"math/{i}" and _bucket("sbd-math-v1", repr(steps)) == split
            subtractions = re.findall(r"\d+-\d+: ([^.]*)\. So", p["solution"])
            assert any(columns.split(", ")[-1].endswith("=0") for columns in subtractions), p["solution"]
            assert math_task.shorter_result(steps)
            kinds[p["_kind"]] += 1
    assert set(kinds) == {"sub", "add_sub"} and kinds["sub"] > 0.15 * sum(kinds.values())
    draw = math_task.make_shorter_results
    assert draw("train", 30, 5) == draw("train", 30, 5) != draw("train", 30, 6)
    assert not {repr(p["_ops"]) for p in draw("train", 200, 0)} & {repr(p["_ops"])
                                                                    for p in math_task.make_problems("train", 200, 0)}
    assert not math_task.shorter_result([(1231, "-", 231)]) and not math_task.shorter_result([(99, "+", 1)])


def test_math_format_and_examples():
    assert math_task.add_steps(47, 38) == "47+38: 7+8=15, 4+3+1=8. So 85."
    assert math_task.add_steps(347, 86) == "347+86: 7+6=13, 4+8+1=13, 3+0+1=4. So 433."
    assert math_task.sub_steps(305, 47) == "305-47: 15-7=8, 10-1-4=5, 3-1-0=2. So 258."
    p = math_task.make_problems("test", 1, seed=0)[0]
    assert p["task_id"] == "math/0"
    assert math_task.prompt_text(p) == f"Question: {p['question']}\nAnswer:"
    assert math_task.target_text(p) == " " + p["solution"]
    two = next(p for p in math_task.make_problems("dev", 4, 0) if p["_kind"] == "add_sub")
    (a, _, b), (ab, _, c) = two["_ops"]
    assert two["solution"] == f"{math_task.add_steps(a, b)} {math_task.sub_steps(a + b, c)}\n#### {a + b - c}"


def test_extract_answer():
    assert math_task.extract_answer("So 85.\n#### 85") == "85"
    assert math_task.extract_answer("#### -7 and #### 3") == "-7"
    assert math_task.extract_answer("So 85.") is None and math_task.extract_answer("") is None


# ---------------------------------------------------------------- code

def test_code_capacities_hold_a_1000_problem_test_set():
    sizes = {s: code_task.capacity(s) for s in code_task.SPLITS}
    assert sizes == {s: sum(code_task.capacities(s).values()) for s in code_task.SPLITS}
    grid = sum(math.prod(len(values) for _, values in f.grid) for f in code_task.FAMILIES)
    assert sum(sizes.values()) == grid  # every signature in exactly one split
    assert sizes["test"] >= 1500 and sizes["dev"] >= 1500  # 1,000 held-out problems are a part of the split
    assert 0.08 < sizes["test"] / grid < 0.12 and 0.76 < sizes["train"] / grid < 0.84  # the 80/10/10 hash split
    assert sum(size for name, size in code_task.capacities("train").items() if name not in _INTEGER_FAMILIES) == 262
    assert set(code_task.capacities("train")) == {f.name for f in code_task.FAMILIES}


_INTEGER_FAMILIES = {f.name for f in code_task.FAMILIES if f.arg == "x"}
# sha256 of the sorted prompt + body texts of the list and string problems in the 1,200-problem train set (seed 0), as
# the generator of the 200-problem default (commit 41c74e9) drew them
_LIST_AND_STRING_TRAIN_AT_41C74E9 = "856ebaed0bb8afc0425f33aacb048ce17b9f1bae9cf446bc6f831925a26394bc"


def test_code_recipe_train_set_keeps_the_mix_of_the_200_problem_default():
    """The recipe's 1,200 train problems: every list and string problem of the train split (262, the same prompts as
    with the 24 families) and 938 integer ones spread over the 16 integer families."""
    train = code_task.make_problems("train", 1200, seed=0)
    counts = Counter(p["entry_point"] in _INTEGER_FAMILIES for p in train)
    assert counts == {True: 938, False: 262} and len(_INTEGER_FAMILIES) == 16
    texts = sorted(_full("code", p) for p in train if p["entry_point"] not in _INTEGER_FAMILIES)
    assert hashlib.sha256("".join(texts).encode()).hexdigest() == _LIST_AND_STRING_TRAIN_AT_41C74E9


def _signature_of(problem):
    """The problem's signature recovered from its prompt (entry point and docstring constants), not from the
    generator's pools."""
    return code_task.signature(problem["entry_point"], _consts_of(problem))


def _grid_signatures():
    """Every problem key of the code task, enumerated here from the families' constant grids."""
    return [code_task.signature(f.name, dict(zip([k for k, _ in f.grid], combo)))
            for f in code_task.FAMILIES for combo in itertools.product(*(values for _, values in f.grid))]


def test_code_splits_partition_the_whole_pools():
    """Over every key of the task: each in one split by the stated rule, the splits' sizes the generator's
    capacities; the whole dev and test pools, generated, are exactly their keys (read back from the prompts); the
    recipe's train sets of two seeds lie in the train keys."""
    by_split = {split: set() for split in SPLITS}
    for key in _grid_signatures():
        by_split[_bucket("sbd-code-v1", key)].add(key)
    assert sum(len(keys) for keys in by_split.values()) == len(_grid_signatures())  # no key twice
    assert {s: len(keys) for s, keys in by_split.items()} == {s: code_task.capacity(s) for s in SPLITS}
    for split in EVALUATION_SPLITS:
        pool = [_signature_of(p) for p in code_task.make_problems(split, code_task.capacity(split), 0)]
        assert len(pool) == len(set(pool)) and set(pool) == by_split[split]
    trained = {_signature_of(p) for seed in (0, 1) for p in code_task.make_problems("train", 1200, seed)}
    assert trained <= by_split["train"] and len(trained) > 1200
    # the hash (and salt) of the 200-problem default: its held-out problems stay held out
    assert code_task.split_of("times_plus:a=2,b=19") == "test" and code_task.split_of("times_plus:a=3,b=7") == "train"


@pytest.mark.parametrize("split,n", [("test", 1000), ("train", 1200)])  # the default's test set and train set
def test_code_draw_is_round_robin_over_families(split, n):
    """Every family gets the same count (+-1) until its pool runs out: the draw's mix follows the pools."""
    pools = code_task.capacities(split)
    counts = Counter(p["entry_point"] for p in code_task.make_problems(split, n, seed=0))
    assert sum(counts.values()) == n and set(counts) == {name for name, size in pools.items() if size}
    level = min(counts[name] for name in counts if counts[name] < pools[name])  # families not run out
    assert all(counts[name] in (level, level + 1) or counts[name] == pools[name] <= level for name in counts)
    assert level >= 50 and {f.name for f in code_task.FAMILIES if counts[f.name] >= level} == _INTEGER_FAMILIES



_REFERENCE = {  # entry point -> f(constants in docstring order, arg), written independently of the generator
    "times_plus": lambda c, x: x * c[0] + c[1], "times_minus": lambda c, x: x * c[0] - c[1],
    "plus_times": lambda c, x: (x + c[0]) * c[1], "minus_times": lambda c, x: (x - c[0]) * c[1],
    "mod_plus": lambda c, x: x % c[0] + c[1], "even_or_plus": lambda c, x: c[0] if x % 2 == 0 else x + c[1],
    "min_times": lambda c, x: min(x * c[0], c[1]), "max_plus": lambda c, x: max(x, c[0]) + c[1],
    "div_plus": lambda c, x: math.floor(x / c[0]) + c[1],  # exact: |x| <= 10**9
    "mod_minus": lambda c, x: (x - c[0] * math.floor(x / c[0])) - c[1],
    "from_times": lambda c, x: c[0] * c[1] - x * c[1], "times_from": lambda c, x: c[0] - c[1] * x,
    "max_times": lambda c, x: x * c[0] if x * c[0] > c[1] else c[1],
    "min_plus": lambda c, x: (x if x < c[0] else c[0]) + c[1],
    "odd_or_times": lambda c, x: c[0] if x % 2 else x * c[1],
    "even_plus_or_times": lambda c, x: x * c[1] if x % 2 else x + c[0],
    "sum_greater": lambda c, xs: sum(v for v in xs if v > c[0]),
    "count_less": lambda c, xs: len([v for v in xs if v < c[0]]),
    "count_multiples": lambda c, xs: len([v for v in xs if v % c[0] == 0]),
    "max_plus_c": lambda c, xs: max(xs) + c[0], "min_times_c": lambda c, xs: min(xs) * c[0],
    "sum_times": lambda c, xs: sum(xs) * c[0], "add_each": lambda c, xs: [v + c[0] for v in xs],
    "keep_greater": lambda c, xs: [v for v in xs if v > c[0]],
    "repeat": lambda c, s: s * c[0], "add_prefix": lambda c, s: c[0] + s, "add_suffix": lambda c, s: s + c[0],
    "first_chars": lambda c, s: s[:c[0]], "last_chars": lambda c, s: s[len(s) - min(c[0], len(s)):],
    "replace_char": lambda c, s: "".join(c[1] if ch == c[0] else ch for ch in s),
    "count_char": lambda c, s: len([ch for ch in s if ch == c[0]]), "len_plus": lambda c, s: len(s) + c[0],
}
_FAMILIES_BEFORE_1000 = {  # the 24 families of the 200-problem default; the rest came with the 1,000-problem test sets
    "times_plus", "times_minus", "plus_times", "minus_times", "mod_plus", "even_or_plus", "min_times", "max_plus",
    "sum_greater", "count_less", "count_multiples", "max_plus_c", "min_times_c", "sum_times", "add_each",
    "keep_greater", "repeat", "add_prefix", "add_suffix", "first_chars", "last_chars", "replace_char", "count_char",
    "len_plus"}


def _doc_constants(prompt):
    """Integer and quoted-string constants of the docstring's first line, in order."""
    line = prompt.split('"""')[1].split("\n")[0]
    return [int(t) if t[0] != "'" else t[1:-1] for t in re.findall(r"-?\d+|'[^']*'", line)]


def test_code_canonical_solutions_pass(problems):
    entry_points = set()
    for split in ("train", "test"):
        for i, p in enumerate(problems[("code", split)]):
            assert set(p) == EVALPLUS_FIELDS and p["task_id"] == f"HumanEval/{i}"
            assert p["atol"] == 0 and p["contract"] == ""
            assert 3 <= len(p["base_input"]) <= 5 and 5 <= len(p["plus_input"]) <= 16
            body = p["canonical_solution"]
            assert body.endswith("\n") and 1 <= body.count("\n") <= 3
            assert all(line.startswith("    ") for line in body.splitlines())
            scope = {}
            exec(p["prompt"] + body, scope)
            fn, consts = scope[p["entry_point"]], _doc_constants(p["prompt"])
            for args in p["base_input"] + p["plus_input"]:
                assert fn(*args) == _REFERENCE[p["entry_point"]](consts, *args), (p["prompt"], args)
            call, want = re.search(r">>> (.*)\n\s*(.*)\n", p["prompt"]).groups()
            assert eval(call, scope) == eval(want)  # the docstring example is right
            assert all(str(c) in body for c in consts)  # the body copies the docstring's constants
            entry_points.add(p["entry_point"])
    assert entry_points == set(_REFERENCE) == {f.name for f in code_task.FAMILIES} > _FAMILIES_BEFORE_1000


def test_code_plus_inputs_sit_at_the_constants(problems):
    """x and list problems have inputs at each integer constant k and k +- 1 (plus inputs, where a base input is not
    one already; one list holds them all)."""
    for p in problems[("code", "test")]:
        fam = next(f for f in code_task.FAMILIES if f.name == p["entry_point"])
        near = {k + d for k in _doc_constants(p["prompt"]) if isinstance(k, int) for d in (-1, 0, 1)}
        values = {args[0] for args in p["base_input"] + p["plus_input"]} if fam.arg == "x" else set()
        if fam.arg == "xs":
            values = next(set(args[0]) for args in p["plus_input"] if near <= set(args[0]))
        assert fam.arg == "s" or near <= values, p["prompt"]


def _body_with(fam, consts):
    return "".join(f"    {line}\n" for line in fam.body.format(**consts).split("\n"))


def test_code_inputs_tell_a_constant_from_its_neighbours(problems):
    """A body with one integer constant moved by 1 (in the family's grid) fails some base or plus input of nearly
    every problem: the inputs check the constants, not just the operation."""
    checked = passed = 0
    for p in problems[("code", "test")] + problems[("code", "dev")]:
        fam = next(f for f in code_task.FAMILIES if f.name == p["entry_point"])
        consts, grid = _consts_of(p), dict(fam.grid)
        inputs = p["base_input"] + p["plus_input"]
        outputs = lambda body: [repr(fn(*args)) for fn in [_run(p["prompt"] + body, p["entry_point"])]  # noqa: E731
                                for args in inputs]
        want = outputs(p["canonical_solution"])
        for key, value in consts.items():
            for moved in (value - 1, value + 1) if isinstance(value, int) else ():
                if moved in grid[key]:
                    checked += 1
                    passed += outputs(_body_with(fam, {**consts, key: moved})) == want
    assert checked > 400 and passed <= 0.01 * checked, (passed, checked)


def _run(program, entry_point):
    scope = {}
    exec(program, scope)
    return scope[entry_point]


def _one_constant_moved(problem):
    """(family, constants) with the first (integer) constant moved by 1 within the family's grid."""
    fam = next(f for f in code_task.FAMILIES if f.name == problem["entry_point"])
    consts = _consts_of(problem)
    key, value = next(iter(consts.items()))
    return fam, {**consts, key: value + 1 if value + 1 in dict(fam.grid)[key] else value - 1}


def test_new_families_pass_the_code_scorer(tmp_path):
    """The canonical solution of one held-out problem per family added for the 1,000-problem test set passes its own
    base and plus inputs through the code scorer as the DAG scores it (prompt + completion); the same family's body
    with a constant moved by 1 fails."""
    bench = get_benchmark("code")
    first = {}
    for p in code_task.make_problems("test", 400, seed=0):
        first.setdefault(p["entry_point"], p)
    sample = [first[name] for name in sorted(set(first) - _FAMILIES_BEFORE_1000)]
    problems = bench.problems(sample, "generated")
    assert len(problems) == 8
    settings = bench.settings({"parallel": 2, "timeout_s": 300})
    right = bench.score(problems, by_id(problems, [p["canonical_solution"] for p in problems]), tmp_path, settings)
    assert right["accuracy"] == 1.0 == right["metrics"]["pass@1_base"] and right["n"] == 8
    moved = [_body_with(*_one_constant_moved(p)) for p in problems]
    wrong = bench.score(problems, by_id(problems, moved), tmp_path / "moved", settings)
    assert wrong["accuracy"] == 0.0 and {r["plus_status"] for r in wrong["per_problem"].values()} == {"fail"}


_DIGEST_OF_DEFAULT_SETS = """
import hashlib, json
from sbd_core.tasks import code_task, math_task
sets = [code_task.make_problems("test", 1000, 0), code_task.make_problems("train", 1200, 0),
        math_task.make_problems("test", 1000, 0)]
print(hashlib.sha256(json.dumps(sets).encode()).hexdigest())
"""


def test_default_problem_sets_are_the_same_in_every_process():
    """The default's test sets and code train set depend on the seed only, not on the process's string hashing."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    digests = {subprocess.run([sys.executable, "-c", _DIGEST_OF_DEFAULT_SETS], env={**env, "PYTHONHASHSEED": seed},
                              check=True, capture_output=True, text=True).stdout for seed in ("1", "2")}
    assert len(digests) == 1 and len(digests.pop().strip()) == 64


def test_code_prompt_and_target(problems):
    p = problems[("code", "test")][0]
    assert code_task.prompt_text(p) == p["prompt"] and p["prompt"].startswith(f"def {p['entry_point']}(")
    assert code_task.target_text(p) == p["canonical_solution"]
    assert code_task.build_problem(p["entry_point"], _consts_of(p), p["task_id"]) == p  # content = f(signature)


def _consts_of(p):
    fam = next(f for f in code_task.FAMILIES if f.name == p["entry_point"])
    values = _doc_constants(p["prompt"])
    if fam.name == "replace_char":
        return {"p": values[0] + values[1]}
    by_doc = re.findall(r"\{(\w+)", fam.doc)
    return {k: values[by_doc.index(k)] for k in dict.fromkeys(by_doc)}


# ---------------------------------------------------------------- registry and errors

def test_registry_and_training_texts():
    assert set(TASKS) == {"math", "code", "code_chain", "code_affine", "math_long", "math_direct", "math_graded",
                          "math_shorter", "code_graded"} and get_task("math").extract_answer is math_task.extract_answer
    pairs = training_texts(["math", "code"], 5, seed=0)
    assert len(pairs) == 10 and all(isinstance(a, str) and isinstance(b, str) for a, b in pairs)
    assert pairs[0][0].startswith("Question:") and pairs[5][0].startswith("def ")
    assert pairs[:5] == training_texts("math", 5, seed=0)


@pytest.mark.parametrize("call", [
    lambda: get_task("gsm8k"),
    lambda: training_texts([], 3, 0),
    lambda: training_texts(["math", "math"], 3, 0),
    lambda: training_texts(["math"], 3, 0, split="valid"),
    lambda: math_task.make_problems("valid", 3, 0),
    lambda: math_task.make_problems("train", -1, 0),
    lambda: math_task.make_problems("train", 2.5, 0),
    lambda: math_task.make_problems("test", math_task.MAX_PROBLEMS + 1, 0),
    lambda: code_task.make_problems("test", code_task.capacity("test") + 1, 0),
    lambda: code_task.make_problems("test", True, 0),
    lambda: code_task.capacity("valid"),
    lambda: code_task.build_problem("nope", {}),
    lambda: code_task.build_problem("times_plus", {"a": 2}),
    lambda: math_task.sub_steps(3, 5),
    lambda: build_tokenizer([]),
    lambda: build_tokenizer("some text"),
    lambda: build_tokenizer(["ok", 3]),
    lambda: build_tokenizer(["ok"], vocab_size=100),
    lambda: load_tokenizer("/nonexistent/dir"),
])
def test_bad_inputs_raise(call):
    with pytest.raises(ValueError):
        call()


def test_empty_request_is_empty():
    assert math_task.make_problems("test", 0, 0) == [] and code_task.make_problems("test", 0, 0) == []


# ---------------------------------------------------------------- tokenizer

def test_tokenizer_round_trip_and_digits(problems, tokenizer):
    extra = ["", "  x\n\n\tdef f():\n        return 'é ✓'  \n", "-1234567890", "#### 85"]
    texts = [_full(n, p) for (n, _), ps in problems.items() for p in ps] + extra
    for text in texts:
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert tokenizer.decode(ids) == text
        assert all(sum(ch.isdigit() for ch in tok) <= 1 for tok in tokenizer.convert_ids_to_tokens(ids))
    assert not [t for t in tokenizer.get_vocab() if sum(ch.isdigit() for ch in t) > 1]
    assert tokenizer.convert_ids_to_tokens(tokenizer.encode("2025", add_special_tokens=False)) == ["2", "0", "2", "5"]
    assert len(tokenizer) == 512  # enough text to reach the requested size


def test_tokenizer_special_tokens(tokenizer):
    assert (tokenizer.bos_token, tokenizer.eos_token, tokenizer.pad_token) == (BOS_TOKEN, EOS_TOKEN, PAD_TOKEN)
    assert [tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS] == list(range(7))
    assert set(SPECIAL_TOKENS) <= set(tokenizer.all_special_tokens)
    mask = RESERVED_TOKENS[0]
    raw = tokenizer.encode(f"a{mask}b", add_special_tokens=False)
    assert raw[1] == tokenizer.convert_tokens_to_ids(mask)  # one token in text
    ids = tokenizer("47+38")["input_ids"]
    assert ids == tokenizer.encode("47+38", add_special_tokens=True) and len(ids) == 6  # BOS in front, as Llama-3.1
    assert ids[0] == tokenizer.bos_token_id and tokenizer.eos_token_id not in ids
    assert tokenizer("47+38", add_special_tokens=False)["input_ids"] == ids[1:]


def test_tokenizer_deterministic_and_save_load(problems, tokenizer, tmp_path):
    texts = [_full("math", p) for p in problems[("math", "train")]][:200]
    a, b = build_tokenizer(texts, vocab_size=300), build_tokenizer(texts, vocab_size=300)
    assert a.backend_tokenizer.to_str() == b.backend_tokenizer.to_str() and len(a) <= 300
    save_tokenizer(tokenizer, tmp_path)
    loaded = load_tokenizer(tmp_path)
    sample = _full("code", problems[("code", "test")][0])
    assert loaded.encode(sample) == tokenizer.encode(sample)
    assert loaded.decode(loaded.encode(sample), skip_special_tokens=True) == sample
    assert (loaded.bos_token_id, loaded.eos_token_id, loaded.pad_token_id) == (0, 1, 2)
    assert set(SPECIAL_TOKENS) <= set(loaded.all_special_tokens)


def test_token_length_targets(problems, tokenizer):
    lengths = {n: [len(tokenizer.encode(_full(n, p), add_special_tokens=False)) for p in problems[(n, "test")]] for n in TASKS}
    assert 60 <= statistics.median(lengths["math"]) <= 100
    assert 40 <= statistics.median(lengths["code"]) <= 80
    assert max(lengths["math"]) <= 128 and max(lengths["code"]) <= 128
