"""Measuring the cost curve (decoding/curve.py) on the loaded models: a target pass and a draft
step at every width from 1 to the widest.

Each pass runs the way decoding runs it (`step` and `draft_step` of decoding/forward.py, over a
static cache of the engine's capacity), with the cache holding a typical prompt's length. As in the
width probe, the keys and values past a short real prompt are random: what a pass costs depends
on its shapes, not on the values. Widths take turns round by round, so a slow minute on a shared
machine falls on several widths rather than on one; each width is warmed by one untimed pass, and
its time is the median of a few, fewer where a pass is slow, so that the whole takes some tens of
seconds on a 2-core CPU (models/curves.py keeps it, so it runs once per machine). On a CPU it also
notes the share of its threads' time the process got: where other work held the cores (half, on
this 2-core machine under another test run), every pass took several times as long, and the
widths' costs came out nearly flat.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

from specd.decoding.curve import CostCurve
from specd.decoding.forward import draft_step, prefill, step
from specd.decoding.kvcache import KVCache
from specd.decoding.settings import EngineSettings, window_capacity
from specd.decoding.widths import PROBE_PROMPT, fill_random

CACHED = 900          # tokens the target's cache holds while timed: a typical prompt (less where it is smaller)
REPEATS = (2, 5)      # timed passes per width: at least, at most
WIDTH_BUDGET_MS = 800 # timed passes per width stop short of the most once they would take longer than this


def measure_curve(target: torch.nn.Module, draft: torch.nn.Module | None, settings: EngineSettings,
                  vocab: int) -> CostCurve:
    """Milliseconds per target pass and per draft step, at widths 1..settings.width, on caches of
    the engine's capacities (the draft's holding its window: decoding/draft_model.py)."""
    started, cpu_started, widest = time.perf_counter(), time.process_time(), settings.width
    g = torch.Generator().manual_seed(2)
    cache = _cache(target, settings.capacity, min(CACHED, settings.capacity - widest), vocab, g)
    # every timed pass is exactly as wide as its rows: nothing is padded, so no pad token is needed
    target_ms = time_widths(lambda rows: step(target, cache, rows, len(rows), 0), cache, widest, vocab, g)
    draft_ms: list[float] = []
    if draft is not None:
        window = min(window_capacity(settings.draft_context_tokens), settings.draft_capacity - widest)
        draft_cache = _cache(draft, settings.draft_capacity, window, vocab, g)
        draft_ms = time_widths(lambda rows: draft_step(draft, draft_cache, rows), draft_cache, widest, vocab, g)
    wall = time.perf_counter() - started
    share = 1.0
    if next(target.parameters()).device.type == "cpu":
        share = (time.process_time() - cpu_started) / (wall * busy_threads(target))
    return CostCurve(tuple(target_ms), tuple(draft_ms), round(wall, 2), round(min(share, 1.0), 3))


def busy_threads(model: torch.nn.Module) -> int:
    """The threads a CPU pass keeps busy: torch's, and with block weights specd's kernel pool
    (models/load.py gives it the cores and torch one thread; its threads spin between calls, so
    on an idle machine the process gets all of their time). Counting torch's alone made the share
    of a gguf model twice what it got, and a curve measured beside a compiler was kept."""
    from specd.decoding import qkernel
    from specd.decoding.blocks import has_blocks

    n = torch.get_num_threads()
    if has_blocks(model):
        n = max(n, qkernel.threads_in_use())
    return n


def _cache(model: torch.nn.Module, capacity: int, length: int, vocab: int, g: torch.Generator) -> KVCache:
    """A cache holding `length` positions: a short real prompt, then random keys and values."""
    cache = KVCache(model, capacity)
    prompt = torch.randint(0, vocab, (min(PROBE_PROMPT, length),), generator=g).tolist()
    prefill(model, cache, prompt, len(prompt), lambda: False)
    fill_random(cache, length, g)
    return cache


def time_widths(run: Callable[[list[int]], torch.Tensor], cache: KVCache, widest: int, vocab: int,
                g: torch.Generator) -> list[float]:
    """The median milliseconds of `run` on rows of each width 1..widest, the cache as it was after each."""
    length = len(cache.tokens)
    rows = torch.randint(0, vocab, (widest,), generator=g).tolist()
    timed: list[list[float]] = [[] for _ in range(widest)]
    wanted = []
    for width in range(1, widest + 1):
        warm = _timed(run, rows[:width], cache, length)
        wanted.append(max(REPEATS[0], min(REPEATS[1], int(WIDTH_BUDGET_MS / warm))))
    for round_ in range(REPEATS[1]):
        for width in range(1, widest + 1):
            if round_ < wanted[width - 1]:
                timed[width - 1].append(_timed(run, rows[:width], cache, length))
    return [round(statistics.median(t), 2) for t in timed]


def _timed(run: Callable[[list[int]], torch.Tensor], rows: list[int], cache: KVCache, length: int) -> float:
    t = time.perf_counter()
    logits = run(rows)
    if logits.device.type == "cuda":
        torch.cuda.synchronize(logits.device)  # a GPU returns before its kernels finish
    ms = (time.perf_counter() - t) * 1e3
    cache.truncate(length)
    return max(ms, 1e-3)
