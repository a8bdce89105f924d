"""The attention the engine runs on a CPU: transformers' SDPA, with grouped key/value heads read
in place.

Qwen2.5-Coder shares each key/value head among several query heads (1.5B: 12 query heads on 2
key/value heads). Given a mask, which the static cache always gives, transformers' SDPA copies every
key/value head once per query head (`repeat_kv`) before calling the kernel: for the built-in
target that is ~230 MB copied per decoding pass over a 1336-token cache. Torch's CPU kernel reads
grouped heads itself (`enable_gqa`), with a mask too; in `specd bench` the same pass is ~8%
faster. The bits differ from the copying path's, so which widths compute the same bits is measured
with this attention in place (decoding/widths.py), and every drafter is checked against plain
decoding through it. On other devices the stock function runs (there `enable_gqa` with a mask can
fall back to a slow kernel).
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

NAME = "specd_sdpa"


def grouped_sdpa(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                 attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                 is_causal: bool | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """query [B, H, S, D], key and value [B, H_kv, K, D] -> output [B, S, H, D]."""
    grouped = getattr(module, "num_key_value_groups", 1) > 1
    if query.device.type != "cpu" or not grouped or kwargs.get("position_bias") is not None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, is_causal,
                                      **kwargs)
    q_length = query.shape[2]
    causal = q_length > 1 and attention_mask is None and (is_causal if is_causal is not None
                                                          else getattr(module, "is_causal", True))
    if causal and key.shape[2] > q_length:  # an empty static cache's first pass: only its own keys
        key, value = key[:, :, :q_length], value[:, :, :q_length]
    out = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask,
                                                           dropout_p=dropout, scale=scaling, is_causal=causal,
                                                           enable_gqa=True)
    return out.transpose(1, 2).contiguous(), None


AttentionInterface.register(NAME, grouped_sdpa)
ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, sdpa_mask)  # its masks stay SDPA's


def install(model: torch.nn.Module) -> None:
    """Make `model` attend through `grouped_sdpa`."""
    model.set_attn_implementation(NAME)
