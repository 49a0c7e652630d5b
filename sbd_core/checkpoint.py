"""Loading and saving checkpoints: local folders (safetensors) and pinned Hugging Face hub snapshots.

Loading never unpickles (``use_safetensors=True``) and keeps ``trust_remote_code`` off unless asked for. Saving writes into a
temporary sibling folder and renames it into place, so a failed or killed job never leaves a folder a rerun would trust.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import torch

from .io_utils import write_json_atomic

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def torch_dtype(name: str) -> torch.dtype:
    """``"bfloat16"`` -> ``torch.bfloat16`` with a clear error for other names."""
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {name!r}")
    return DTYPES[name]


def load(path, device: str = "cpu", dtype: str = "float32", trust_remote_code: bool = False,
         attn_implementation: str = "sdpa"):
    """Load ``(model, tokenizer)`` from a local checkpoint folder."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"{path} is not a checkpoint folder (no config.json); run the stage that makes it first")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype(dtype), use_safetensors=True,
                                                 trust_remote_code=trust_remote_code,
                                                 attn_implementation=attn_implementation)
    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    return model.to(device).eval(), tokenizer


def save(model, tokenizer, out_dir, extra_files: dict | None = None, copy_files: dict | None = None) -> Path:
    """Save model (safetensors) + tokenizer + ``extra_files`` ({name: json-able}) + ``copy_files`` ({name: source
    path}) atomically into ``out_dir``."""
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(f".{out_dir.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        for name, obj in (extra_files or {}).items():
            write_json_atomic(obj, tmp / name)
        for name, source in (copy_files or {}).items():
            shutil.copy(source, tmp / name)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if out_dir.exists():
        shutil.rmtree(out_dir)
    os.replace(tmp, out_dir)
    return out_dir


def download(repo_id: str, revision: str, out_dir, token: str | None = None) -> Path:
    """Fetch a pinned hub snapshot (weights as safetensors, config, tokenizer) into ``out_dir`` with clear errors."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import GatedRepoError, LocalEntryNotFoundError, RepositoryNotFoundError

    if not revision or revision == "main":
        raise ValueError(f"pin a revision (a commit hash) for {repo_id}: results must name the exact weights")
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(f".{out_dir.name}.tmp-{os.getpid()}")
    try:
        snapshot_download(repo_id, revision=revision, local_dir=tmp, token=token,
                          allow_patterns=["*.json", "*.safetensors", "tokenizer*", "*.model", "*.txt"])
    except GatedRepoError as err:
        raise RuntimeError(f"{repo_id} is gated: accept its licence on the hub and set HF_TOKEN ({err})") from err
    except LocalEntryNotFoundError as err:
        raise RuntimeError(
            f"cannot download {repo_id}@{revision}: offline (HF_HUB_OFFLINE set or no network) and not in the local "
            f"cache; download it on a connected machine (huggingface-cli download {repo_id} --revision {revision}) "
            "or point the model's source to a local folder"
        ) from err
    except RepositoryNotFoundError as err:
        raise RuntimeError(f"{repo_id} does not exist on the hub or needs a token ({err})") from err
    if out_dir.exists():
        shutil.rmtree(out_dir)
    os.replace(tmp, out_dir)
    return out_dir
