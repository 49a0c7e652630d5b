"""The fine-tuning mix: fetch (login node), then tokenise, select by token budget, pack and cache (once per tokenizer).

Two steps, so the download can run where there is internet and the rest where the compute is:
1. :func:`fetch` downloads each hub source's pinned files into ``raw_dir/<name>/``, writes the synthetic tasks' training
   problems (``problems`` of them) to ``raw_dir/<name>/train.jsonl``, and checks that a source's local ``path`` (its
   files in the data set's own schema: an offline copy or a site mirror) holds data files, which are read in place.
2. :func:`build` reads those files (or the local override, in the data set's own schema), turns every record into a
   chat (system prompt by the source's kind), tokenises it with the base model's tokenizer and chat template
   (:func:`sbd_core.chat.tokenize_chat`: ids + a response mask; plain sources: ``bos + prompt + target + eos``),
   drops documents longer than a training row (counted in the manifest), picks documents per source in a seeded
   random order until the source's share of ``budget_tokens`` is reached (reshuffled passes when one is not enough;
   ``budget_tokens: null`` takes every document once), shuffles the mix and packs it into rows of ``max_length``
   tokens with TRL's best-fit-decreasing packer, which never splits a document (``packing: false``: one document per
   row, in the order read; the trainer pads each batch). Output: ``out_dir/packed`` (a ``datasets`` folder:
   ``input_ids``, ``target``, ``doc_lengths`` per row) and ``out_dir/manifest.json`` (sources, revisions, counts,
   tokens per source, passes, packing fill, chat template).

Training reads it with :func:`load_packed`; the trainer turns ``doc_lengths`` into document ids, so packed documents
never attend to each other and their positions restart at 0 (:mod:`sbd_core.masking`).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np

from ..chat import SYSTEM_PROMPTS, ensure_chat_template, tokenize_chat, with_system_prompt
from ..errors import UserError
from ..io_utils import atomic_dir, read_jsonl, write_json_atomic, write_jsonl_atomic
from .sources import get_source

MANIFEST = "manifest.json"
PACKED = "packed"
SOURCE_KEYS = {"name", "weight", "path", "revision", "problems"}


@dataclass
class MixSpec:
    """The training-data section of a config (see the module doc)."""

    sources: list[dict]  # [{"name", "weight", "path": <local file/glob/folder>, "revision", "problems"}, ...]
    max_length: int | None = None  # tokens per packed row (= the fine-tune's max_length); needed by build only
    budget_tokens: int | None = None  # total document tokens of the mix; None = every document once
    packing: bool = True  # several documents per row; false: one per row
    seed: int = 0
    chat_template: str = "auto"  # auto | default | a Jinja template
    system_prompts: dict = field(default_factory=lambda: dict(SYSTEM_PROMPTS))
    num_proc: int = 1  # tokenizer processes
    pack_batch: int = 10_000  # documents packed together (best fit within each batch)

    @classmethod
    def from_dict(cls, spec: dict) -> "MixSpec":
        """Build from a config section, naming any unknown key (UserError)."""
        unknown = sorted(set(spec) - {f.name for f in fields(cls)})
        if unknown:
            raise UserError(f"unknown training-data setting(s) {unknown}; allowed: {sorted(f.name for f in fields(cls))}")
        mix = cls(**spec)
        mix.validate()
        return mix

    def validate(self) -> None:
        """UserError naming the first setting that is wrong."""
        if not isinstance(self.sources, list) or not all(isinstance(e, dict) for e in self.sources):
            raise UserError(f"data.sources must be a list of sources, e.g. [{{name: math, problems: 100}}], "
                            f"got {self.sources!r}")
        if not self.sources:
            raise UserError("training data needs at least one source")
        for entry in self.sources:
            _check_source(entry, self.budget_tokens is not None)
        names = [entry["name"] for entry in self.sources]
        if len(set(names)) != len(names):
            raise UserError(f"training data sources must be listed once each, got {names}")
        for name in ("max_length", "budget_tokens", "seed", "num_proc", "pack_batch"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise UserError(f"data.{name} must be an integer, got {value!r}")
        if self.max_length is not None and self.max_length < 2:
            raise UserError(f"max_length must be >= 2, got {self.max_length}")
        if not isinstance(self.packing, bool):
            raise UserError(f"data.packing must be true or false, got {self.packing!r}")

    def has_chats(self) -> bool:
        """Whether any source is chat-formatted (then the tokenizer needs a chat template)."""
        return any(get_source(e["name"]).kind != "plain" for e in self.sources)

    def shares(self) -> dict[str, int | None]:
        """Each source's token share of the budget (weights normalised), or None without a budget."""
        if self.budget_tokens is None:
            return {e["name"]: None for e in self.sources}
        total = sum(e["weight"] for e in self.sources)
        return {e["name"]: int(round(self.budget_tokens * e["weight"] / total)) for e in self.sources}


