"""LiveCodeBench v6 (Jain et al. 2024), the paper's reasoning code benchmark: competitive programming problems from
LeetCode (functional: a ``Solution`` method) and AtCoder / Codeforces (stdin programs), pass@1 on hidden tests.

Data: the raw JSON-lines shards ``test.jsonl`` ... ``test6.jsonl`` of the hub dataset
``livecodebench/code_generation_lite`` at :data:`REVISION`, read line by line (the dataset's loading script, which needs
remote code, is never run). Releases are cumulative (:data:`RELEASES`, the loading script's version tags):
``release_v6`` is all six shards (1,055 problems, May 2023 - April 2025), ``v6`` the sixth alone (175 problems, January
- April 2025); ``start_date`` / ``end_date`` narrow a release by contest date, as lcb_runner does. The default is
``release_v6`` (docs/livecodebench.md: the paper names no window; read as one greedy sample per problem, its Table 1
accuracies cannot be fractions of the 175 problems of ``v6``, and fit 1,055); the score also reports the windows papers
call "LCB v6" (:mod:`.lcb_results`). A downloaded shard must have the sha256 of the hub's copy at that revision
(:data:`SHARD_SHA256`); offline, ``data`` names a local folder holding the release's shards (their sha256 is recorded in
provenance, and whether each matches). The benchmark stage checks every selected problem's tests (without ever
unpickling them: ``sbd_core.sandbox.lcb_tests``), writes the problems in lcb_runner's order (sorted by
``question_id``) and prints the window and how many problems it holds. Problem ids: ``question_id``.

Prompt (lcb_runner's ``format_prompt_generation`` for chat models): the user turn is lcb_runner's question template
("### Question:", the problem, "### Format:" with the starter code or the stdin instruction, "### Answer: (use the
provided format with backticks)") preceded by its generic system message; the system turn is the run's ``system_prompt``
(``"detailed thinking on"``, as the other reasoning benchmarks; lcb_runner's layout for reasoning models, which folds
its system message into the user turn). Without a ``system_prompt`` the system turn is lcb_runner's message and the user
turn the template (its layout for chat models). Plain-text prompts (``chat: false``) are refused: lcb_runner's
base-model prompt is a few-shot one this module does not build.

The program is lcb_runner's ``extract_code`` of the raw completion, thinking included (the text between the last two
lines containing three backticks); no fence, no program (the problem fails); the score file counts the problems where
the reasoning benchmarks' rule (the answer after ``</think>``) would give another program. A generations record may hold
several samples (``"completions": [...]``): pass@k with lcb_runner's estimator. Scoring:
:func:`sbd_core.sandbox.lcb_grader.evaluate_lcb` (lcb_runner's grading, in the code sandbox); the metrics and
lcb_runner's ``eval_all.json``: :mod:`.lcb_results`.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import asdict
from datetime import date, datetime
from pathlib import Path
from typing import Mapping

from sbd_core.sandbox import limits
from sbd_core.io_utils import write_json_atomic, write_jsonl_atomic

from . import lcb_results
from .base import ID_KEY, Benchmark
from .chat import THINKING_ON, chat_messages, render_chat
from .lm_eval_hooks import final_answer_text
from .lm_eval_task import task_config
from .settings import LiveCodeBenchSettings

__all__ = ["BENCHMARK", "REPO", "REVISION", "RELEASES", "SHARD_SHA256", "LiveCodeBench", "question_prompt",
           "extract_code", "extraction_effect"]

REPO = "livecodebench/code_generation_lite"
REVISION = "0fe84c3912ea0c4d4a78037083943e8f0c4dd505"
SHARDS = ("test.jsonl", "test2.jsonl", "test3.jsonl", "test4.jsonl", "test5.jsonl", "test6.jsonl")
# sha256 of each shard at REVISION (the hub's LFS object ids of those files)
SHARD_SHA256 = {
    "test.jsonl": "2bd02b38beb48e8c46b5b9987095d999ff38cd8efc255ea5d58974317c48f63f",
    "test2.jsonl": "095df7c5daf15f882c51a9deb84085cff1e073495a5dbcf95015a564d485f3a3",
    "test3.jsonl": "28ed26cc83363ce3f1fe2d5fad9f8393077beb1907b167a31bd3b32f80801b79",
    "test4.jsonl": "d711138ddaebfcf5f8ec6a4283ee677298c0f5c5d374a235af92aaf0584510da",
    "test5.jsonl": "7f77571c2a6df0c2a72a3277650309f67e01e0008e18117e624633df53f81214",
    "test6.jsonl": "bb4c364f71921c4495a6ad15abe1a927350b720009f4933e2e71f8af0f6fd1f5",
}
# the loading script's version tags: release_vN (cumulative), vN (shard N alone), vN_vM (shards N to M)
RELEASES = {f"release_v{n}": SHARDS[:n] for n in range(1, 7)}
RELEASES["release_latest"] = SHARDS
RELEASES.update({f"v{n}": SHARDS[n - 1:n] for n in range(1, 7)})
RELEASES.update({f"v{a}_v{b}": SHARDS[a - 1:b] for a in range(1, 7) for b in range(a + 1, 7)})
FIELDS = ("question_title", "question_content", "platform", "question_id", "contest_id", "contest_date",
          "starter_code", "difficulty", "public_test_cases", "private_test_cases", "metadata")
# lcb_runner/prompts/code_generation.py's PromptConstants, verbatim
SYSTEM_MESSAGE = ("You are an expert Python programmer. You will be given a question (problem specification) and "
                  "will generate a correct Python program that matches the specification and passes all tests.")
FORMAT_WITH_STARTER_CODE = ("You will use the following starter code to write the solution to the problem and enclose "
                            "your code within delimiters.")
FORMAT_WITHOUT_STARTER_CODE = (
    "Read the inputs from stdin solve the problem and write the answer to stdout (do not directly test on the sample "
    "inputs). Enclose your code within delimiters as follows. Ensure that when the python program runs, it reads the "
    "inputs, runs the algorithm and writes output to STDOUT.")


def question_prompt(problem: Mapping) -> str:
    """lcb_runner's ``get_generic_question_template_answer``."""
    prompt = f"### Question:\n{problem['question_content']}\n\n"
    if problem["starter_code"]:
        prompt += f"### Format: {FORMAT_WITH_STARTER_CODE}\n```python\n{problem['starter_code']}\n```\n\n"
    else:
        prompt += f"### Format: {FORMAT_WITHOUT_STARTER_CODE}\n```python\n# YOUR CODE HERE\n```\n\n"
    return prompt + "### Answer: (use the provided format with backticks)\n\n"


