"""Test fixtures for the likelihood stage: word-level BPE tokenizers (Llama-3.1 style with a BOS, Qwen-3 style
without), tiny saved checkpoints over them, and small local copies of hub datasets in the hub's own repository layout
(a README whose ``configs`` name the data files, parquet files per config and split), as ``hf download <repo>
--repo-type dataset --local-dir DIR`` would leave them.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from conftest import tiny_model
from sbd_core.mask_token import setup_mask_token
from sbd_core.tokenizer import build_tokenizer

TEXTS = [
    "Question: Which gas do plants take in from the air?\nAnswer: carbon dioxide",
    "Question: What is the boiling point of water at sea level?\nAnswer: one hundred degrees",
    "The following are multiple choice questions (with answers) about science.",
    "A man is sitting on a roof. He starts pulling up roofing tiles and throws them down.",
    "Sarah was a much better surgeon than Maria so Maria always got the harder cases.",
] * 20

QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def llama_tokenizer() -> PreTrainedTokenizerFast:
    """The project's byte-level BPE (digits split, words merged with their leading space), adding a BOS like
    Llama-3.1's tokenizer."""
    return build_tokenizer(TEXTS, vocab_size=400)


def qwen_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level BPE without a BOS token, adding no special tokens, EOS and pad ``<|endoftext|>``: Qwen-3's setup."""
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, min_frequency=2, show_progress=False, special_tokens=QWEN_SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    core.train_from_iterator(TEXTS, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=core, eos_token=QWEN_SPECIALS[0], pad_token=QWEN_SPECIALS[0],
                                   clean_up_tokenization_spaces=False, model_max_length=4096)


def save_checkpoint(kind: str, path: Path, seed: int = 0) -> Path:
    """A random tiny ``kind`` model ("llama" or "qwen3") with its tokenizer and the SBD mask token, saved to ``path``
    (Qwen-3 style: spare embedding rows beyond the tokenizer)."""
    tok = llama_tokenizer() if kind == "llama" else qwen_tokenizer()
    model = tiny_model(kind, len(tok) + (8 if kind == "qwen3" else 0), seed=seed)
    setup_mask_token(tok, model)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


ARC_ROWS = [
    ("Which gas do plants take in from the air?", ["carbon dioxide", "oxygen", "nitrogen", "helium"], 0),
    ("What is the boiling point of water at sea level?", ["fifty degrees", "one hundred degrees", "zero", "ten"], 1),
    ("Which of these is a mammal?", ["a shark", "a frog", "a whale", "a crow"], 2),
    ("What does a thermometer measure?", ["mass", "length", "time", "temperature"], 3),
    ("Which planet is closest to the Sun?", ["Mercury", "Venus", "Earth", "Mars"], 0),
    ("What do bees make?", ["silk", "honey", "wax paper", "milk"], 1),
]


def write_hub_copy(root: Path, configs: dict[str, dict[str, list[dict]]]) -> Path:
    """A local copy of a hub dataset repository: ``README.md`` with one ``configs`` entry per config (its splits'
    files ``<config>/<split>-00000-of-00001.parquet``) and those parquet files. Returns ``root``."""
    import datasets

    entries = []
    for config, splits in configs.items():
        (root / config).mkdir(parents=True, exist_ok=True)
        for split, rows in splits.items():
            datasets.Dataset.from_list(rows).to_parquet(str(root / config / f"{split}-00000-of-00001.parquet"))
        entries.append({"config_name": config,
                        "data_files": [{"split": split, "path": f"{config}/{split}-*"} for split in splits]})
    (root / "README.md").write_text("---\n" + yaml.safe_dump({"configs": entries}, sort_keys=False) + "---\n")
    return root


def arc_rows(rows=ARC_ROWS) -> list[dict]:
    """``allenai/ai2_arc`` rows (``id, question, choices {text, label}, answerKey``)."""
    return [{"id": f"Test_{i}", "question": q, "choices": {"text": texts, "label": list("ABCD")},
             "answerKey": "ABCD"[gold]} for i, (q, texts, gold) in enumerate(rows)]


def write_arc_copy(root: Path, config: str = "ARC-Easy") -> Path:
    """A local copy of ``allenai/ai2_arc`` with one config holding the rows above in every split."""
    rows = arc_rows()
    return write_hub_copy(root, {config: {"train": rows, "validation": rows, "test": rows}})


def write_mmlu_copy(root: Path, subjects: list[str], n_test: int = 2) -> Path:
    """A local copy of ``cais/mmlu``: one config per subject with test, validation and dev (5 rows) splits of
    ``question, subject, choices, answer`` rows."""
    def rows(subject, n):
        return [{"question": f"Which letter names choice {i % 4} in {subject}?", "subject": subject,
                 "choices": ["alpha", "beta", "gamma", "delta"], "answer": i % 4} for i in range(n)]

    return write_hub_copy(root, {s: {"test": rows(s, n_test), "validation": rows(s, 1), "dev": rows(s, 5)}
                                 for s in subjects})


def write_gpqa_copy(root: Path, config: str = "gpqa_main", n: int = 6) -> Path:
    """A local copy of ``Idavidrein/gpqa``: ``<config>.csv`` (the columns lm-eval reads) named by the README's
    ``configs`` as the only (train) split, as on the hub."""
    import csv

    root.mkdir(parents=True, exist_ok=True)
    fields = ["Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3"]
    with open(root / f"{config}.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        for i in range(n):
            writer.writerow({"Question": f"How many apples are {i} apples and one more?",
                             "Correct Answer": f"{i + 1} apples", "Incorrect Answer 1": f"{i + 2} apples",
                             "Incorrect Answer 2": f"{i + 3} apples", "Incorrect Answer 3": f"{i} apples"})
    (root / "README.md").write_text("---\n" + yaml.safe_dump(
        {"configs": [{"config_name": config, "data_files": f"{config}.csv"}]}) + "---\n")
    return root


def hellaswag_rows(n: int = 3) -> list[dict]:
    """``Rowan/hellaswag`` rows (its fields; ``label`` is a string)."""
    return [{"ind": i, "activity_label": "Roof shingle removal", "ctx_a": "A man is sitting on a roof.",
             "ctx_b": "he", "ctx": "A man is sitting on a roof. he", "source_id": f"activitynet~v_{i}",
             "endings": ["is using wrap to wrap a pair of skis.", "is ripping level tiles off.",
                         "is holding a rubik's cube.", "starts pulling up roofing on a roof."],
             "split": "val", "split_type": "indomain", "label": str(i % 4)} for i in range(n)]


def winogrande_rows(n: int = 3) -> list[dict]:
    """``allenai/winogrande`` rows (``answer`` is "1" or "2")."""
    return [{"sentence": "Sarah was a much better surgeon than Maria so _ always got the harder cases.",
             "option1": "Sarah", "option2": "Maria", "answer": str(1 + i % 2)} for i in range(n)]
