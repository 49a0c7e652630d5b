"""A user's mistake through ``python -m sbd_core <stage>``: exit status 1 (2 for the command line), ONE line
``error: ...`` on stderr naming the bad input, no traceback, nothing written at the output path.

The table runs ``sbd_core.cli.main([...])`` in-process on tiny inputs; one case goes through ``python -m sbd_core`` to
show the top level (and ``SBD_DEBUG=1`` bringing the traceback back).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import char_tokenizer, tiny_model
from sbd_core import checkpoint, cli, pipeline
from sbd_core.errors import UserError
from sbd_core.io_utils import read_jsonl
from sbd_core.mask_token import setup_mask_token

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = {"limit": 3, "max_new_tokens": 4}


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """Valid inputs of every stage, each case breaks one: a tiny SBD checkpoint, the math test file (3 problems),
    generations answering it, the data stage's folder and a score file."""
    root = tmp_path_factory.mktemp("good")
    tok = char_tokenizer()
    model = tiny_model("llama", len(tok))
    setup_mask_token(tok, model)
    test_file = pipeline.run_benchmark("math", SETTINGS, root / "bench")
    problems = read_jsonl(test_file)
    generations = root / "gens.jsonl"
    generations.write_text("".join(json.dumps({"id": p["sbd_id"], "completion": f"#### {p['answer']}"}) + "\n"
                                   for p in problems))
    score = {"model": "m", "objective": "ntp", "sampler": "ntp", "benchmark": "math", "accuracy": 1.0,
             "n_problems": 3, "total_nfe": 12, "total_tokens": 12, "mean_nfe": 4.0, "tokens_per_forward": 1.0,
             "sampler_spec": {"mode": "ntp", "solver": "ntp", "params": {}, "family": "ntp", "tag": "ntp"}}
    score_file = root / "score.json"
    score_file.write_text(json.dumps(score))
    pipeline.run_data({"sources": [{"name": "math", "problems": 8}]}, root / "data")
    plain = char_tokenizer(specials=["<s>", "</s>", "<pad>"])  # no mask or reserved token, no spare embedding row
    return {"model": checkpoint.save(model, tok, root / "model"), "test": test_file, "gens": generations,
            "score": score_file, "data": root / "data", "problems": problems,
            "no_mask_room": checkpoint.save(tiny_model("llama", len(plain)), plain, root / "no_mask_room")}


def copy(path: Path, bad: Path) -> Path:
    (shutil.copytree if path.is_dir() else shutil.copy)(path, bad)
    return bad


def truncated_weights(good, bad):
    model = copy(good["model"], bad / "model")
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    return model


def without_mask_token(good, bad):
    model = copy(good["model"], bad / "model")
    config = json.loads((model / "config.json").read_text())
    del config["sbd_mask_token_id"]
    (model / "config.json").write_text(json.dumps(config))
    return model


def corrupt_tokenizer(good, bad):
    model = copy(good["model"], bad / "model")
    (model / "tokenizer.json").write_text('{"version": "1.0", "trunc')
    return model


def text_file(bad, name, content):
    path = bad / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def gens_lines(good, first: int | None = None) -> list[bytes]:
    return good["gens"].read_bytes().splitlines(keepends=True)[:first]


def non_utf8(good, bad, name):
    """Line 2 of a good file with a Latin-1 byte in it."""
    lines = good[name].read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b"####", b"\xff####", 1) if name == "gens" else lines[1].replace(b'"', b'"\xff', 1)
    return text_file(bad, f"{name}.jsonl", b"".join(lines))


def decode(good, out, model=None, test=None, sampler='{"solver": "ntp"}', decode_spec="{}", settings=None,
           runtime="{}", benchmark="math"):
    return ["decode", "--model", str(model or good["model"]), "--benchmark", benchmark,
            "--settings", settings or json.dumps(SETTINGS), "--test-file", str(test or good["test"]),
            "--sampler-spec", sampler, "--decode-spec", decode_spec, "--runtime", runtime,
            "--out", str(out / "g.jsonl")]


def score(good, out, gens=None, data=None, settings=None, benchmark="math"):
    argv = ["score", "--benchmark", benchmark, "--generations", str(gens or good["gens"]),
            "--data", str(data or good["test"]), "--out", str(out / "s.json")]
    return argv + (["--settings", settings] if settings else [])