def extract_code(completion: str) -> str | None:
    """The program in an answer, as lcb_runner's ``extract_code`` takes it from the raw model output (thinking
    included): the text between the last two lines that contain three backticks; None when there is no such pair
    or the text between them is blank (lcb_runner then runs an empty program, which always fails)."""
    lines = completion.split("\n")
    fences = [i for i, line in enumerate(lines) if "```" in line]
    code = "\n".join(lines[fences[-2] + 1:fences[-1]]) if len(fences) >= 2 else ""
    return code if code.strip() else None


def extraction_effect(outputs: Mapping[str, list[str]], programs: Mapping[str, list[str | None]]) -> dict:
    """Where the thinking block changes the program: the problems (ids) with a sample whose program differs from the
    one the reasoning benchmarks' rule would take (the answer after the last ``</think>``; none after an unclosed
    ``<think>``)."""
    differ = sorted(qid for qid, texts in outputs.items()
                    if any(extract_code(final_answer_text(text)) != program
                           for text, program in zip(texts, programs[qid])))
    unclosed = sum(1 for texts in outputs.values() for text in texts if "<think>" in text and "</think>" not in text)
    return {"rule": "lcb_runner's extract_code on the raw completion, thinking included",
            "problems_with_another_program_after_thinking": len(differ), "ids": differ,
            "samples_with_unclosed_thinking": unclosed}


