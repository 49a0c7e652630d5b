"""A minimal forward of Llama- and Qwen-3-class models over their Hugging Face weights, with a preallocated KV cache.

Why our own forward: the Hugging Face caches cannot hold one length per row (``DynamicCache`` concatenates and crops
every layer's whole cache per update; ``StaticCache`` keeps one write position for the batch), and the engine feeds
rows at different lengths and widths in one forward. Everything but attention is the model's own modules (its norms,
projections, MLPs, rotary table, output layer), called in the order of its ``forward``, on the ragged batch's tokens
``[T, hidden]``; attention is :mod:`.attention`'s. Two are written out, in the modules' own arithmetic, because an eager
step pays per Python call: the RMSNorms (torch's ``rms_norm`` with each norm's weight and epsilon) and the rotary
embedding (``rotate_half(x) sin`` as ``roll(x)`` times the sine with ``rotate_half``'s signs: the same products).

The cache of each layer is one key and one value buffer ``[rows + 1, max_len, kv_heads, head_dim]``, allocated once
and zero-initialised (a masked key must hold a finite value: attention multiplies masked values by 0, and 0 * NaN is
NaN); the last row is the padding tokens' scratch row. A forward writes the keys and values of every token it feeds at
that token's position in its row, then attends; a position's entry is simply overwritten by the next write there, so
nothing is concatenated or cropped.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import LlamaForCausalLM, Qwen3ForCausalLM

from .attention import KV_BLOCK, DensePlan, FlexPlan, Ragged

SUPPORTED = (LlamaForCausalLM, Qwen3ForCausalLM)
STATIC_ROPE = ("default", "linear", "llama3", "yarn")  # rotary scalings whose table does not depend on the length


def check_supported(model) -> None:
    """ValueError unless ``model`` is a Llama- or Qwen-3-class model the engine's forward reproduces exactly."""
    if not isinstance(model, SUPPORTED):
        raise ValueError(f"decode.engine 'fast' supports LlamaForCausalLM and Qwen3ForCausalLM, got "
                         f"{type(model).__name__}; use decode.engine: reference for other models")
    config = model.config
    if getattr(config, "use_sliding_window", False) or "sliding_attention" in (getattr(config, "layer_types", None)
                                                                                or ()):
        raise ValueError("decode.engine 'fast' does not implement sliding-window attention; use decode.engine: "
                         "reference for this model")
    rope = (getattr(config, "rope_parameters", None) or {}).get("rope_type", "default")
    if rope not in STATIC_ROPE:  # dynamic, longrope: frequencies that change with the sequence length
        raise ValueError(f"decode.engine 'fast' precomputes the rotary table and cannot follow rope_type {rope!r} "
                         f"(it supports {list(STATIC_ROPE)}); use decode.engine: reference for this model")


class CachedForward:
    """The model's forward over a KV cache of ``rows`` rows (plus the scratch row) of ``max_len`` positions each."""

    def __init__(self, model, rows: int, max_len: int):
        check_supported(model)
        self.model, self.rows = model, rows
        self.max_len = -(-max_len // KV_BLOCK) * KV_BLOCK  # whole flex key blocks per row
        config = model.config
        self.layers = model.model.layers
        self.kv_heads = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        self.qk_norm = isinstance(model, Qwen3ForCausalLM)
        self.scale = self.layers[0].self_attn.scaling  # head_dim ** -0.5 in both families
        device, dtype = model.device, model.dtype
        shape = (rows + 1, self.max_len, self.kv_heads, self.head_dim)
        self.keys = [torch.zeros(shape, device=device, dtype=dtype) for _ in self.layers]
        self.values = [torch.zeros(shape, device=device, dtype=dtype) for _ in self.layers]
        positions = torch.arange(self.max_len, device=device)[None]
        probe = torch.zeros(1, 1, device=device, dtype=dtype)
        cos, sin = model.model.rotary_emb(probe, positions)  # the model's own rotary values, one row per position
        self.cos, self.sin = cos[0], sin[0]

    def buffers(self) -> list[torch.Tensor]:
        """Every tensor the forward reads or writes in place (a captured CUDA graph needs them at fixed addresses)."""
        return [*self.keys, *self.values, self.cos, self.sin]

    def __call__(self, tokens: Ragged, attend) -> torch.Tensor:
        """Hidden states [T, hidden] of the ragged ``tokens``: each token's keys and values are written at its
        position in its row, then ``attend(q, keys, values, scale)`` (a :mod:`.attention` plan) reads the cache."""
        write = tokens.slots * self.max_len + tokens.positions
        hidden = self.model.model.embed_tokens(tokens.ids)
        cos, sin = self.cos[tokens.positions][:, None], self.sin[tokens.positions][:, None]  # [T, 1, head_dim]
        half = self.head_dim // 2  # x cos + rotate_half(x) sin = x cos + roll(x) (-sin1, sin2): rotate_half = (-x2, x1)
        sin = torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)
        shape = (tokens.ids.shape[0], -1, self.head_dim)
        flat = (-1, self.kv_heads, self.head_dim)
        for keys, values, layer in zip(self.keys, self.values, self.layers):
            attn = layer.self_attn
            x = _norm(layer.input_layernorm, hidden)
            q, k, v = attn.q_proj(x).view(shape), attn.k_proj(x).view(shape), attn.v_proj(x).view(shape)
            if self.qk_norm:
                q, k = _norm(attn.q_norm, q), _norm(attn.k_norm, k)
            q, k = q * cos + q.roll(half, dims=-1) * sin, k * cos + k.roll(half, dims=-1) * sin  # [T, heads, head_dim]
            keys.view(flat).index_copy_(0, write, k)
            values.view(flat).index_copy_(0, write, v)
            out = attend(q, keys, values, self.scale)  # [T, heads, head_dim]
            hidden = hidden + attn.o_proj(out.reshape(hidden.shape[0], -1))
            hidden = hidden + layer.mlp(_norm(layer.post_attention_layernorm, hidden))
        return hidden

    def prefill(self, tokens: Ragged, key_rows: torch.Tensor, width: torch.Tensor | None = None,
                span: torch.Tensor | None = None) -> torch.Tensor:
        """Write the keys and values of causal ``tokens`` (prompts; a dense plan's rectangle rows are the cache rows
        ``key_rows``, ``width`` and ``span`` carry its shape; without them FlexAttention); returns their hidden
        states."""
        if width is None:
            plan = FlexPlan(tokens, self.max_len, self.rows + 1)
        else:
            plan = DensePlan(tokens, key_rows, key_rows.shape[0], width, span)
        return self(tokens, plan)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """float32 logits of final hidden states ``hidden`` [..., hidden] (the model's norm and output layer)."""
        return self.model.lm_head(_norm(self.model.model.norm, hidden)).float()


def _norm(norm, x: torch.Tensor) -> torch.Tensor:
    """The model's RMSNorm ``norm`` in its own arithmetic (normalise in float32, round to the input's dtype, then scale
    by its weight), the normalisation through torch's ``rms_norm``: half the time of the module's Python forward."""
    return norm.weight * F.rms_norm(x.float(), (x.shape[-1],), eps=norm.variance_epsilon).to(x.dtype)
