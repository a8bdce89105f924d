"""A plain forward pass for Llama-shaped models (Qwen2 and Llama) on the CPU with block weights.

A width-1 pass of the built-in target through transformers' modules spent about 30 ms of ~110 in
Python and small ops around the matmuls (masks built per call, rotary tables recomputed, keyword
plumbing, output records); this is the same computation in gpt-fast's style, one small function
per part, over the model's own modules (its block weights and norms) and the same static cache
layers, so prefix reuse, rollback and the width probe see one cache either way.

It defines the model's numerics wherever it is attached: every pass of the engine (prefill, the
decoding step, the draft's step, the width probe) goes through it, so plain decoding and
speculative decoding compute alike. Attached only where the model fits it (`fits`); everything
else runs transformers' forward.

Attention: a float32 model with block weights attends through specd's own kernel
(kernels/attend.c, `own_attention`), which reads the static cache in place, one row at a time on
specd's threads; torch's SDPA, which ran single-threaded with a mask built per pass, took ~15 of
70 ms of a width-1 pass over a ~1000-token cache. That cache holds IEEE halves (kernels/half.h:
half the bytes to wait for), rounded by specd's kernels on every path that writes it. Other
models keep `attention.folded`.

Layers: where every projection runs on block weights as well, each layer is one call of specd's
kernels (decoding/fused.py, kernels/layer.c) instead of this file's torch ops.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from specd.decoding import fused, qkernel
from specd.decoding.attention import folded, keys_needed
from specd.decoding.blocks import has_blocks
from specd.decoding.kvcache import KVCache, Rows, initialize_halves

TYPES = ("qwen2", "llama")


class PassStopped(Exception):
    """A pass given up between two layers because its request was cancelled; the layers it ran
    were put back, so the cache holds what it held before the pass."""


def fits(model: torch.nn.Module) -> bool:
    """Llama-shaped: rotary without scaling, SiLU MLP, no sliding window, a static-cache model."""
    return shaped(model) and model.device.type == "cpu"


def attach(model: torch.nn.Module) -> bool:
    """Run `model`'s engine passes through a `Lean` forward, where it fits; returns whether it does."""
    if not fits(model):
        return False
    model.specd_lean = Lean(model)
    return True


def shaped(model: torch.nn.Module) -> bool:
    """Llama-shaped, on any device: what `Lean` computes (`fits` adds the CPU, where it replaces
    transformers' forward for every pass)."""
    c = model.config
    rope = (getattr(c, "rope_parameters", None) or {}).get("rope_type", "default")
    return (c.model_type in TYPES and rope == "default" and c.hidden_act == "silu"
            and not getattr(c, "use_sliding_window", False))


