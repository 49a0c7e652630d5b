"""Multiple-choice questions from the synthetic tasks' held-out problems: the embedded analogue of the paper's Table 2.

Each document asks the model to prefer the right answer over three near misses by log-likelihood, as lm-eval's
``multiple_choice`` tasks do (``sbd_core/benchmarks/lm_eval_tasks/sbd_synth_{math,code}_mc.yaml``):

* **math** (``math_docs``): the context is the task's prompt (``Question: ...\\nAnswer:``, the question only); the
  right choice is the whole worked solution the model was trained to write; each distractor is that solution with
  the final answer (``So N.`` and ``#### N``) replaced by a near miss: off by one, off by ten, and the answer's last
  two digits swapped (off by two, twenty, ... where a swap is impossible or collides). All choices share the column
  steps, so the comparison is decided at the final number.
* **code** (``code_docs``): the context is the task's prompt (signature, docstring, one doctest); the right choice is
  the canonical body; each distractor is the body with one literal changed (an integer by +-1, 2, 5 or 10, a string
  in its last letter or its length) such that the program returns something else on at least one of the problem's
  own test inputs (checked by running both: our generated programs, never a model's).

Documents are deterministic in (problems, seed): the problems are the task's ``make_problems("test", n, seed)``, and
the near misses and the choice order come from a ``random.Random`` seeded with the seed and the problem id. Each
document is ``{"sbd_id", "context", "choices", "gold", "kinds"}`` (``kinds[i]`` names how ``choices[i]`` was made;
``gold`` is the index of the right one); a code document also names its problem's family (``cluster``: the report's
intervals count the questions of one family as dependent).
"""

from __future__ import annotations

import copy
import random
import re

from ..tasks import code_task, get_task

__all__ = ["math_docs", "code_docs", "near_miss_numbers", "near_miss_bodies"]

N_DISTRACTORS = 3


def _document(problem_id: str, context: str, right: str, wrong: list[tuple[str, str]], rng: random.Random) -> dict:
    """The document with the right choice and the distractors in a seeded random order."""
    if len(wrong) != N_DISTRACTORS or len({right, *(text for _, text in wrong)}) != N_DISTRACTORS + 1:
        raise ValueError(f"{problem_id}: need {N_DISTRACTORS} distinct distractors, got {[k for k, _ in wrong]}")
    entries = [("answer", right)] + wrong
    rng.shuffle(entries)
    kinds = [kind for kind, _ in entries]
    return {"sbd_id": problem_id, "context": context, "choices": [text for _, text in entries],
            "gold": kinds.index("answer"), "kinds": kinds}


def _rng(seed: int, problem_id: str) -> random.Random:
    return random.Random(f"sbd-mc:{seed}:{problem_id}")  # a str seed hashes the same in every process


# ------------------------------------------------------------------------------------------------ math
def _swap_last_digits(number: int) -> int | None:
    digits = str(number)
    if len(digits) < 2 or digits[-1] == digits[-2] or (len(digits) == 2 and digits[-1] == "0"):
        return None  # nothing to swap, or a leading zero
    return int(digits[:-2] + digits[-1] + digits[-2])


def near_miss_numbers(answer: int, rng: random.Random) -> list[tuple[str, int]]:
    """Three distinct wrong non-negative answers: (kind, number) for off by one, off by ten, last two digits
    swapped; a near miss that would be negative goes the other way, a missing or colliding swap becomes the first
    free of answer +-2, +-20, +-3, ..."""
    chosen: list[tuple[str, int]] = []

    def take(kind: str, candidates) -> None:
        for value in candidates:
            if value is not None and value >= 0 and value != answer and value not in {v for _, v in chosen}:
                chosen.append((kind, value))
                return
        raise ValueError(f"no {kind} near miss for {answer}")

    one, ten = rng.choice((1, -1)), rng.choice((10, -10))
    take("off_by_one", (answer + one, answer - one))
    take("off_by_ten", (answer + ten, answer - ten))
    swapped = _swap_last_digits(answer)
    if swapped is not None and swapped not in {v for _, v in chosen}:
        take("digit_swap", (swapped,))
    else:
        take("off_by_more", (answer + d for step in range(2, 10) for d in (step, -step, 10 * step, -10 * step)))
    return chosen


