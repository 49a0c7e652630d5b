"""Training data: records in each hub data set's own schema -> chat-formatted documents with response-only targets ->
packed rows with document ids; no cross-document attention, positions restart, nothing lost or duplicated, the token
budget and the proportions honoured."""

from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from conftest import char_tokenizer
from sbd_core.chat import THINKING_OFF, THINKING_ON
from sbd_core.hub import require_pinned
from sbd_core.masking import build_batch, dense_mask
from sbd_core.train import pad_rows
from sbd_core.training_data import MixSpec, build, load_packed, select_documents

EOS = "<|end_of_text|>"

# a few records per source, with the data sets' real field names (and their extra fields)
RECORDS = {
    "openmathreasoning": ("data/cot-00000-of-00001.parquet", [
        {"expected_answer": str(n * n), "problem_type": "has_answer_extracted", "problem_source": "aops_c4",
         "generation_model": "DeepSeek-R1", "pass_rate_72b_tir": "0.5", "problem": f"Compute {n}^2.",
         "generated_solution": f"<think>\n{n} times {n}.\n</think>\nThe answer is \\boxed{{{n * n}}}.",
         "inference_mode": "cot", "used_in_kaggle": False} for n in range(2, 14)]),
    "opencodereasoning": ("split_0/train-00000-of-00001.parquet", [
        {"id": f"id{n}", "input": f"Print {n} + 1.", "output": f"<think>\nAdd one.\n</think>\n```python\nprint({n} + 1)\n```",
         "source": "codeforces", "license": "cc-by-4.0", "dataset": "code_contests", "split": "train",
         "difficulty": "EASY", "solution": f"print({n} + 1)"} for n in range(9)]),
    "tulu3": ("data/train-00000-of-00001.parquet", [
        {"id": f"t{n}", "source": "ai2-adapt-dev/oasst1_converted",
         "messages": [{"role": "user", "content": f"Say hi {n} times."}, {"role": "assistant", "content": "hi " * n},
                      {"role": "user", "content": "Thanks!"}, {"role": "assistant", "content": "You are welcome."}]}
        for n in (1, 2, 3, 4, 5, 6, 150)]),  # the last one is longer than a row
    "gsm8k": ("main/train-00000-of-00001.parquet", [
        {"question": f"Tom has {n} apples and buys {n} more. How many?",
         "answer": f"He has {n}+{n}=<<{n}+{n}={2 * n}>>{2 * n} apples.\n#### {2 * n}"} for n in range(1, 16)]),
}


@pytest.fixture(scope="module")
def raw_dir(tmp_path_factory):
    """The sources as the download step leaves them: raw_dir/<name>/<the hub's file layout>."""
    root = tmp_path_factory.mktemp("raw")
    for name, (path, records) in RECORDS.items():
        (root / name / path).parent.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(records), root / name / path)
    return root


def mix(budget=None, weights=None, max_length=400, **extra):
    weights = weights or {name: 1 for name in RECORDS}
    return MixSpec.from_dict({"sources": [{"name": n, "weight": w} for n, w in weights.items()],
                              "max_length": max_length, "budget_tokens": budget, **extra})


def documents(rows):
    """Every packed document as (ids, target) tuples."""
    out = []
    for row in rows:
        start = 0
        for length in row["doc_lengths"]:
            out.append((tuple(row["input_ids"][start:start + length]), tuple(row["target"][start:start + length])))
            start += length
    return out


@pytest.fixture(scope="module")
def built_once(raw_dir, tmp_path_factory):
    tok = char_tokenizer()
    out = tmp_path_factory.mktemp("mix") / "data"
    manifest = build(mix(), tok, raw_dir, out)
    rows, _ = load_packed(out, tok, 400)
    return tok, manifest, rows


def test_records_become_chats_with_response_only_targets(built_once):
    tok, manifest, rows = built_once
    texts = {}
    for ids, target in documents(rows):
        text = tok.decode(list(ids))
        response = tok.decode([i for i, t in zip(ids, target) if t])
        texts[text] = response
    math = next(t for t in texts if "Compute 5^2." in t)
    assert math.startswith("<|begin_of_text|><|system|>\n" + THINKING_ON + "\n<|user|>\nCompute 5^2.\n<|assistant|>\n")
    assert texts[math] == "<think>\n5 times 5.\n</think>\nThe answer is \\boxed{25}." + EOS + "\n"
    code = next(t for t in texts if "Print 3 + 1." in t)
    assert THINKING_ON in code and texts[code].endswith("print(3 + 1)\n```" + EOS + "\n")
    chat = next(t for t in texts if "Say hi 2 times." in t)  # two assistant turns, both targets, user turns not
    assert THINKING_OFF in chat and texts[chat] == "hi hi " + EOS + "\n" + "You are welcome." + EOS + "\n"
    grade = next(t for t in texts if "Tom has 4 apples" in t)
    assert THINKING_OFF in grade and texts[grade] == "He has 4+4=8 apples.\n#### 8" + EOS + "\n"  # no <<4+4=8>>