class Lean:
    """The forward of `model`, through the layers numbered `layers` (default: all of them; a
    subset is the `layerskip` drafter's, decoding/layerskip.py, on the target's own cache)."""

    def __init__(self, model: torch.nn.Module, layers: tuple[int, ...] | None = None, fuse: bool | None = None):
        """`fuse`: run each layer in one kernel call where the model allows (default: unless
        $SPECD_FUSED_LAYERS=0)."""
        c = model.config
        self.model = model
        self.layers = tuple(range(c.num_hidden_layers)) if layers is None else layers
        self.heads, self.kv_heads = c.num_attention_heads, c.num_key_value_heads
        self.head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        self.scaling = self.head_dim ** -0.5
        self.eps = c.rms_norm_eps
        rotary = model.model.rotary_emb
        self.inv_freq = rotary.inv_freq.float()                             # [D / 2]
        self.rotary_scale = float(getattr(rotary, "attention_scaling", 1.0))
        self.own_attention = own_attention(model, self.head_dim)
        fuse = fused.wanted() if fuse is None else fuse
        self.fused = (fused.FusedLayers(model, self.head_dim, self.scaling)
                      if fuse and self.own_attention and fused.FusedLayers.fits(model) else None)

    @torch.inference_mode()
    def __call__(self, cache: KVCache, ids: list[int], keep: int,
                 stop: Callable[[], bool] | None = None) -> torch.Tensor:
        """The logits [keep, V] of the last `keep` of `ids`, run after what `cache` holds. Where
        `stop` says so between two layers, raises PassStopped: a keystroke that makes a request
        stale then waits for one layer (~5 ms of the built-in target's pass at width 1 on 2 cores),
        not for the rest of the pass (~60 ms on average)."""
        for key, hook in self.model._forward_pre_hooks.items():  # pass counters see this pass too
            hook(self.model, (), {}) if key in self.model._forward_pre_hooks_with_kwargs else hook(self.model, ())
        m = self.model.model
        start = cache.positions(self.layers[0])   # a subset's layers run ahead of the others
        positions = torch.arange(start, start + len(ids))                      # [S]
        x = m.embed_tokens(torch.tensor(ids))                                  # [S, E]
        rotary = self.rotary(positions)
        keys = keys_needed(start + len(ids), cache.capacity)                  # whole blocks: the same bits
        mask = None if self.own_attention else self.mask(positions, keys)
        for done, index in enumerate(self.layers):
            if stop is not None and stop():
                if done:
                    cache.rewind(self.layers[:done], start)
                raise PassStopped
            x = self.layer(index, x, cache.past.layers[index], rotary, (start, mask, keys))
        hidden = self.norm(x[-keep:], m.norm)                                   # [keep, E]
        if len(self.layers) == len(m.layers):  # a whole pass: what the `heads` drafter reads
            cache.rows = Rows(start + len(ids) - keep, ids[-keep:], hidden)
        return self.model.lm_head(hidden)                                     # [keep, V]

    def layer(self, index: int, x: torch.Tensor, kv, rotary,
              where: tuple[int, torch.Tensor | None, int]) -> torch.Tensor:
        """x [S, E] through layer `index` (in place where the layer is one kernel call)."""
        if self.own_attention:  # either way its cache holds halves (kernels/half.h)
            initialize_halves(kv, self.kv_heads, self.head_dim)
        if self.fused is not None:
            self.fused.run(index, x, where[0], *rotary, kv)
            return x
        layer = self.model.model.layers[index]
        x = x + self.attention(layer, self.norm(x, layer.input_layernorm), kv, rotary, where)
        return x + self.mlp(layer.mlp, self.norm(x, layer.post_attention_layernorm))

    def norm(self, x: torch.Tensor, norm: torch.nn.Module) -> torch.Tensor:
        return torch.nn.functional.rms_norm(x, (x.shape[-1],), norm.weight, self.eps)

    def rotary(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions[:, None].float() * self.inv_freq                     # [S, D / 2]
        angles = torch.cat([freqs, freqs], dim=-1)                             # [S, D]
        return angles.cos() * self.rotary_scale, angles.sin() * self.rotary_scale

    @staticmethod
    def mask(positions: torch.Tensor, keys: int) -> torch.Tensor:
        """Each row sees the keys up to its own position, over the first `keys` of the cache."""
        return (torch.arange(keys)[None, :] <= positions[:, None])[None, None]  # [1, 1, S, keys]

    def attention(self, layer, x: torch.Tensor, kv, rotary,
                  where: tuple[int, torch.Tensor | None, int]) -> torch.Tensor:
        """`where`: the pass's first position, and for torch's attention its mask and key count."""
        a, s = layer.self_attn, x.shape[0]
        q = a.q_proj(x).view(s, self.heads, self.head_dim)                        # [S, H, D]
        k = a.k_proj(x).view(s, self.kv_heads, self.head_dim)                     # [S, H_kv, D]
        v = a.v_proj(x).view(s, self.kv_heads, self.head_dim)
        # the tables in the activations' dtype, as transformers' rotary hands them over: a bf16 model's
        # keys stay bf16 (its cache's dtype) and are the bits its own forward writes
        cos, sin = (table.to(x.dtype)[:, None] for table in rotary)               # [S, 1, D]
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        k, v = k.transpose(0, 1)[None], v.transpose(0, 1)[None]                  # [1, H_kv, S, D]
        if self.own_attention:  # rounded to the cache's halves as a layer's one call rounds them
            k, v = qkernel.halves(k), qkernel.halves(v)
        cached_k, cached_v = kv.update(k, v)                                      # [1, H_kv, capacity, D]
        start, mask, keys = where
        if self.own_attention:
            out = qkernel.attend(q.contiguous(), cached_k[0], cached_v[0], start, self.scaling)  # [S, H * D]
        else:
            out = folded(q.transpose(0, 1)[None], cached_k[:, :, :keys], cached_v[:, :, :keys], mask, self.scaling,
                         self.heads // self.kv_heads)[0].transpose(0, 1).reshape(s, self.heads * self.head_dim)
        return a.o_proj(out)

    @staticmethod
    def mlp(mlp: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        return mlp.down_proj(torch.nn.functional.silu(mlp.gate_proj(x)) * mlp.up_proj(x))


def own_attention(model: torch.nn.Module, head_dim: int) -> bool:
    """Whether passes attend through specd's kernel (kernels/attend.c) rather than torch's SDPA: a
    float32 model with block weights, where specd's threads are the pass's threads (torch's run
    one; models/load.py) and every row's attention is computed alone, whatever the pass's width."""
    return (model.dtype == torch.float32 and head_dim % 8 == 0 and head_dim <= 256 and qkernel.available()
            and has_blocks(model))


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding, half-split as Llama and Qwen2 apply it: x [S, H, D]."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin
