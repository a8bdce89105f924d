"""Which pass widths compute the same bits: measured on the loaded model, at start-up.

A token's logits depend on the kernels its pass runs, and those are chosen by the pass's shape.
The engine holds the key length fixed (the static cache) and pads every decoding pass of the
target to a width it picks from a set of widths that compute identical bits. On this project's
CPU (bf16, AMX), passes of 4 to 16 rows agree to the bit while 1, 2 and 3 rows each differ; a GPU's
kernels may agree on no two widths. So the set is not assumed: probe passes on the loaded model
find the smallest width `low` such that every width from `low` to the largest gives the same
logits as the largest, for every row, and a pass of k real tokens is padded to max(k, low).
Where no smaller width agrees, `low` is the largest width: one fixed shape, as before.
"""

from __future__ import annotations

import torch

from decoding.forward import prefill, step
from decoding.kvcache import KVCache

PROBE_PROMPT = 48   # cached tokens before the probe passes (any length shows the kernel choice)


def smallest_equivalent_width(model: torch.nn.Module, capacity: int, largest: int, pad_id: int,
                              vocab: int) -> int:
    """The smallest `low` for which passes of widths low..largest give the largest's bits."""
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, vocab, (PROBE_PROMPT,), generator=g).tolist()
    block = torch.randint(0, vocab, (largest,), generator=g).tolist()
    cache = KVCache(model, capacity)
    reference = _logits(model, cache, prompt, block, largest, pad_id)
    low = largest
    for width in range(largest - 1, 0, -1):
        rows = block[:width]
        if not torch.equal(_logits(model, cache, prompt, rows, width, pad_id), reference[:width]):
            break
        low = width
    return low


def _logits(model, cache: KVCache, prompt: list[int], rows: list[int], width: int, pad_id: int) -> torch.Tensor:
    """The logits of `rows` after `prompt`, in one pass of `width` rows (the prompt is cached)."""
    prefill(model, cache, prompt, len(prompt), lambda: False)
    logits = step(model, cache, rows, width, pad_id)
    cache.truncate(len(prompt))
    return logits
