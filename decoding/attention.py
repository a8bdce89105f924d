"""The attention the engine runs on a CPU: transformers' SDPA, with grouped key/value heads read
in place (float32 models with block weights attend through specd's own kernel instead:
decoding/lean.py, kernels/attend.c).

Qwen2.5-Coder shares each key/value head among several query heads (1.5B: 12 query heads on 2
key/value heads). Given a mask, which the static cache always gives, transformers' SDPA copies every
key/value head once per query head (`repeat_kv`) before calling the kernel: for the built-in
target that is ~230 MB copied per decoding pass over a 1336-token cache. Here instead the query
heads that share a key/value head are folded into rows of that head (`folded`), so the kernel
reads each key/value head once for all of them: a decoding pass's attention is 6 rows on each of
2 heads rather than 1 row (padded to 4, below) on each of 12, several times less work. The bits
differ from the copying path's, so which widths compute the same bits is measured with this
attention in place (decoding/widths.py), and every drafter is checked against plain decoding
through it. On other devices the stock function runs.

A row's bits must not depend on the rows beside it, so that a prompt's keys and values are the
same however it was chunked (a cold prefill, a keystroke's short pass, an edit folded into a
verify pass, a prefill cancelled halfway) and any pass width gives the same logits. Torch's CPU
flash attention splits the queries into blocks (32 rows below 192 queries, then 64, then 256)
and computes a block of fewer than 4 rows otherwise (measured on this project's AVX2 and AMX
CPUs: rows 1-3 and 33 of a 33-row pass differ from the same rows in a 128-row one; 4-32 agree).
So the queries are padded, repeating the last, until no block is that short; and the mask is always
given (never the causal shortcut over only the pass's own keys, which an empty cache's first
pass would otherwise take), so every pass attends over the static cache's whole length.
tests/decoding/test_attention.py holds both to the bit.
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
    if attention_mask is None:  # no static cache (a plain forward): stock SDPA's causal pass
        causal = q_length > 1 and (is_causal if is_causal is not None else getattr(module, "is_causal", True))
        out = torch.nn.functional.scaled_dot_product_attention(query, key, value, dropout_p=dropout, scale=scaling,
                                                               is_causal=causal, enable_gqa=True)
        return out.transpose(1, 2).contiguous(), None
    out = folded(query, key, value, attention_mask, scaling, module.num_key_value_groups)  # [B, H, S, D]
    return out.transpose(1, 2).contiguous(), None


def folded(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor, scaling: float | None,
            groups: int) -> torch.Tensor:
    """Attention with each key/value head's query heads folded into rows: query [B, H, S, D] as
    [B, H_kv, groups * S, D] against key and value [B, H_kv, K, D]. A one-token pass is then 6
    rows of 2 heads (the 1.5B) instead of 1 row of 12, padded to 4: a quarter of the work, and
    the rows stay independent (each reads its own query and mask row)."""
    b, h, s, d = query.shape
    rows = groups * s
    q = query.reshape(b, h // groups, rows, d)                                           # [B, H_kv, G*S, D]
    m = mask.expand(b, mask.shape[1], s, mask.shape[-1])[:, :, None].expand(-1, -1, groups, -1, -1)
    m = m.reshape(b, mask.shape[1], rows, mask.shape[-1])                                # [B, 1, G*S, K]
    padded = padded_rows(rows)
    if padded > rows:
        q = torch.cat([q, q[:, :, -1:].expand(-1, -1, padded - rows, -1)], dim=2)
        m = torch.cat([m, m[:, :, -1:].expand(-1, -1, padded - rows, -1)], dim=2)
    out = torch.nn.functional.scaled_dot_product_attention(q, key, value, attn_mask=m, scale=scaling)
    return out[:, :, :rows].reshape(b, h, s, d)


KEY_BLOCK = 512  # keys per block of torch's CPU flash attention (ATen's kv split)


def keys_needed(end: int, capacity: int) -> int:
    """How many of a static cache's keys a pass must give the kernel when its last query is at
    position end - 1: whole blocks of KEY_BLOCK up to it, or the whole cache. The blocks that hold
    a visible key have the same shape either way, and a block with no visible key changes no bit
    (its scores are -inf, so the running maximum stays, the running sum is scaled by exp(0) = 1
    and gains zeros, and the output gains zero times finite values); so a pass over fewer keys
    gives the bits of one over the whole cache (tests/decoding/test_attention.py) and costs less
    while a document is shorter than its cache."""
    return min(capacity, -(-end // KEY_BLOCK) * KEY_BLOCK)


SHORTEST_BLOCK = 4  # query rows below which a block of torch's CPU flash attention computes other bits


def padded_rows(n: int) -> int:
    """The rows to give the kernel for `n` queries: no query block (ATen's split) shorter than 4."""
    split = 32 if n < 192 else 64 if n < 768 else 256
    tail = n % split
    return max(n + (SHORTEST_BLOCK - tail if 0 < tail < SHORTEST_BLOCK else 0), SHORTEST_BLOCK)


def full_mask(*args, **kwargs) -> torch.Tensor | None:
    """SDPA's mask, never skipped for the causal shortcut: see the module's docstring."""
    kwargs["allow_is_causal_skip"] = False
    return sdpa_mask(*args, **kwargs)


AttentionInterface.register(NAME, grouped_sdpa)
ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, full_mask)


def install(model: torch.nn.Module) -> None:
    """Make `model` attend through `grouped_sdpa`."""
    model.set_attn_implementation(NAME)