def _day(text: str | None) -> date | None:
    """lcb_runner's ``parse_date``: the calendar day of an ISO date or timestamp (windows compare days)."""
    return None if text is None else datetime.strptime(text[:10], "%Y-%m-%d").date()


class LiveCodeBench(Benchmark):
    """LiveCodeBench code generation (see the module doc)."""

    several_samples = True

    def settings(self, mapping=None) -> LiveCodeBenchSettings:
        """The validated settings; ``release`` must be a known version tag and ``chat`` true."""
        settings = super().settings(mapping)
        if settings.release not in RELEASES:
            raise ValueError(f"benchmarks.{self.name}.release must be one of {sorted(RELEASES)}, "
                             f"got {settings.release!r}")
        if not settings.chat:
            raise ValueError(f"benchmarks.{self.name}.chat must be true: only lcb_runner's chat-model prompt is "
                             "built (its base-model prompt is a few-shot one)")
        if settings.start_date and settings.end_date and settings.start_date > settings.end_date:
            raise ValueError(f"benchmarks.{self.name}: start_date {settings.start_date} is after end_date "
                             f"{settings.end_date}")
        return settings

    # ------------------------------------------------------------------------------------------ data
    def fetch(self, settings: LiveCodeBenchSettings, out_dir) -> Path:
        """Read the release's shards (download, or the ``data`` folder), select the window, check each problem's
        tests, write ``<name>_test.jsonl`` sorted by ``question_id`` and its provenance (with each shard's sha256);
        print the window and the problem count."""
        shards = RELEASES[settings.release]
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f".{self.name}_shards_", dir=out_dir) as tmp:
            folder = Path(settings.data) if settings.data else self._download(shards, Path(tmp))
            rows, records = [], []
            for shard in shards:
                selected, record = self._read_shard(folder, shard, settings)
                rows += selected
                records.append(record)
        if not settings.data and not all(r["matches_revision"] for r in records):
            bad = [r["file"] for r in records if not r["matches_revision"]]
            raise RuntimeError(f"{self.name}: downloaded shard(s) {bad} differ from {REPO}@{REVISION}'s sha256")
        if not rows:
            raise ValueError(f"{self.name}: no problem of {settings.release} lies in the window "
                             f"{settings.start_date} to {settings.end_date}")
        problems = self.problems(sorted(rows, key=lambda r: r["question_id"]), folder)[:settings.limit]
        kinds = self._check_tests(problems, settings.max_tests_bytes)
        path = write_jsonl_atomic(problems, out_dir / f"{self.name}_test.jsonl")
        window = self._window_text(settings, problems)
        record = {"benchmark": self.name, "source": self.source, "data": settings.data, "release": settings.release,
                  "window": window, "n": len(problems), "kinds": kinds, "shards": records,
                  "sha256": _sha256(path), "settings": asdict(settings)}
        write_json_atomic(record, Path(str(path) + ".provenance.json"))
        print(f"{self.name}: {len(problems)} problems ({window}; {kinds['stdin']} stdin, {kinds['functional']} "
              f"functional) from {', '.join(shards)}")
        return path

    def _download(self, shards: tuple[str, ...], tmp: Path) -> Path:
        from sbd_core.hub import snapshot

        try:
            return snapshot(REPO, REVISION, tmp / "shards", list(shards), repo_type="dataset")
        except Exception as err:  # noqa: BLE001 (any download failure gets the same hint)
            raise RuntimeError(f"{self.name}: could not download {REPO}@{REVISION[:7]} shards {list(shards)} ({err}); "
                               f"offline, set benchmarks.{self.name}.data to a local folder holding them") from err

    def _read_shard(self, folder: Path, shard: str, settings: LiveCodeBenchSettings) -> tuple[list[dict], dict]:
        """The shard's rows in the window, and its provenance record; ValueError naming the file and line."""
        path = folder / shard
        if not path.is_file():
            raise FileNotFoundError(f"{self.name}: {path} does not exist; benchmarks.{self.name}.data must be a folder "
                                    f"holding the {settings.release} shards {list(RELEASES[settings.release])}")
        start, end = _day(settings.start_date), _day(settings.end_date)
        digest, selected, total = hashlib.sha256(), [], 0
        with path.open("rb") as handle:
            for lineno, line in enumerate(handle, start=1):
                digest.update(line)
                if not line.strip():
                    continue
                total += 1
                row, when = _row(line, f"{path}:{lineno}")
                if (start is None or start <= when) and (end is None or when <= end):
                    selected.append(row)
        sha = digest.hexdigest()
        return selected, {"file": shard, "sha256": sha, "matches_revision": sha == SHARD_SHA256[shard],
                          "rows": total, "selected": len(selected)}

    def _check_tests(self, problems: list[dict], max_tests_bytes: int) -> dict[str, int]:
        """Decode (never unpickle) and check every problem's tests; count stdin and functional problems."""
        from sbd_core.sandbox.lcb_tests import LcbDataError, load_tests

        kinds = {"stdin": 0, "functional": 0}
        for problem in problems:
            try:
                kinds["functional" if load_tests(problem, max_tests_bytes).functional else "stdin"] += 1
            except LcbDataError as err:
                raise ValueError(f"{self.name}: question_id {problem['question_id']}: {err}") from None
        return kinds

    @staticmethod
    def _window_text(settings: LiveCodeBenchSettings, problems: list[dict]) -> str:
        """The release, the date bounds when set, and the contest days the problems span."""
        days = sorted(p["contest_date"][:10] for p in problems)
        bounds = f", from {settings.start_date or 'the start'} to {settings.end_date or 'the end'}" \
            if settings.start_date or settings.end_date else ""
        return f"{settings.release}{bounds}: contest dates {days[0]} to {days[-1]}"

    def _prepare(self, problem: dict) -> dict:
        return {**problem, ID_KEY: str(problem["question_id"])}

    # ------------------------------------------------------------------------------------------ prompt, score
    def messages(self, problem: dict, settings: LiveCodeBenchSettings) -> list[dict]:
        """lcb_runner's chat messages: ``[system_prompt, lcb system message + question]``, or without a system
        prompt ``[lcb system message, question]`` (see the module doc)."""
        if settings.system_prompt:
            return chat_messages(SYSTEM_MESSAGE + "\n\n" + question_prompt(problem), settings.system_prompt)
        return chat_messages(question_prompt(problem), SYSTEM_MESSAGE)

    def prompt(self, problem: dict, tokenizer, settings: LiveCodeBenchSettings) -> str:
        """The chat messages in the checkpoint's chat template."""
        return render_chat(tokenizer, self.messages(problem, settings))

    def score(self, problems: list[dict], completions: Mapping[str, list[str]], work_dir,
              settings: LiveCodeBenchSettings) -> dict:
        """pass@k (lcb_runner's estimator; pass@1 the accuracy) of every sample from
        :func:`~sbd_core.sandbox.lcb_grader.evaluate_lcb`, over the test file and the paper windows, per
        difficulty, platform and problem kind (:mod:`.lcb_results`); lcb_runner's ``eval_all.json`` as a sidecar."""
        from sbd_core.sandbox.lcb_grader import evaluate_lcb

        self.check_completions(problems, completions)
        outputs = {p[ID_KEY]: [completions[p[ID_KEY]]] if isinstance(completions[p[ID_KEY]], str)
                   else list(completions[p[ID_KEY]]) for p in problems}
        programs = {qid: [extract_code(text) for text in texts] for qid, texts in outputs.items()}
        single = all(len(texts) == 1 for texts in outputs.values())
        runs = [(p, j, p[ID_KEY] if single else f"{p[ID_KEY]}#{j}") for p in problems
                for j in range(len(outputs[p[ID_KEY]]))]  # one graded run per sample
        result = evaluate_lcb([{**p, "question_id": run} for p, _, run in runs],
                              {run: programs[p[ID_KEY]][j] for p, j, run in runs}, Path(work_dir),
                              test_timeout_s=settings.test_timeout_s, max_tests_bytes=settings.max_tests_bytes,
                              parallel=settings.parallel, max_memory_bytes=settings.max_memory_bytes,
                              timeout_s=settings.timeout_s)
        verdicts = {qid: [] for qid in outputs}
        for p, j, run in runs:
            verdicts[p[ID_KEY]].append({**result["per_problem"][run], "program": programs[p[ID_KEY]][j]})
        graded = {qid: [v["passed"] for v in samples] for qid, samples in verdicts.items()}
        ks = [k for k in lcb_results.K_LIST if k <= min(map(len, graded.values()))]
        windows = lcb_results.window_rates(problems, graded, _window_label(settings), ks)
        metrics = {**lcb_results.flat_metrics(windows, ks), **_kind_rates(problems, graded),
                   "network_isolated": result["network_isolated"], "filesystem_readonly": result["filesystem_readonly"]}
        per_problem = {qid: samples[0] if single else {"pass@1": lcb_results.pass_at_k(len(graded[qid]),
                                                                                       sum(graded[qid]), 1),
                                                       "graded_list": graded[qid], "samples": samples}
                       for qid, samples in verdicts.items()}
        return {"accuracy": metrics["pass@1"], "metrics": metrics, "n": len(problems), "statuses": result["statuses"],
                "per_problem": per_problem,
                "lcb": {"samples_per_problem": sorted({len(g) for g in graded.values()}), "k": ks, "windows": windows,
                        "extraction": extraction_effect(outputs, programs)},
                "sidecars": {"eval_all.json": lcb_results.eval_all_records(problems, outputs, verdicts)}}