def _check_source(entry: dict, budget: bool) -> None:
    """One ``sources`` entry: a known name, known keys, ``problems`` exactly for the generated sources."""
    source = get_source(entry.get("name"))
    unknown = sorted(set(entry) - SOURCE_KEYS)
    if unknown:
        raise UserError(f"source {source.name!r}: unknown key(s) {unknown}; allowed: {sorted(SOURCE_KEYS)}")
    weight = entry.get("weight", 0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        raise UserError(f"source {source.name!r}: weight must be a number, got {weight!r}")
    if budget and not weight > 0:
        raise UserError(f"source {source.name!r} needs a weight > 0 when budget_tokens is set")
    if source.generated:
        problems = entry.get("problems")
        if isinstance(problems, bool) or not isinstance(problems, int) or problems < 1:
            raise UserError(f"source {source.name!r} is generated here: give its number of training problems, e.g. "
                            f"{{name: {source.name}, problems: 1500}} (got problems={problems!r})")
        if entry.keys() & {"path", "revision"}:
            raise UserError(f"source {source.name!r} is generated here: it takes no path or revision")
    elif "problems" in entry:
        raise UserError(f"source {source.name!r} is a hub data set: 'problems' applies to the synthetic tasks only; "
                        "use weight and budget_tokens to size it")


# --------------------------------------------------------------------------------------------------------------- fetch
def fetch(mix: MixSpec, raw_dir) -> dict[str, list[str]]:
    """Bring every source to ``raw_dir/<name>``: download a hub source's pinned files (needs internet), generate a
    synthetic task's training problems, or check a local ``path`` (read in place by :func:`build`); return
    {name: its data files}."""
    from ..hub import snapshot

    done = {}
    for entry in mix.sources:
        source, folder = get_source(entry["name"]), Path(raw_dir) / entry["name"]
        if source.generated:
            _generate(source.name, entry["problems"], mix.seed, folder)
        elif not entry.get("path"):
            snapshot(source.repo_id, entry.get("revision", source.revision), folder, list(source.files),
                     repo_type="dataset")
        folder.mkdir(parents=True, exist_ok=True)
        done[source.name] = [str(f) for f in source_files(entry, raw_dir)]
    return done


def _generate(name: str, problems: int, seed: int, folder: Path) -> None:
    """A synthetic task's ``problems`` training rows (``prompt``, ``target``) as ``folder/train.jsonl``."""
    from ..benchmarks import get_benchmark

    write_jsonl_atomic(get_benchmark(name).training_rows("train", problems, seed), folder / "train.jsonl")


def source_files(entry: dict, raw_dir) -> list[Path]:
    """The data files of a source: its local override (file, glob or folder) or its downloaded folder."""
    source = get_source(entry["name"])
    path = Path(entry["path"]) if entry.get("path") else Path(raw_dir) / source.name
    if path.is_file():
        files = [path]
    elif path.is_dir():
        files = sorted({f for pattern in source.files for f in path.glob(pattern)})
    else:
        files = sorted(path.parent.glob(path.name))
    if not files:
        hint = "run the training-data download step first" if not entry.get("path") else "check the source's path"
        raise FileNotFoundError(f"no data files for source {source.name!r} at {path} (patterns {source.files}); {hint}")
    return files


def _read(files: list[Path], cache_dir: Path):
    """The records of parquet or JSON-lines files as one ``datasets.Dataset``."""
    import datasets

    from datasets.exceptions import DatasetGenerationError

    kinds = {".parquet": "parquet", ".jsonl": "json", ".json": "json"}
    kind = {kinds.get(f.suffix) for f in files}
    if len(kind) != 1 or None in kind:
        raise UserError(f"data files must be all .parquet or all .jsonl/.json, got {[f.name for f in files]}")
    try:
        return datasets.load_dataset(kind.pop(), data_files=[str(f) for f in files], split="train",
                                     cache_dir=str(cache_dir))
    except (DatasetGenerationError, ValueError) as err:  # pyarrow's and the JSON reader's errors are ValueErrors
        for file in files:  # name the file and line of the first line that is not JSON
            if file.suffix == ".jsonl":
                read_jsonl(file)
        raise UserError(f"data files {[str(f) for f in files]} do not read as one table ({err.__cause__ or err}); "
                        "expected records in the data set's own schema") from err


# --------------------------------------------------------------------------------------------------------------- build
def _tokenize_record(record: dict, source_name: str, tokenizer, system_prompt: str | None) -> dict:
    from ..train import tokenize_examples

    source = get_source(source_name)
    if source.kind == "plain":
        encoded = tokenize_examples(tokenizer, [(record["prompt"], record["target"])], max_length=sys.maxsize)[0]
    else:
        encoded = tokenize_chat(tokenizer, with_system_prompt(source.to_messages(record), system_prompt))
    return {**encoded, "length": len(encoded["input_ids"])}


def tokenize_source(records, source_name: str, tokenizer, system_prompt: str | None, num_proc: int = 1):
    """Chat-format (or, for plain sources, concatenate) and tokenise every record: columns ``input_ids`` (int32),
    ``target`` (response mask, int8) and ``length``; the narrow types keep a 70B-token mix at 5 bytes per token."""
    import datasets

    source = get_source(source_name)
    missing = sorted(set(source.fields) - set(records.column_names))
    if missing:
        raise UserError(f"source {source_name!r}: records lack field(s) {missing} (have {records.column_names})")
    features = datasets.Features({"input_ids": datasets.List(datasets.Value("int32")),
                                  "target": datasets.List(datasets.Value("int8")), "length": datasets.Value("int64")})
    return records.map(_tokenize_record, remove_columns=records.column_names, num_proc=num_proc if num_proc > 1 else None,
                       fn_kwargs={"source_name": source_name, "tokenizer": tokenizer, "system_prompt": system_prompt},
                       features=features, desc=f"tokenising {source_name}")


def select_documents(lengths: np.ndarray, share: int | None, seed: int) -> np.ndarray:
    """Document indices in a seeded random order until their lengths reach ``share`` tokens; when one pass over the
    documents is not enough, further passes are reshuffled. ``share`` None: every document once, in order."""
    if share is None:
        return np.arange(len(lengths))
    if len(lengths) == 0 or lengths.sum() == 0:
        raise UserError("a source with a token share has no usable documents (all longer than max_length, or none)")
    picked, total, epoch = [], 0, 0
    while total < share:
        order = np.random.default_rng([seed, epoch]).permutation(len(lengths))
        cumulative = np.cumsum(lengths[order])
        if cumulative[-1] <= share - total:
            picked.append(order)
            total, epoch = total + int(cumulative[-1]), epoch + 1
            continue
        count = int(np.searchsorted(cumulative, share - total)) + 1
        picked.append(order[:count])
        total += int(cumulative[count - 1])
    return np.concatenate(picked)


def tokenizer_fingerprint(tokenizer) -> str:
    """A hash of the vocabulary (to refuse packed data made with another tokenizer)."""
    vocab = json.dumps(sorted(tokenizer.get_vocab().items()))
    return hashlib.sha256(vocab.encode()).hexdigest()[:16]


def _source_part(entry: dict, mix: MixSpec, share, tokenizer, raw_dir, cache_dir):
    """One source's selected documents and its manifest entry."""
    source = get_source(entry["name"])
    records = _read(source_files(entry, raw_dir), cache_dir)
    tokens = tokenize_source(records, source.name, tokenizer, mix.system_prompts.get(source.kind), mix.num_proc)
    lengths = np.asarray(tokens["length"], dtype=np.int64)
    fits = np.flatnonzero(lengths <= mix.max_length)
    if len(fits) == 0:
        shortest = f" (the shortest has {lengths.min()} tokens)" if len(lengths) else ""
        raise UserError(f"source {source.name!r}: none of its {len(lengths)} documents fits in max_length="
                        f"{mix.max_length} tokens{shortest}; raise max_length (finetune.max_length)")
    chosen = fits[select_documents(lengths[fits], share, mix.seed)]
    info = {"repo_id": source.repo_id, "revision": entry.get("revision", source.revision),
            "path": entry.get("path"), "problems": entry.get("problems"), "kind": source.kind, "documents": len(lengths),
            "dropped_overlong": int(len(lengths) - len(fits)), "share_tokens": share,
            "selected_documents": int(len(chosen)), "selected_tokens": int(lengths[chosen].sum()),
            "passes": float(lengths[chosen].sum() / max(lengths[fits].sum(), 1))}
    return tokens.select(chosen).select_columns(["input_ids", "target"]), info


def build(mix: MixSpec, tokenizer, raw_dir, out_dir) -> dict:
    """Tokenise, select, pack and save the mix into ``out_dir`` (atomically); return the manifest."""
    import datasets

    if mix.max_length is None:
        raise UserError("building the training mix needs max_length (the fine-tune's finetune.max_length)")
    template = ensure_chat_template(tokenizer, mix.chat_template) if mix.has_chats() else None
    shares = mix.shares()
    with atomic_dir(out_dir) as tmp:
        parts, infos = [], {}
        for entry in mix.sources:
            part, infos[entry["name"]] = _source_part(entry, mix, shares[entry["name"]], tokenizer, raw_dir,
                                                      tmp / "cache")
            parts.append(part)
        packed = _rows(datasets.concatenate_datasets(parts), mix)
        packed.save_to_disk(str(tmp / PACKED))
        row_tokens = int(sum(sum(lengths) for lengths in packed["doc_lengths"]))
        manifest = {"settings": {**asdict(mix)}, "sources": infos, "rows": len(packed), "tokens": row_tokens,
                    "fill": row_tokens / max(len(packed) * mix.max_length, 1), "chat_template": template,
                    "tokenizer": {"name": tokenizer.name_or_path, "fingerprint": tokenizer_fingerprint(tokenizer)}}
        write_json_atomic(manifest, tmp / MANIFEST)
        shutil.rmtree(tmp / "cache", ignore_errors=True)
    return manifest


def _single_document(doc: dict) -> dict:
    return {"doc_lengths": [len(doc["input_ids"])]}


def _rows(documents, mix: MixSpec):
    """The training rows: documents shuffled and packed into rows of ``max_length`` tokens, or one document per row."""
    from trl.data_utils import pack_dataset

    if not mix.packing:
        return documents.map(_single_document, desc="one document per row")
    packed = pack_dataset(documents.shuffle(seed=mix.seed), seq_length=mix.max_length, strategy="bfd",
                          map_kwargs={"batch_size": mix.pack_batch})
    return packed.rename_column("seq_lengths", "doc_lengths")


def load_packed(data_dir, tokenizer=None, max_length: int | None = None):
    """The packed rows of a built mix (numpy format) and its manifest; checks the tokenizer and row length if given,
    and sets the mix's chat template on ``tokenizer`` so the fine-tuned checkpoint saves the one it was trained with."""
    import datasets

    data_dir = Path(data_dir)
    manifest = check_packed(data_dir, tokenizer, max_length)
    if tokenizer is not None and manifest["chat_template"] is not None:
        tokenizer.chat_template = manifest["chat_template"]
    rows = datasets.load_from_disk(str(data_dir / PACKED)).with_format("numpy")
    return rows, manifest


def check_packed(data_dir, tokenizer=None, max_length: int | None = None) -> dict:
    """The manifest of a built mix (the pack stage's output), checked against ``tokenizer`` and ``max_length`` if
    given, without reading its rows; FileNotFoundError or UserError naming the folder and what is expected."""
    data_dir = Path(data_dir)
    path = data_dir / MANIFEST
    if not path.is_file() or not (data_dir / PACKED).is_dir():
        raise FileNotFoundError(f"{data_dir} holds no built training mix (no {MANIFEST} and {PACKED}/); run the "
                                "pack stage first")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        packed_length = manifest["settings"]["max_length"]
        fingerprint, built_with = manifest["tokenizer"]["fingerprint"], manifest["tokenizer"].get("name")
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
        raise UserError(f"{path}: not a pack stage manifest ({type(err).__name__}: {err}); rerun the pack stage") \
            from None
    if manifest.get("rows") == 0:
        raise UserError(f"{path}: the training mix has no rows; rebuild it with documents that fit in max_length")
    if max_length is not None and packed_length != max_length:
        raise UserError(f"the training mix in {data_dir} was packed to max_length={packed_length} but the fine-tune "
                        f"asks for max_length={max_length}; rebuild the mix or change finetune.max_length")
    if tokenizer is not None and tokenizer_fingerprint(tokenizer) != fingerprint:
        raise UserError(f"the training mix in {data_dir} was tokenised with another tokenizer ({built_with}); "
                        "rebuild it with this base model's tokenizer")
    return manifest
