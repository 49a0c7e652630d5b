"""A minimal forward of Llama- and Qwen-3-class models over their Hugging Face weights, with a preallocated KV cache.

Why our own forward: the Hugging Face caches cannot hold one length per row (``DynamicCache`` concatenates and crops
every layer's whole cache per update; ``StaticCache`` keeps one write position for the batch), and the engine needs
rows at different lengths in one forward of a fixed shape. Everything but attention is the model's own modules (its
norms, projections, MLPs, rotary table, output layer), called in the order of its ``forward``; attention is
``scaled_dot_product_attention`` over the cache with a boolean mask built from positions.

The cache of each layer is one key and one value buffer ``[slots, max_len, kv_heads, head_dim]``, zero-initialised (a
masked key must hold a finite value: attention multiplies masked values by 0, and 0 * NaN is NaN). A forward writes the
keys and values of every token it feeds at that token's position in its row, then attends over ``[0, span)`` of every
row; a position's entry is simply overwritten by the next write there, so nothing is concatenated or cropped.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import LlamaForCausalLM, Qwen3ForCausalLM

SUPPORTED = (LlamaForCausalLM, Qwen3ForCausalLM)


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


class CachedForward:
    """The model's forward over a KV cache of ``slots`` rows of ``max_len`` positions each."""

    def __init__(self, model, slots: int, max_len: int):
        check_supported(model)
        self.model, self.slots, self.max_len = model, slots, max_len
        config = model.config
        self.layers = model.model.layers
        self.kv_heads = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        self.qk_norm = isinstance(model, Qwen3ForCausalLM)
        self.scale = self.layers[0].self_attn.scaling  # head_dim ** -0.5 in both families
        device, dtype = model.device, model.dtype
        shape = (slots, max_len, self.kv_heads, self.head_dim)
        self.keys = [torch.zeros(shape, device=device, dtype=dtype) for _ in self.layers]
        self.values = [torch.zeros(shape, device=device, dtype=dtype) for _ in self.layers]
        positions = torch.arange(max_len, device=device)[None]
        probe = torch.zeros(1, 1, device=device, dtype=dtype)
        cos, sin = model.model.rotary_emb(probe, positions)  # the model's own rotary values, one row per position
        self.cos, self.sin = cos[0], sin[0]

    @torch.no_grad()
    def step(self, ids: torch.Tensor, positions: torch.Tensor, allowed: torch.Tensor, span: int) -> torch.Tensor:
        """Hidden states [S, W, hidden] of ``ids`` [S, W] fed at ``positions`` [S, W] in every slot; each token's keys
        and values are written at its position first, then every query attends to keys ``[0, span)`` of its row where
        ``allowed`` [S, W, span] is True."""
        rows = torch.arange(self.slots, device=ids.device)[:, None]
        flat = (rows * self.max_len + positions).flatten()
        mask = allowed[:, None]

        def attend(layer_idx, q, k, v):  # q, k, v: [S, W, heads, head_dim]
            self._write(layer_idx, flat, k, v)
            keys = self.keys[layer_idx][:, :span].transpose(1, 2)
            values = self.values[layer_idx][:, :span].transpose(1, 2)
            return F.scaled_dot_product_attention(q.transpose(1, 2), keys, values, attn_mask=mask, scale=self.scale,
                                                  enable_gqa=True)

        return self._run(ids, positions, attend)

    @torch.no_grad()
    def prefill(self, slots: torch.Tensor, ids: torch.Tensor, lengths: torch.Tensor) -> None:
        """Causal forward over prompts ``ids`` [n, P] (right-padded; ``lengths`` [n] real tokens) into cache rows
        ``slots`` [n] at positions 0..P-1; the attention reads only the prompts' own keys (the rows start empty)."""
        width = ids.shape[1]
        positions = torch.arange(width, device=ids.device).expand_as(ids)
        flat = (slots[:, None] * self.max_len + positions).flatten()
        causal = positions[:, None, :] <= positions[:, :, None]  # [n, q, k]
        real = positions < lengths[:, None]
        mask = (causal & real[:, None, :]) | torch.eye(width, dtype=torch.bool, device=ids.device)  # pads: themselves
        mask = mask[:, None]

        def attend(layer_idx, q, k, v):  # q, k, v: [n, W, heads, head_dim]
            self._write(layer_idx, flat, k, v)
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scale, enable_gqa=True)

        self._run(ids, positions, attend)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """float32 logits of the final hidden states ``hidden`` [S, n, hidden] (the model's norm and output layer)."""
        return self.model.lm_head(self.model.model.norm(hidden)).float()

    # ------------------------------------------------------------------------------------------------ internals
    def _write(self, layer_idx: int, flat: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Write keys/values [n, W, kv_heads, head_dim] at the flat (row, position) indices ``flat``."""
        shape = (-1, self.kv_heads, self.head_dim)
        self.keys[layer_idx].view(shape).index_copy_(0, flat, k.reshape(shape))
        self.values[layer_idx].view(shape).index_copy_(0, flat, v.reshape(shape))

    def _run(self, ids, positions, attend) -> torch.Tensor:
        """The decoder stack of the model's own modules, with ``attend(layer, q, k, v)`` as its attention."""
        hidden = self.model.model.embed_tokens(ids)
        cos, sin = self.cos[positions][:, :, None], self.sin[positions][:, :, None]  # [n, W, 1, head_dim]
        shape = (*ids.shape, -1, self.head_dim)
        for layer_idx, layer in enumerate(self.layers):
            attn = layer.self_attn
            x = layer.input_layernorm(hidden)
            q, k, v = attn.q_proj(x).view(shape), attn.k_proj(x).view(shape), attn.v_proj(x).view(shape)
            if self.qk_norm:
                q, k = attn.q_norm(q), attn.k_norm(k)
            q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin  # [n, W, heads, head_dim]
            out = attend(layer_idx, q, k, v)  # [n, heads, W, head_dim]
            hidden = hidden + attn.o_proj(out.transpose(1, 2).reshape(*ids.shape, -1))
            hidden = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
        return hidden


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    """Rotate half the head dimensions (the rotary embedding's convention in Llama and Qwen-3)."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)