def _row(line: bytes, where: str) -> tuple[dict, date]:
    """One shard line as a row in the dataset's schema, and its contest date; ValueError naming ``where``."""
    try:
        row = json.loads(line)
    except ValueError as err:
        raise ValueError(f"{where}: not a JSON line ({err})") from None
    missing = [k for k in FIELDS if not isinstance(row, dict) or k not in row]
    if missing:
        raise ValueError(f"{where}: lacks field(s) {missing} of {REPO}'s schema")
    try:
        return row, _day(row["contest_date"])
    except (TypeError, ValueError):
        raise ValueError(f"{where}: contest_date {row['contest_date']!r} is not an ISO date") from None


def _window_label(settings: LiveCodeBenchSettings) -> str:
    """The release and, when set, the date bounds the test file was selected with."""
    if not settings.start_date and not settings.end_date:
        return settings.release
    return f"{settings.release} {settings.start_date or ''}..{settings.end_date or ''}"


def _kind_rates(problems: list[dict], graded: Mapping[str, list[bool]]) -> dict[str, float]:
    """pass@1 of the stdin and of the functional problems (those whose metadata names a ``func_name``)."""
    groups: dict[str, list[float]] = {}
    for p in problems:
        kind = "functional" if json.loads(p["metadata"]).get("func_name") is not None else "stdin"
        groups.setdefault(kind, []).append(sum(graded[p[ID_KEY]]) / len(graded[p[ID_KEY]]))
    return {f"pass@1_{kind}": sum(rates) / len(rates) for kind, rates in sorted(groups.items())}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


BENCHMARK = LiveCodeBench(
    name="lcbv6", paper_column="lcbv6", group="reasoning", required_fields=FIELDS,
    source={"dataset": REPO, "revision": REVISION, "files": list(SHARDS)},
    stops=tuple(task_config("sbd_math500")["generation_kwargs"]["until"]),  # the reasoning benchmarks' stops
    defaults=LiveCodeBenchSettings(max_new_tokens=32768, system_prompt=THINKING_ON, release="release_v6",
                                   timeout_s=limits.LCB_TIMEOUT_S))