def test_packing_keeps_every_document_once_within_rows(built_once):
    tok, manifest, rows = built_once
    docs = documents(rows)
    available = sum(len(records) for _, records in RECORDS.values())
    dropped = sum(info["dropped_overlong"] for info in manifest["sources"].values())
    assert dropped == 1  # the long chat does not fit in a row: dropped and counted, never cut
    assert len(docs) == len(set(docs)) == available - dropped  # nothing lost or duplicated
    assert all(sum(r["doc_lengths"]) == len(r["input_ids"]) <= 400 for r in rows)
    assert manifest["tokens"] == sum(len(ids) for ids, _ in docs)
    assert len(rows) < len(docs) and manifest["fill"] > 0.8  # packed, not one document per row


def test_packed_documents_never_see_each_other(built_once):
    tok, _, rows = built_once
    row = next(r for r in rows if len(r["doc_lengths"]) >= 3)
    inputs = pad_rows([row], pad_token_id=2)
    batch = build_batch(inputs["sequence"], "sbd", 3, 7, doc_ids=inputs["doc_ids"],
                        generator=torch.Generator().manual_seed(0))
    allowed = dense_mask(batch)[0, 0]
    docs = torch.cat([batch.doc_ids[0], batch.doc_ids[0]])
    other = docs[:, None] != docs[None, :]
    assert not bool((allowed & other).any())
    starts = np.cumsum([0, *row["doc_lengths"][:-1]])
    assert all(int(batch.position_ids[0, s]) == 0 for s in starts)  # positions restart at every document
    assert int(batch.position_ids[0, starts[1] + 4]) == 4


def test_budget_and_proportions_are_honoured(raw_dir, tmp_path):
    tok = char_tokenizer()
    weights = {"openmathreasoning": 3, "gsm8k": 1}
    manifest = build(mix(budget=8000, weights=weights), tok, raw_dir, tmp_path / "data")
    rows, _ = load_packed(tmp_path / "data")
    longest = 150  # every selected document is shorter
    for name, share in (("openmathreasoning", 6000), ("gsm8k", 2000)):
        info = manifest["sources"][name]
        assert info["share_tokens"] == share
        assert share <= info["selected_tokens"] < share + longest
    assert manifest["sources"]["gsm8k"]["passes"] > 1  # 15 problems are too few for 2000 tokens: reshuffled passes
    counts = Counter(documents(rows))
    assert sum(counts.values()) == sum(i["selected_documents"] for i in manifest["sources"].values())
    assert max(counts.values()) >= 2


def test_select_documents_orders_passes_and_reaches_the_share():
    lengths = np.array([5, 7, 11, 13])
    picked = select_documents(lengths, 60, seed=1)
    assert sorted(picked[:4].tolist()) == [0, 1, 2, 3] and lengths[picked].sum() >= 60
    assert lengths[picked[:-1]].sum() < 60
    assert select_documents(lengths, None, seed=1).tolist() == [0, 1, 2, 3]


def test_bad_settings_are_named(raw_dir, tmp_path, built_once):
    with pytest.raises(ValueError, match="unknown training data source 'omr'"):
        MixSpec.from_dict({"sources": [{"name": "omr"}], "max_length": 64})
    with pytest.raises(ValueError, match=r"unknown training-data setting\(s\) \['budget'\]"):
        MixSpec.from_dict({"sources": [{"name": "gsm8k"}], "max_length": 64, "budget": 5})
    with pytest.raises(ValueError, match="needs a weight"):
        MixSpec.from_dict({"sources": [{"name": "gsm8k"}], "max_length": 64, "budget_tokens": 100})
    with pytest.raises(FileNotFoundError, match="run the training-data download step first"):
        build(mix(), char_tokenizer(), tmp_path / "nothing", tmp_path / "out")
    with pytest.raises(ValueError, match="pin a revision"):
        require_pinned("openai/gsm8k", "main")
    out = tmp_path / "again"
    build(mix(weights={"gsm8k": 1}), char_tokenizer(), raw_dir, out)
    with pytest.raises(ValueError, match="finetune.max_length"):
        load_packed(out, max_length=128)