def finetune(good, out, base=None, data=None, objective="sbd", spec='{"max_steps": 1, "max_length": 64}',
             runtime='{"device": "cpu"}', nodes="1"):
    return ["finetune", "--base", str(base or good["model"]), "--data", str(data or good["data"]),
            "--objective", objective, "--spec", spec, "--runtime", runtime, "--nodes", nodes,
            "--out", str(out / "model"), "--checkpoints", str(out / "checkpoints")]


def pack(good, out, base=None, data=None, spec='{"sources": [{"name": "math", "problems": 8}], "max_length": 64}'):
    return ["pack", "--spec", spec, "--base", str(base or good["model"]), "--data", str(data or good["data"]),
            "--out", str(out / "packed")]


def data(out, spec):
    return ["data", "--spec", spec, "--out", str(out / "data")]


def report(good, out, *scores, paper_table=None, paper_bases=None, stats=None):
    argv = ["report", "--scores", *map(str, scores or [good["score"]]), "--out", str(out / "report")]
    argv += ["--paper-table", str(paper_table)] if paper_table else []
    argv += ["--stats", stats] if stats else []
    return argv + (["--paper-bases", paper_bases] if paper_bases else [])


def score_file(good, bad, name, change):
    content = json.loads(good["score"].read_text())
    change(content)
    return text_file(bad, name, json.dumps(content))


def missing_first(good, bad):
    return text_file(bad, "gens.jsonl", b"".join(gens_lines(good)[1:]))


def corrupt_data(good, bad):
    folder = copy(good["data"], bad / "data")
    train = folder / "math" / "train.jsonl"
    lines = train.read_text().splitlines(keepends=True)
    train.write_text("".join(lines[:2] + ['{"prompt": "1+1", "target": \n'] + lines[2:]))
    return folder


def duplicated(good, bad):
    lines = good["test"].read_text().splitlines(keepends=True)
    return text_file(bad, "t.jsonl", "".join(lines + lines[:1]))


