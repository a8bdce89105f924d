"""KV caches per document, least recently used first out, within a memory budget.

Switching between files keeps each one's prompt cached, so returning to a file costs only what
changed in it. A slot holds the target's cache, the draft's, and the document's last completion
(a lookup source, and what typed-through reuse starts from).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import torch

from specd.decoding import qkernel
from specd.decoding.kvcache import KVCache


@dataclass
class Slot:
    target: KVCache
    draft: KVCache | None
    previous: list[int] = field(default_factory=list)

    def forget(self) -> None:
        """Drop what is cached (the tensors stay allocated for reuse)."""
        self.target.truncate(0)
        if self.draft is not None:
            self.draft.truncate(0)
        self.previous = []


def kv_bytes(model: torch.nn.Module, capacity: int) -> int:
    """Bytes a static cache of `capacity` tokens takes for `model` (keys and values)."""
    c = model.config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    kv_heads = getattr(c, "num_key_value_heads", None) or c.num_attention_heads
    lean = getattr(model, "specd_lean", None)
    dtype = qkernel.KV_DTYPE if lean is not None and lean.own_attention else model.dtype  # lean.py: halves
    return 2 * c.num_hidden_layers * kv_heads * head_dim * capacity * torch.finfo(dtype).bits // 8


class CachePool:
    def __init__(self, target: torch.nn.Module, draft: torch.nn.Module | None, capacity: int, draft_capacity: int,
                 budget_bytes: int):
        self.target, self.draft, self.capacity, self.draft_capacity = target, draft, capacity, draft_capacity
        self.slot_bytes = kv_bytes(target, capacity) + (kv_bytes(draft, draft_capacity) if draft else 0)
        self.max_slots = max(1, budget_bytes // self.slot_bytes)
        self.slots: OrderedDict[str, Slot] = OrderedDict()

    def get(self, document: str) -> Slot:
        """The document's slot, made (and the least recently used evicted) when it has none."""
        if document in self.slots:
            self.slots.move_to_end(document)
            return self.slots[document]
        while len(self.slots) >= self.max_slots:
            self.slots.popitem(last=False)
        slot = Slot(KVCache(self.target, self.capacity),
                    KVCache(self.draft, self.draft_capacity) if self.draft is not None else None)
        self.slots[document] = slot
        return slot

    def peek(self, document: str) -> Slot | None:
        """The document's slot if it has one, neither made nor counted as a use."""
        return self.slots.get(document)

    def drop(self, document: str) -> None:
        self.slots.pop(document, None)

    def nbytes(self) -> int:
        return sum(s.target.nbytes() + (s.draft.nbytes() if s.draft is not None else 0) for s in self.slots.values())
