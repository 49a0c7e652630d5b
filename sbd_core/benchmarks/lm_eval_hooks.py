"""Functions the shipped lm-eval task YAMLs call (``doc_to_text: !function sbd_core.benchmarks.lm_eval_hooks.X``).

lm-eval imports them by their dotted name, so the hooks are ordinary, tested code rather than a ``utils.py`` next to
the YAML. Prompts and targets are functions rather than Jinja templates because lm-eval 0.4.13 compiles a template
anew on every call (five times per document for ``doc_to_target``): scoring GSM8K's 1,319 stored answers spent 15 s
compiling templates. Answers of the reasoning benchmarks are judged with ``math-verify`` (the equivalence checker lm-eval's own
``minerva_math`` uses), not string match: 189 of the 500 MATH-500 answers are LaTeX expressions such as
``\\left( 3, \\frac{\\pi}{2} \\right)``, ``\\dfrac{14}{3}`` or ``10\\%``.
"""

from __future__ import annotations

__all__ = ["gsm8k_prompt", "gsm8k_target", "math_prompt", "final_answer_text", "math_answer", "math_verify_results",
           "synthetic_math_results"]


def gsm8k_prompt(doc: dict) -> str:
    """lm-eval's ``gsm8k_cot_llama`` instruction (Meta's GSM8K prompt for chat models) around the question."""
    return ("Given the following problem, reason and give a final answer to the problem.\nProblem: "
            f"{doc['question']}\nYour response should end with \"The final answer is [answer]\" where [answer] is the "
            "response to the problem.\n")


def gsm8k_target(doc: dict) -> str:
    """The number after ``####`` in a GSM8K solution (commas kept; the metric ignores them)."""
    return doc["answer"].split("####")[-1].strip()


def math_prompt(doc: dict) -> str:
    """The user prompt the paper's math training data (OpenMathReasoning; NeMo-Skills ``generic/math``) was made
    with, around the problem."""
    return ("Solve the following math problem. Make sure to put the answer (and only answer) inside \\boxed{}.\n\n"
            + doc["problem"])


def final_answer_text(response: str) -> str:
    """The part of a response that holds the final answer: the text after the last ``</think>`` when the model
    thought; nothing when a ``<think>`` block never closed (it ran out of tokens mid-thought: no answer, as in
    NVIDIA's evaluations of thinking models); else the whole response."""
    if "</think>" in response:
        return response.rsplit("</think>", 1)[1]
    return "" if "<think>" in response else response


def _parsed(text: str) -> list:
    from math_verify import parse

    return parse(text) if text.strip() else []


def math_answer(response: str) -> str | None:
    """The answer math-verify reads from a response (its string form), or None when there is none."""
    parsed = _parsed(final_answer_text(response))
    return str(parsed[-1]) if parsed else None


def math_verify_results(doc: dict, results: list[str]) -> dict[str, int]:
    """``{"math_verify": 1}`` when the response's final answer equals ``doc["answer"]`` mathematically, else 0."""
    from math_verify import verify

    gold = _parsed("$" + str(doc["answer"]) + "$")
    target = _parsed(final_answer_text(results[0]))
    return {"math_verify": int(bool(gold and target and verify(gold, target)))}


def synthetic_math_results(doc: dict, results: list[str]) -> dict[str, int]:
    """``{"exact_match": 1}`` when the synthetic task's own answer extraction (its first ``#### N``) equals the
    problem's answer; the extraction rule is the task module's, so it lives in one place."""
    from sbd_core.tasks import get_task

    return {"exact_match": int(get_task("math").extract_answer(results[0]) == str(doc["answer"]))}