def math_docs(n: int, seed: int) -> list[dict]:
    """``n`` documents from the math task's held-out problems (see the module doc)."""
    task = get_task("math")
    docs = []
    for problem in task.make_problems("test", n, seed):
        answer = int(problem["answer"])
        solution = task.target_text(problem)[1:]  # the target without its leading space (lm-eval adds " ")
        ending = f"So {answer}.\n#### {answer}"
        if not solution.endswith(ending):
            raise ValueError(f"{problem['task_id']}: solution does not end with {ending!r}: {solution!r}")
        head = solution[:-len(ending)]
        rng = _rng(seed, problem["task_id"])
        wrong = [(kind, f"{head}So {value}.\n#### {value}") for kind, value in near_miss_numbers(answer, rng)]
        docs.append(_document(problem["task_id"], task.prompt_text(problem), solution, wrong, rng))
    return docs


# ------------------------------------------------------------------------------------------------ code
_LITERAL = re.compile(r"'[^']*'|\b\d+\b")


def _shift(letter: str, step: int) -> str:
    return chr((ord(letter) - ord("a") + step) % 26 + ord("a")) if letter.islower() else letter


def _variants(literal: str) -> list[tuple[str, str]]:
    """(kind, replacement) near misses of one literal of a body: an integer +-1, +-2, +-5, +-10; a string with its
    last letter one on or one back, one letter shorter or its last letter doubled."""
    if literal.startswith("'"):
        text = literal[1:-1]
        if not text:
            return []
        out = [("string_letter", repr(text[:-1] + _shift(text[-1], step))) for step in (1, -1)]
        out += [("string_shorter", repr(text[:-1]))] if len(text) > 1 else []
        return out + [("string_longer", repr(text + text[-1]))]
    value = int(literal)
    return [(f"int_off_by_{step}", str(value + sign * step)) for step in (1, 2, 5, 10) for sign in (1, -1)]


def _outputs(problem: dict, body: str) -> list[str] | None:
    """The program's results (as repr) on the problem's base and plus inputs, or None when it fails on one."""
    scope: dict = {}
    try:
        exec(problem["prompt"] + body, scope)  # noqa: S102 - our own generated program, never a model's
        function = scope[problem["entry_point"]]
        return [repr(function(*copy.deepcopy(args))) for args in problem["base_input"] + problem["plus_input"]]
    except Exception:  # noqa: BLE001 - a near miss that crashes is not used
        return None


def near_miss_bodies(problem: dict) -> list[tuple[str, str]]:
    """Every (kind, body) that changes one literal of the canonical body and returns something else on at least one
    of the problem's test inputs, in order of position."""
    body = problem["canonical_solution"]
    reference = _outputs(problem, body)
    out = []
    for match in _LITERAL.finditer(body):
        for kind, replacement in _variants(match.group()):
            candidate = body[:match.start()] + replacement + body[match.end():]
            result = _outputs(problem, candidate)
            if result is not None and result != reference and candidate not in {b for _, b in out}:
                out.append((kind, candidate))
    return out


def code_docs(n: int, seed: int) -> list[dict]:
    """``n`` documents from the code task's held-out problems (see the module doc)."""
    docs = []
    for problem in code_task.make_problems("test", n, seed):
        rng = _rng(seed, problem["task_id"])
        candidates = near_miss_bodies(problem)
        if len(candidates) < N_DISTRACTORS:
            raise ValueError(f"{problem['task_id']} ({problem['entry_point']}): only {len(candidates)} near misses")
        wrong = rng.sample(candidates, N_DISTRACTORS)
        doc = _document(problem["task_id"], code_task.prompt_text(problem), problem["canonical_solution"], wrong, rng)
        docs.append({**doc, "cluster": problem["entry_point"]})  # the entry point names the problem's family
    return docs