def truncated_gzip(good, bad):
    data = gzip.compress(good["test"].read_bytes())
    return text_file(bad, "test.jsonl.gz", data[: len(data) // 2])


# id: (argv from (good inputs, folder for bad inputs, output folder), exit status, words the one line must contain;
# "{bad}" stands for the folder of the bad inputs)
CASES = {
    # ---------------------------------------------------------------------------------------------------- data
    "data/spec-not-json": (lambda g, b, o: data(o, "{sources: [math]}"), 2, ["--spec", "not valid JSON"]),
    "data/spec-a-list": (lambda g, b, o: data(o, "[1, 2]"), 2, ["--spec", "expected a JSON object", "list"]),
    "data/spec-file-missing": (lambda g, b, o: data(o, f"@{b}/spec.json"), 2, ["--spec", "{bad}/spec.json"]),
    "data/unknown-source": (lambda g, b, o: data(o, '{"sources": [{"name": "maths", "problems": 4}]}'), 1,
                            ["'maths'", "known: ["]),
    "data/generated-source-without-problems": (lambda g, b, o: data(o, '{"sources": [{"name": "math"}]}'), 1,
                                               ["'math'", "problems"]),
    "data/unknown-source-key": (lambda g, b, o: data(o, '{"sources": [{"name": "math", "problems": 4, "n": 1}]}'),
                                1, ["['n']", "allowed"]),
    "data/sources-wrong-type": (lambda g, b, o: data(o, '{"sources": "math"}'), 1, ["data.sources", "list"]),
    "data/duplicate-source": (lambda g, b, o: data(o, '{"sources": [{"name": "math", "problems": 4}, '
                                                      '{"name": "math", "problems": 5}]}'), 1, ["once each"]),
    # ---------------------------------------------------------------------------------------------------- pack
    "pack/missing-base-folder": (lambda g, b, o: pack(g, o, base=b / "nope"), 1, ["{bad}/nope", "checkpoint folder"]),
    "pack/corrupt-tokenizer": (lambda g, b, o: pack(g, o, base=corrupt_tokenizer(g, b)), 1,
                               ["{bad}/model", "tokenizer does not load"]),
    "pack/missing-data-folder": (lambda g, b, o: pack(g, o, data=b / "nope"), 1, ["{bad}/nope", "data stage"]),
    "pack/empty-data-folder": (lambda g, b, o: pack(g, o, data=b), 1, ["no data files", "'math'", "{bad}/math"]),
    "pack/corrupt-data-file": (lambda g, b, o: pack(g, o, data=corrupt_data(g, b)), 1,
                               ["{bad}/data/math/train.jsonl:3", "invalid JSON"]),
    "pack/documents-longer-than-max-length": (lambda g, b, o: pack(g, o, spec='{"sources": [{"name": "math", '
                                                                           '"problems": 8}], "max_length": 8}'), 1,
                                              ["'math'", "none of its 8 documents fits in max_length=8"]),
    "pack/no-max-length": (lambda g, b, o: pack(g, o, spec='{"sources": [{"name": "math", "problems": 8}]}'), 1,
                           ["max_length"]),
    # ---------------------------------------------------------------------------------------------------- finetune
    "finetune/unknown-objective": (lambda g, b, o: finetune(g, o, objective="sdb"), 1, ["objective", "'sdb'"]),
    "finetune/unknown-key": (lambda g, b, o: finetune(g, o, spec='{"lr": 0.1}'), 1, ["['lr']", "allowed"]),
    "finetune/wrong-type": (lambda g, b, o: finetune(g, o, spec='{"max_steps": "ten"}'), 1,
                            ["finetune.max_steps", "integer", "'ten'"]),
    "finetune/truncated-safetensors": (lambda g, b, o: finetune(g, o, base=truncated_weights(g, b)), 1,
                                       ["{bad}/model/model.safetensors", "not a complete safetensors file"]),
    "finetune/data-not-packed": (lambda g, b, o: finetune(g, o), 1, ["no built training mix", "pack stage"]),
    "finetune/no-room-for-a-mask-token": (lambda g, b, o: finetune(g, o, base=g["no_mask_room"]), 1,
                                          ["no_mask_room", "fill all", "allow_resize"]),
    "finetune/tokens-per-step-not-a-multiple": (lambda g, b, o: finetune(g, o, spec='{"max_length": 64, '
                                                                                    '"tokens_per_step": 100}'), 1,
                                                ["tokens_per_step=100", "multiple of batch_size x max_length"]),
    "finetune/bad-runtime": (lambda g, b, o: finetune(g, o, runtime='{"device": "tpu"}'), 1, ["runtime.device", "tpu"]),
    "finetune/zero-nodes": (lambda g, b, o: finetune(g, o, nodes="0"), 1, ["nodes", "0"]),
    # ---------------------------------------------------------------------------------------------------- decode
    "decode/unknown-decode-key": (lambda g, b, o: decode(g, o, decode_spec='{"blok_size": 8}'), 1,
                                  ["decode spec", "['blok_size']", "allowed: ['batch_size', 'block_size'"]),
    "decode/decode-value-wrong-type": (lambda g, b, o: decode(g, o, decode_spec='{"block_size": "8"}'), 1,
                                       ["decode spec", "block_size", "'8'"]),
    "decode/unknown-solver": (lambda g, b, o: decode(g, o, sampler='{"solver": "ebb"}'), 1,
                              ["sampler spec", "'ebb'"]),
    "decode/solver-param-out-of-range": (lambda g, b, o: decode(g, o, sampler='{"solver": "eb", "gamma": -1}'), 1,
                                         ["sampler spec", "gamma"]),
    "decode/unknown-benchmark-setting": (lambda g, b, o: decode(g, o, settings='{"limt": 3}'), 1,
                                         ["benchmarks.math", "['limt']"]),
    "decode/unknown-benchmark": (lambda g, b, o: decode(g, o, benchmark="gsm9k"), 1, ["'gsm9k'", "registered"]),
    "decode/bad-runtime": (lambda g, b, o: decode(g, o, runtime='{"dtype": "int8"}'), 1, ["runtime.dtype", "int8"]),
    "decode/missing-model": (lambda g, b, o: decode(g, o, model=b / "nope"), 1, ["{bad}/nope", "checkpoint folder"]),
    "decode/truncated-safetensors": (lambda g, b, o: decode(g, o, model=truncated_weights(g, b)), 1,
                                     ["{bad}/model/model.safetensors", "not a complete safetensors file"]),
    "decode/model-without-mask-token": (lambda g, b, o: decode(g, o, model=without_mask_token(g, b),
                                                               sampler='{"solver": "topk", "n": 2}'), 1,
                                        ["{bad}/model", "sbd_mask_token_id"]),
    "decode/test-file-not-utf8": (lambda g, b, o: decode(g, o, test=non_utf8(g, b, "test")), 1,
                                  ["{bad}/test.jsonl:2", "0xff", "not UTF-8"]),
    "decode/empty-test-file": (lambda g, b, o: decode(g, o, test=text_file(b, "t.jsonl", "\n")), 1,
                               ["{bad}/t.jsonl", "no problems"]),
    "decode/duplicate-ids": (lambda g, b, o: decode(g, o, test=duplicated(g, b)), 1,
                             ["{bad}/t.jsonl", "repeats (rows 1 and 4)"]),
    # ---------------------------------------------------------------------------------------------------- score
    "score/generations-not-utf8": (lambda g, b, o: score(g, o, gens=non_utf8(g, b, "gens")), 1,
                                   ["{bad}/gens.jsonl:2", "byte 0xff at column", "not UTF-8"]),
    "score/generations-bad-json": (lambda g, b, o: score(g, o, gens=text_file(b, "gens.jsonl", b"".join(
        gens_lines(g, 2)) + b'{"id": "x", "completion": \n')), 1, ["{bad}/gens.jsonl:3", "invalid JSON"]),
    "score/generations-missing-a-problem": (lambda g, b, o: score(g, o, gens=missing_first(g, b)), 1,
                                            ["{bad}/gens.jsonl", "1 of 3 problems have no completion"]),
    "score/record-without-completion": (lambda g, b, o: score(g, o, gens=text_file(b, "gens.jsonl",
                                                                                     '{"id": "0", "text": "5"}\n')),
                                        1, ["{bad}/gens.jsonl:1", "'completion'"]),
    "score/empty-generations": (lambda g, b, o: score(g, o, gens=text_file(b, "gens.jsonl", "")), 1,
                                ["{bad}/gens.jsonl", "no generations"]),
    "score/duplicate-id": (lambda g, b, o: score(g, o, gens=text_file(b, "gens.jsonl", b"".join(gens_lines(g)) + (
        gens_lines(g, 1)[0].replace(b"####", b"#### 1")))), 1, ["{bad}/gens.jsonl:4", "repeats (lines 1 and 4)"]),
    "score/duplicate-line": (lambda g, b, o: score(g, o, gens=text_file(b, "gens.jsonl", b"".join(
        gens_lines(g) + gens_lines(g, 1)))), 1, ["{bad}/gens.jsonl:4", "repeats (lines 1 and 4)"]),
    "score/several-samples-for-math": (lambda g, b, o: score(g, o, gens=text_file(b, "gens.jsonl", json.dumps(
        {"id": g["problems"][0]["sbd_id"], "completions": ["#### 1", "#### 2"]}) + "\n")), 1,
        ["{bad}/gens.jsonl:1", "'completions' (several samples)", "one 'completion' per problem"]),
    "score/missing-data-file": (lambda g, b, o: score(g, o, data=b / "test.jsonl"), 1, ["{bad}/test.jsonl"]),
    "score/truncated-gzip-data": (lambda g, b, o: score(g, o, data=truncated_gzip(g, b)), 1,
                                  ["{bad}/test.jsonl.gz", "not a complete gzip file"]),
    "score/limit-would-cut-the-test-file": (lambda g, b, o: score(g, o, settings='{"limit": 2}'), 1,
                                            ["math_test.jsonl", "limit 2 would cut it"]),
    # ---------------------------------------------------------------------------------------------------- report
    "report/missing-score-file": (lambda g, b, o: report(g, o, b / "s.json"), 1, ["{bad}/s.json", "not found"]),
    "report/corrupt-score-file": (lambda g, b, o: report(g, o, text_file(b, "s.json", '{"model": ')), 1,
                                  ["{bad}/s.json", "cannot parse JSON"]),
    "report/score-file-without-keys": (lambda g, b, o: report(g, o, score_file(g, b, "s.json",
                                                                               lambda s: s.pop("total_nfe"))), 1,
                                       ["{bad}/s.json", "missing required key(s) ['total_nfe']"]),
    "report/accuracy-out-of-range": (lambda g, b, o: report(g, o, score_file(g, b, "s.json",
                                                                             lambda s: s.update(accuracy=93.5))), 1,
                                     ["{bad}/s.json", "accuracy", "93.5"]),
    "report/duplicate-runs": (lambda g, b, o: report(g, o, g["score"], copy(g["score"], b / "again.json")), 1,
                              ["duplicate (model, objective, train_seed, train_steps, sampler, benchmark)", "{bad}/again.json"]),
    "report/paper-table-without-columns": (lambda g, b, o: report(g, o, paper_table=text_file(b, "t.csv", "a\n1\n")),
                                           1, ["{bad}/t.csv", "missing column(s)"]),
    "report/paper-base-not-in-the-table": (lambda g, b, o: report(g, o, paper_bases='{"m": "Llama-3.1 70B"}'), 1,
                                           ["'Llama-3.1 70B'", "no base model of the paper table", "'Qwen-3 8B'"]),
    "report/paper-bases-not-an-object": (lambda g, b, o: report(g, o, paper_bases='"Llama-3.1 8B"'), 2,
                                         ["--paper-bases", "expected a JSON object"]),
    "report/unknown-stats-key": (lambda g, b, o: report(g, o, stats='{"margin": 2}'), 1,
                                 ["unknown key(s) ['margin'] in report.stats", "margin_pts"]),
    "report/margin-out-of-range": (lambda g, b, o: report(g, o, stats='{"margin_pts": 0}'), 1,
                                   ["report.stats.margin_pts", "(0, 100)", "0"]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_bad_input_gets_one_error_line(good, tmp_path, capsys, name):
    argv_of, status, words = CASES[name]
    bad, out = tmp_path / "bad", tmp_path / "out"  # every output path of a case lies in out/
    bad.mkdir()
    out.mkdir()
    argv = argv_of(good, bad, out)
    capsys.readouterr()
    assert cli.main(argv) == status
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and len([line for line in lines if line.startswith("error: ")]) == 1, err
    message = lines[-1]
    assert message.startswith("error: "), err
    for word in words:
        assert word.replace("{bad}", str(bad)) in message, (word, message)
    assert list(out.iterdir()) == []  # nothing written: no output, no temporary file or folder beside it


def test_the_table_covers_every_stage_with_enough_cases():
    stages = {name.split("/")[0] for name in CASES}
    assert {"data", "pack", "finetune", "decode", "score", "report"} <= stages and len(CASES) >= 15


def test_a_bug_keeps_its_traceback(good, tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise KeyError("an internal bug")

    monkeypatch.setattr(pipeline, "run_score", broken)
    with pytest.raises(KeyError, match="an internal bug"):
        cli.main(score(good, tmp_path))


def test_debug_shows_the_traceback_of_a_user_error(good, tmp_path, monkeypatch):
    argv = score(good, tmp_path, gens=tmp_path / "missing.jsonl")
    with pytest.raises(FileNotFoundError):
        cli.main(["--debug", *argv])
    with pytest.raises(FileNotFoundError):
        cli.main([*argv, "--debug"])
    monkeypatch.setenv("SBD_DEBUG", "1")
    with pytest.raises(UserError, match="--settings"):
        cli.main([*argv, "--settings", "[]"])


def test_python_m_sbd_core_prints_one_line_and_debug_the_traceback(good, tmp_path):
    """The top level once, as Snakemake's rules run it (their job log is this stderr)."""
    gens = non_utf8(good, tmp_path, "gens")
    argv = [sys.executable, "-m", "sbd_core", *score(good, tmp_path / "out", gens=gens)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("SBD_DEBUG", None)
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [f"error: {gens}:2: byte 0xff at column 33 is not UTF-8; expected UTF-8 text "
                                        "(one JSON object per line)"]
    debug = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env={**env, "SBD_DEBUG": "1"}, timeout=300)
    assert debug.returncode == 1 and "Traceback" in debug.stderr and "sbd_core.errors.UserError" in debug.stderr
    assert not (tmp_path / "out").exists()
