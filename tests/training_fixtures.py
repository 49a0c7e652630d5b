"""A tiny base checkpoint with a packed training mix beside it: what the finetune stage checks before it launches."""

from pathlib import Path

from conftest import char_tokenizer, tiny_model
from sbd_core import checkpoint, pipeline


def packed_base(tmp_path: Path) -> Path:
    """Save a tiny Llama with the character tokenizer as ``tmp_path/base`` and pack 4 synthetic math problems for it
    into ``tmp_path/packed`` (rows of at most 512 tokens); return the base folder."""
    tok = char_tokenizer()
    base = checkpoint.save(tiny_model("llama", len(tok)), tok, tmp_path / "base")
    sources = [{"name": "math", "problems": 4}]
    pipeline.run_data({"sources": sources}, tmp_path / "data")
    pipeline.run_pack({"sources": sources, "packing": False, "max_length": 512}, base, tmp_path / "data",
                      tmp_path / "packed")
    return base
