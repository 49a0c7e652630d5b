"""The code task with many families (sbd_core.tasks.code_chain_task): its grammar, the bodies' semantics against an
evaluation written here step by step, the split partition (of code_affine's keys too) and the round-robin draw over
952 families."""

import hashlib
import itertools
import math
import re
from collections import Counter

import pytest

from sbd_core.benchmarks import get_benchmark
from sbd_core.tasks import SPLITS, code_affine_task, code_chain_task, get_task
from sbd_core.tasks.chains import informative

_INT_STEPS = {  # a chain step applied to the running value y, as the docstring words say
    "times": lambda y, c: y * c, "plus": lambda y, c: y + c, "minus": lambda y, c: y - c,
    "mod": lambda y, c: y - c * math.floor(y / c), "div": lambda y, c: math.floor(y / c),
    "from": lambda y, c: c - y,
}
_FILTER = {"gt": lambda v, f: v > f, "lt": lambda v, f: v < f, "even": lambda v, f: v % 2 == 0,
           "odd": lambda v, f: v % 2 != 0}
_MAP = {"": lambda v, m: v, "plus": lambda v, m: v + m, "times": lambda v, m: v * m}


def _reference(problem):
    """The function's value on each input, computed from the entry point's steps and the docstring's constants."""
    steps = problem["entry_point"].split("_")
    consts = [int(t) for t in re.findall(r"-?\d+", problem["prompt"].split('"""')[1].split("\n")[0])]
    if steps[0] in _INT_STEPS:
        assert len(steps) == len(consts) and len(steps) in (2, 3, 4)

        def value(x):
            for step, c in zip(steps, consts):
                x = _INT_STEPS[step](x, c)
            return x
        return value
    filt, reduction = steps[0], steps[-1]
    mapping = steps[1] if len(steps) == 3 else ""
    f = consts.pop(0) if filt in ("gt", "lt") else None
    m = consts.pop(0) if mapping else None
    assert not consts

    def value(xs):
        kept = [_MAP[mapping](v, m) for v in xs if _FILTER[filt](v, f)]
        return {"sum": sum(kept), "list": kept, "count": len(kept)}[reduction]
    return value


@pytest.fixture(scope="module")
def test_problems():
    return code_chain_task.make_problems("test", 1000, seed=0)


def test_grammar_gives_952_families_with_distinct_entry_points():
    names = [f.name for f in code_chain_task.FAMILIES]
    assert len(names) == len(set(names)) == 952
    chains = [n.split("_") for n in names if n.split("_")[0] in _INT_STEPS]
    assert len(chains) == 6 * 5 + 6 * 5 * 5 + 6 * 5 * 5 * 5  # two to four steps, never the same step twice in a row
    assert all(a != b for c in chains for a, b in zip(c, c[1:]))
    assert {len(c) for c in chains} == {2, 3, 4}
    fams = {f.name: f for f in code_chain_task.FAMILIES}
    assert dict(fams["plus_times_mod_from"].grid) == {"c1": tuple(range(1, 8)), "c2": tuple(range(2, 6)),
                                                      "c3": tuple(range(2, 6)), "c4": tuple(range(1, 8))}
    assert dict(fams["plus_times_mod"].grid)["c1"] == tuple(range(1, 16))


def test_hand_written_cases():
    fams = {f.name: f for f in code_chain_task.FAMILIES}
    cases = [("plus_from_times", "Return x plus {c1}, subtracted from {c2}, times {c3}.",
              "return ({c2} - (x + {c1})) * {c3}"),
             ("times_plus_mod", "Return x times {c1}, plus {c2}, modulo {c3}.", "return (x * {c1} + {c2}) % {c3}"),
             ("mod_from_mod", "Return x modulo {c1}, subtracted from {c2}, modulo {c3}.",
              "return ({c2} - x % {c1}) % {c3}"),
             ("div_minus", "Return x floor-divided by {c1}, minus {c2}.", "return x // {c1} - {c2}"),
             ("plus_times_from_mod", "Return x plus {c1}, times {c2}, subtracted from {c3}, modulo {c4}.",
              "return ({c3} - (x + {c1}) * {c2}) % {c4}"),
             ("from_plus_div_from", "Return x subtracted from {c1}, plus {c2}, floor-divided by {c3}, subtracted "
              "from {c4}.", "return {c4} - ({c1} - x + {c2}) // {c3}"),
             ("gt_plus_sum", "Take the elements greater than {f}, add {m} to each, and return their sum.",
              "return sum(v + {m} for v in xs if v > {f})"),
             ("odd_times_sum", "Take the odd elements, multiply each by {m}, and return their sum.",
              "return sum(v * {m} for v in xs if v % 2 == 1)"),
             ("lt_count", "Take the elements less than {f} and return their count.",
              "return sum(1 for v in xs if v < {f})")]
    for name, doc, body in cases:
        assert (fams[name].doc, fams[name].body) == (doc, body), name
    problem = code_chain_task.build_problem("plus_from_times", {"c1": 11, "c2": 15, "c3": 4})
    assert problem["canonical_solution"] == "    return (15 - (x + 11)) * 4\n"
    assert problem["prompt"].startswith('def plus_from_times(x: int) -> int:\n    """Return x plus 11, subtracted '
                                        'from 15, times 4.\n    >>> plus_from_times(')


