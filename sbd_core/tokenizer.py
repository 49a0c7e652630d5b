"""Small byte-level BPE tokenizer for the embedded default, with Llama-3.1 style special tokens.

Pre-tokenization splits every digit into its own token (``Digits(individual_digits=True)``) before the
GPT-2 style ``ByteLevel`` split, and the ``ByteLevel`` decoder makes ``decode(encode(x)) == x`` exactly,
including spaces, indentation and newlines.

Special tokens take the first ids, in this order: ``<|begin_of_text|>`` (bos, id 0), ``<|end_of_text|>``
(eos, 1), ``<|pad|>`` (pad, 2), then ``<|reserved_special_token_0|>`` .. ``_3`` (ids 3-6, unused; the SBD
mask token reuses ``RESERVED_TOKENS[0]``, as with the real Llama-3.1 tokenizer).

What ``encode``/``__call__`` add: like the Llama-3.1 tokenizer, a ``<|begin_of_text|>`` in front when
``add_special_tokens`` is true (the default), nothing otherwise; never an EOS. Training rows are
``bos + prompt + target + eos`` (:func:`sbd_core.train.tokenize_examples`), so a decoder given ``tok(prompt)`` sees
exactly the training prefix.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

BOS_TOKEN = "<|begin_of_text|>"
EOS_TOKEN = "<|end_of_text|>"
PAD_TOKEN = "<|pad|>"
RESERVED_TOKENS = tuple(f"<|reserved_special_token_{i}|>" for i in range(4))
SPECIAL_TOKENS = (BOS_TOKEN, EOS_TOKEN, PAD_TOKEN) + RESERVED_TOKENS
MIN_VOCAB_SIZE = 256 + len(SPECIAL_TOKENS)


def _pre_tokenizer() -> pre_tokenizers.PreTokenizer:
    """Individual digits first, then the GPT-2 byte-level split (no prefix space)."""
    return pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])


def build_tokenizer(texts: list[str], vocab_size: int = 512) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on ``texts`` and wrap it as a ``PreTrainedTokenizerFast``.

    Deterministic: the same texts (in the same order) give the same vocabulary and merges. The vocabulary
    holds all 256 byte symbols plus the special tokens, so any text can be encoded; it may stay below
    ``vocab_size`` when the texts offer too few merges. Raises ValueError for empty/non-string texts or
    ``vocab_size < MIN_VOCAB_SIZE``.
    """
    if isinstance(texts, str) or not texts:
        raise ValueError("texts must be a non-empty list of strings")
    if not all(isinstance(t, str) for t in texts):
        raise ValueError("texts must contain only strings")
    if not isinstance(vocab_size, int) or vocab_size < MIN_VOCAB_SIZE:
        raise ValueError(f"vocab_size must be an int >= {MIN_VOCAB_SIZE} (256 bytes + specials), got {vocab_size!r}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = _pre_tokenizer()
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    bos_id = tok.token_to_id(BOS_TOKEN)
    tok.post_processor = processors.TemplateProcessing(single=f"{BOS_TOKEN} $A", pair=f"{BOS_TOKEN} $A $B",
                                                       special_tokens=[(BOS_TOKEN, bos_id)])
    return _wrap(tok)


def _wrap(tok: Tokenizer) -> PreTrainedTokenizerFast:
    """Wrap a trained ``tokenizers.Tokenizer`` with bos/eos/pad and the reserved tokens set."""
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS_TOKEN, eos_token=EOS_TOKEN, pad_token=PAD_TOKEN,
        extra_special_tokens=list(RESERVED_TOKENS), clean_up_tokenization_spaces=False,
        model_max_length=4096)


def save_tokenizer(tokenizer: PreTrainedTokenizerFast, path: str | Path) -> None:
    """Save with ``save_pretrained`` (loadable by ``AutoTokenizer.from_pretrained``, e.g. lm-eval's hf backend)."""
    tokenizer.save_pretrained(str(path))


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerFast:
    """Load a tokenizer saved by :func:`save_tokenizer`; ValueError if ``path`` holds none."""
    if not (Path(path) / "tokenizer.json").is_file():
        raise ValueError(f"no tokenizer.json in {path}")
    return AutoTokenizer.from_pretrained(str(path))
