"""One model's KV cache with the token ids it holds: prefix reuse and rollback by position.

The cache is static: keys and values live in tensors of a fixed length (`capacity`), and every
attention runs over that whole length with a mask. That costs a little attention work, and buys
exactness: with the key length fixed, a token's logits do not depend on how many tokens share its
forward pass, so a padded one-token step and a k-token verify pass agree bit for bit (see
`decoding/forward.py`). Rolling back rejected tokens is moving the length back; the stale entries
beyond it are masked until they are overwritten.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import torch
from transformers import StaticCache

from specd.decoding import qkernel


class CacheFull(Exception):
    """The prompt and the tokens to generate do not fit the cache."""


@dataclass(frozen=True)
class Rows:
    """The final hidden states (normed, as the output layer reads them) of the rows a pass kept,
    and their ids: what the `heads` drafter guesses from (decoding/heads.py)."""
    first: int             # the position of the first row
    ids: list[int]
    hidden: torch.Tensor   # [len(ids), E]

    def at(self, position: int, tokens: list[int]) -> torch.Tensor | None:
        """The state at `position`, where the cache still holds what the pass saw up to it: a pass
        writes `rows` anew, so only a truncation (which shortens `tokens`) can make it stale."""
        i = position - self.first
        if not 0 <= i < len(self.ids) or position >= len(tokens) or tokens[self.first:position + 1] != self.ids[:i + 1]:
            return None
        return self.hidden[i]


class KVCache:
    def __init__(self, model: torch.nn.Module, capacity: int):
        self.capacity = capacity
        self.past = StaticCache(config=model.config, max_cache_len=capacity)
        self.tokens: list[int] = []  # ids whose KV is in `past`, position by position
        # the last full pass's kept rows: lean.py writes them, forward.py on transformers' path
        self.rows: Rows | None = None

    def common_prefix(self, ids: list[int]) -> int:
        """How many leading ids of `ids` the cache already holds."""
        n = min(len(ids), len(self.tokens))
        for i in range(n):
            if ids[i] != self.tokens[i]:
                return i
        return n

    @torch.inference_mode()
    def truncate(self, length: int) -> None:
        """Forget everything after `length` tokens (a position move, no copy). In inference mode:
        on CUDA the layers' lengths are made in a pass (lazily), and only there may they change."""
        assert 0 <= length <= len(self.tokens), f"cannot truncate {len(self.tokens)} to {length}"
        self.rewind(range(len(self.past.layers)), length)
        del self.tokens[length:]

    def argument(self, model: torch.nn.Module) -> dict[str, StaticCache]:
        """The model's keyword argument for this cache: `cache` since transformers renamed it,
        `past_key_values` before; an older model given the new name would silently ignore it."""
        return {_cache_keyword(type(model)): self.past}

    def positions(self, index: int = 0) -> int:
        """Positions layer `index` counts as written (may exceed `tokens` after padding; a
        `layerskip` draft runs some layers ahead of the rest until it puts them back)."""
        layer = self.past.layers[index]
        return int(layer.cumulative_length) if layer.is_initialized else 0

    @torch.inference_mode()
    def rewind(self, indices: Sequence[int], length: int) -> None:
        """Put layers `indices`, which have all written as many positions, back to `length` (what
        was written past it is masked, then overwritten: rejected tokens, pads, a `layerskip`
        draft's run ahead). What StaticLayer.crop does in transformers 5.24; the static layers of
        older ones (a GPU machine's own install, say) have no crop. One read of a length (on
        CUDA, one sync), whatever the count of layers."""
        drop = self.positions(indices[0]) - length
        if drop > 0:
            for index in indices:
                layer = self.past.layers[index]
                if layer.is_initialized:
                    layer.cumulative_length.sub_(drop)

    def check_room(self, n: int) -> None:
        if len(self.tokens) + n > self.capacity:
            raise CacheFull(f"{len(self.tokens)} cached + {n} new tokens exceed the cache "
                            f"capacity of {self.capacity}; raise `engine.max_tokens_limit`, which sizes the caches")

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for layer in self.past.layers
                   if layer.is_initialized for t in (layer.keys, layer.values))


def initialize_halves(layer, kv_heads: int, head_dim: int) -> None:
    """Make a static cache layer that no pass has written yet hold `qkernel.KV_DTYPE` (IEEE halves),
    as the passes through specd's attention kernel read it (kernels/half.h); transformers would
    make it the dtype of the first keys written, float32."""
    if not layer.is_initialized:
        shape = (1, kv_heads, 1, head_dim)
        layer.lazy_initialization(*(torch.empty(shape, dtype=qkernel.KV_DTYPE) for _ in range(2)))


@cache
def _cache_keyword(model_class: type) -> str:
    parameters = inspect.signature(model_class.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"