def test_canonical_bodies_compute_what_the_docstring_says(test_problems):
    """Every test problem's body, run on its base and plus inputs, gives the step-by-step value of its docstring;
    so does its doctest example; and the body copies the docstring's constants."""
    for p in test_problems:
        scope = {}
        exec(p["prompt"] + p["canonical_solution"], scope)  # noqa: S102 - the generator's own code
        fn, want = scope[p["entry_point"]], _reference(p)
        for (arg,) in p["base_input"] + p["plus_input"]:
            assert fn(arg) == want(arg), (p["prompt"], arg)
        call, shown = re.search(r">>> (.*)\n\s*(.*)\n", p["prompt"]).groups()
        assert eval(call, scope) == eval(shown)  # noqa: S307
        consts = re.findall(r"-?\d+", p["prompt"].split('"""')[1].split("\n")[0])
        assert all(c in p["canonical_solution"] for c in consts)


@pytest.mark.parametrize("task, salt", [(code_chain_task, "sbd-code-chain-v2"),
                                         (code_affine_task, "sbd-code-affine-v1")])
def test_splits_partition_every_kept_key_by_the_salted_hash(task, salt):
    """Both chain tasks: every constant tuple the degenerate check keeps is one key, and the salted hash, recomputed
    here, puts exactly each split's capacity in it."""
    kept = [task.signature(f.name, dict(zip([k for k, _ in f.grid], combo)))
            for f in task.FAMILIES
            for combos in [list(itertools.product(*(v for _, v in f.grid)))]
            for combo in itertools.compress(combos, informative(f, combos))]
    assert len(kept) == len(set(kept))

    def bucket(key):
        value = int(hashlib.sha256((salt + key).encode()).hexdigest()[:8], 16) % 100
        return "train" if value < 80 else "dev" if value < 90 else "test"
    assert Counter(bucket(k) for k in kept) == {s: task.capacity(s) for s in SPLITS}
    assert task.capacity("test") >= 10_000 and task.capacity("train") >= 100_000


def _matters(steps, consts, probes=tuple(range(-40, 41)) + (997, 10_007, -1_234, 123_456)):
    """The rule, in plain Python: not constant on the probes, and each constant moved by 1 changes some value."""
    def run(cs):
        out = []
        for x in probes:
            for step, c in zip(steps, cs):
                x = _INT_STEPS[step](x, c)
            out.append(x)
        return out
    base = run(consts)
    return len(set(base)) > 1 and all(run(consts[:j] + (consts[j] + 1,) + consts[j + 1:]) != base
                                      for j in range(len(consts)))


def test_degenerate_constant_tuples_are_left_out():
    """``informative`` agrees with the rule computed in plain Python on every tuple of seven families, and leaves out
    the degenerate ones named here."""
    fams = {f.name: f for f in code_chain_task.FAMILIES}
    for name in ("mod_div", "times_mod", "times_plus_mod", "mod_plus_div", "from_times_mod", "plus_times_minus", "times_mod_plus_div"):
        combos = list(itertools.product(*(v for _, v in fams[name].grid)))
        assert informative(fams[name], combos) == [_matters(name.split("_"), c) for c in combos]
    degenerate = {("mod_div", (3, 5)), ("times_mod", (6, 3)), ("times_plus_mod", (4, 3, 2)),
                  ("from_times_mod", (15, 3, 3))}
    for name, combo in degenerate:
        assert informative(fams[name], [combo]) == [False]
    assert informative(fams["plus_times"], [(3, 2)]) == [True]


def test_a_1000_problem_test_set_spans_the_families(test_problems):
    """The round-robin draw: 1,000 distinct test problems over at least 900 families, none more than 2."""
    keys = {p["prompt"] for p in test_problems}
    assert len(keys) == 1000
    counts = Counter(p["entry_point"] for p in test_problems)
    assert len(counts) >= 900 and max(counts.values()) <= 2
    assert code_chain_task.make_problems("test", 1000, seed=0) == test_problems  # deterministic in the seed
    assert code_chain_task.make_problems("test", 50, seed=1) != test_problems[:50]
    train = {p["prompt"] for p in code_chain_task.make_problems("train", 2000, seed=0)}
    assert not train & keys


def test_registered_as_task_source_and_benchmark():
    task = get_task("code_chain")
    problem = task.make_problems("dev", 3, 0)[0]
    assert task.prompt_text(problem) == problem["prompt"] and task.target_text(problem).startswith("    return ")
    bench = get_benchmark("code_chain")
    assert bench.cluster(problem) == problem["entry_point"]


def test_the_code_scorer_passes_the_bodies_and_fails_a_moved_constant_or_dropped_parentheses(tmp_path):
    """Through the code scorer as the DAG scores it (prompt + completion): the canonical bodies of six families pass;
    each body with its last constant moved by 1, or with its parentheses dropped, fails."""
    bench = get_benchmark("code_chain")
    names = ("plus_times", "plus_from_times", "minus_mod_div", "from_times", "gt_plus_list", "odd_times_list")
    test_set = code_chain_task.make_problems("test", 5000, 0)  # five or more a family
    problems = bench.problems([next(p for p in test_set if p["entry_point"] == name) for name in names], "generated")
    settings = bench.settings({"parallel": 2, "timeout_s": 300})

    def scored(bodies, folder):
        return bench.score(problems, {p["task_id"]: b for p, b in zip(problems, bodies)}, tmp_path / folder, settings)
    right = scored([p["canonical_solution"] for p in problems], "right")
    assert right["accuracy"] == 1.0 and right["n"] == len(names)
    moved = [re.sub(r"(\d+)(\D*)$", lambda m: f"{int(m.group(1)) + 1}{m.group(2)}", p["canonical_solution"])
             for p in problems]
    assert all(a != b for a, b in zip(moved, (p["canonical_solution"] for p in problems)))
    assert scored(moved, "moved")["accuracy"] == 0.0
    flat = [p["canonical_solution"].replace("(", "").replace(")", "") for p in problems[:3]]
    assert bench.score(problems[:3], {p["task_id"]: b for p, b in zip(problems, flat)}, tmp_path / "flat",
                       settings)["accuracy"] == 0.0

