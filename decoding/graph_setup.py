"""CUDA graphs of forward.py's passes: giving a model its graphs, and capturing at start-up the
passes an engine repeats.

graphs.py knows only how to capture and replay a pass it is handed; forward.py asks it before
every eager pass. What the eager pass is, and which shapes an engine repeats, live here, so the
imports run one way: graph_setup -> forward -> graphs.
"""

from __future__ import annotations

import time

import torch

from specd.decoding import forward, graphs
from specd.decoding.kvcache import KVCache
from specd.decoding.settings import DRAFT_CHUNK


def attach(model: torch.nn.Module, capture: bool = True) -> graphs.PassGraphs:
    """Give `model` static passes of forward.py's eager pass (captured where `capture`)."""
    return graphs.attach(model, lambda cache, ids, keep: forward._forward(model, cache, ids, keep), capture)


def warm(model: torch.nn.Module, capacity: int, shapes: list[tuple[int, int]], pad_id: int) -> None:
    """Capture `shapes` (rows, logits kept) on `model`'s arena for `capacity`, on a scratch cache."""
    if graphs.attached(model) is None:
        return
    cache = KVCache(model, capacity)
    forward.prefill(model, cache, [pad_id] * 8, 8, lambda: False)  # initialises the layers
    with torch.inference_mode():
        for rows, keep in shapes:
            if rows + 8 > capacity:
                continue
            for _ in range(2):  # the second use captures
                forward._forward(model, cache, [pad_id] * rows, keep)
                cache.truncate(8)


def warm_engine(engine) -> str | None:
    """At start-up: capture the passes an engine repeats (its widths, a full prefill chunk, the
    draft's one-token step and prefill chunk); the line for the start-up log, or None without graphs."""
    target = graphs.attached(engine.target.model)
    if target is None:
        return None
    s, started = engine.settings, time.perf_counter()
    widths = [(w, w) for w in range(engine.low_width, engine.width + 1)]
    warm(engine.target.model, s.capacity, widths + [(s.prefill_chunk, 1)], engine.pad_id)
    attached = [target]
    if engine.draft is not None and graphs.attached(engine.draft.model) is not None:
        warm(engine.draft.model, s.draft_capacity, [(1, 1), (DRAFT_CHUNK, 1)], engine.pad_id)
        attached.append(graphs.attached(engine.draft.model))
    return (f"CUDA graphs warmed in {(time.perf_counter() - started) * 1e3:.0f} ms: "
            + "; ".join(f"{name} {g.stats}" for name, g in zip(("target", "draft"), attached)))
