"""CUDA graphs for the passes whose shapes repeat: the fixed-width target pass, the draft's one-token
step, full prefill chunks.

On a GPU, an eager pass of the built-in target spends most of its time in Python and kernel
launches, not in the kernels; a CUDA graph replays the whole pass's kernels with one launch. A
graph is bound to the addresses it was captured on, and every document has its own cache; so each
model keeps, per cache capacity, one *arena*: KV tensors the graphs are captured on. The cache a
pass runs on is made resident first: its layers are pointed at the arena's tensors, after the
previous resident's contents are copied back to its own and this one's copied in (a few tens of MB:
microseconds on a GPU, and only when the document changes). Eager passes read and write whatever
the layers point at, so both kinds of pass always see one cache.

A shape (rows, logits kept) is captured on its second use, so one-off shapes (the tail of a
prompt, a draft catching up) stay eager. Each graph is used only where it gives the eager pass's
bits: at capture, the graph's replay and the eager pass run on the same cache and rows, and a
shape whose two disagree stays eager from then on (logged). The width probe (decoding/widths.py)
then runs through the graphs, so it measures what is used. A pass on an empty cache stays eager:
there transformers may take SDPA's causal path rather than the explicit mask the graphs use.

`capture=False` runs the same arena and static-buffer pass without capturing: the logic tested on
a CPU. Attached per model by `attach` (through graph_setup.py, which hands it forward.py's pass and
warms an engine's shapes at start-up); `forward.py` asks `run_captured` before every eager pass.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections import Counter, OrderedDict
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from specd.decoding.kvcache import KVCache

log = logging.getLogger("specd.graphs")

MAX_ROWS = 1024     # longer passes are prefill work that launches amortise anyway
MAX_GRAPHS = 48     # per arena, least recently used out
WARMUP_RUNS = 2     # eager runs on a side stream before capture, as torch.cuda.graphs asks


@dataclass
class GraphStats:
    captured: int = 0
    capture_ms: float = 0.0
    replays: int = 0
    refused: dict[tuple[int, int], str] = field(default_factory=dict)  # shape -> why it stays eager

    def __str__(self) -> str:
        refused = "; ".join(f"{rows}x{keep}: {why}" for (rows, keep), why in self.refused.items())
        return (f"{self.captured} passes captured in {self.capture_ms:.0f} ms, {self.replays} replays"
                + (f"; eager: {refused}" if refused else ""))


class StaticPass:
    """One pass shape over an arena: static input buffers, and the graph where captured."""

    def __init__(self, model: torch.nn.Module, arena: Arena, rows: int, keep: int):
        device = arena.keys[0].device
        self.model, self.arena, self.rows, self.keep = model, arena, rows, keep
        self.ids = torch.zeros((1, rows), dtype=torch.long, device=device)           # [1, S]
        self.offsets = torch.arange(rows, device=device)                              # [S]
        self.key_index = torch.arange(arena.capacity, device=device)                  # [K]
        self.graph: torch.cuda.CUDAGraph | None = None
        self.out: torch.Tensor | None = None

    def run(self) -> torch.Tensor:
        """The pass, from the static buffers: logits [keep, V]. Positions come from the cache's
        own length, on the device, so a replay reads no host values."""
        positions = self.arena.lengths[0] + self.offsets                              # [S]
        mask = (self.key_index[None, :] <= positions[:, None])[None, None]            # [1, 1, S, K]
        cache = self.arena.resident_cache()
        out = self.model(input_ids=self.ids, attention_mask=mask, cache_position=positions,
                         **cache.argument(self.model), use_cache=True, logits_to_keep=self.keep)
        return out.logits[0]

    def capture(self, pool) -> None:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP_RUNS):
                self.run()
                self.arena.rewind(self.rows)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool):
            self.out = self.run()  # recorded, not run: the cache's length does not move
        self.graph = graph

    def __call__(self, ids: list[int]) -> torch.Tensor:
        self.ids.copy_(torch.tensor([ids]), non_blocking=True)
        if self.graph is None:
            return self.run()
        _tick_pre_hooks(self.model)
        self.graph.replay()
        return self.out.clone()  # the next replay overwrites `out`


def _tick_pre_hooks(model: torch.nn.Module) -> None:
    """A replay calls no Python, but it is a pass to whoever counts them with a pre-hook on the
    model (the scheduler's pass count, the engine's): call those hooks as a pass would."""
    for key, hook in model._forward_pre_hooks.items():
        hook(model, (), {}) if key in model._forward_pre_hooks_with_kwargs else hook(model, ())


class Arena:
    """The KV tensors one cache capacity's graphs are captured on, lent to one cache at a time."""

    def __init__(self, like: KVCache):
        layers = like.past.layers
        self.capacity = like.capacity
        self.keys = [torch.empty_like(layer.keys) for layer in layers]
        self.values = [torch.empty_like(layer.values) for layer in layers]
        self.lengths = [torch.zeros_like(layer.cumulative_length) for layer in layers]
        self.owner: weakref.ref[KVCache] | None = None
        self.own: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []  # the resident's own tensors
        self.passes: OrderedDict[tuple[int, int], StaticPass] = OrderedDict()
        self.seen: Counter[tuple[int, int]] = Counter()

    def resident_cache(self) -> KVCache:
        cache = self.owner() if self.owner is not None else None
        assert cache is not None, "a static pass runs on the resident cache"
        return cache

    def make_resident(self, cache: KVCache) -> None:
        """Point `cache`'s layers at the arena, the previous resident's back at its own tensors."""
        if self.owner is not None and self.owner() is cache:
            return
        self.release()
        self.own = [(layer.keys, layer.values, layer.cumulative_length) for layer in cache.past.layers]
        for layer, k, v, n in zip(cache.past.layers, self.keys, self.values, self.lengths):
            k.copy_(layer.keys), v.copy_(layer.values), n.copy_(layer.cumulative_length)
            layer.keys, layer.values, layer.cumulative_length = k, v, n
        self.owner = weakref.ref(cache)

    @torch.inference_mode()  # the tensors were made in passes
    def release(self) -> None:
        """Give the resident cache back its own tensors, with the arena's contents."""
        current = self.owner() if self.owner is not None else None
        if current is not None:
            for layer, own in zip(current.past.layers, self.own):
                for arena_t, own_t in zip((layer.keys, layer.values, layer.cumulative_length), own):
                    own_t.copy_(arena_t)
                layer.keys, layer.values, layer.cumulative_length = own
        self.owner, self.own = None, []

    def rewind(self, rows: int) -> None:
        for n in self.lengths:
            n.sub_(rows)


class PassGraphs:
    """One model's arenas and captured passes. `eager(cache, ids, keep)` is the plain pass that
    each capture is checked against."""

    def __init__(self, model: torch.nn.Module, eager: Callable[[KVCache, list[int], int], torch.Tensor],
                 capture: bool = True):
        self.model, self.eager, self.capture = model, eager, capture
        self.arenas: dict[int, Arena] = {}
        self.pool = torch.cuda.graph_pool_handle() if capture else None
        self.stats = GraphStats()
        self.checking = False

    def run(self, cache: KVCache, ids: list[int], keep: int) -> torch.Tensor | None:
        """The pass from a static pass where this shape has one, else None (run it eagerly)."""
        shape = (len(ids), keep)
        if self.checking or not _eligible(cache, shape) or shape in self.stats.refused:
            return None
        arena = self.arenas.get(cache.capacity)
        if arena is None:
            arena = self.arenas[cache.capacity] = Arena(cache)
        arena.make_resident(cache)
        static = arena.passes.get(shape)
        if static is None:
            arena.seen[shape] += 1
            if arena.seen[shape] < 2:
                return None
            return self._add(arena, cache, ids, shape)
        arena.passes.move_to_end(shape)
        self.stats.replays += static.graph is not None
        return static(ids)

    def _add(self, arena: Arena, cache: KVCache, ids: list[int], shape: tuple[int, int]) -> torch.Tensor:
        """Capture `shape`, check its replay against the eager pass on the same cache and rows,
        and return the eager pass's logits (so this pass is right whatever the check finds)."""
        started = time.perf_counter()
        static = StaticPass(self.model, arena, *shape)
        if self.capture:
            try:
                static.capture(self.pool)
            except RuntimeError as error:  # an op that cannot be captured (a host sync, say)
                torch.cuda.synchronize()
                return self._refuse(cache, ids, shape, f"capture failed: {str(error).splitlines()[0][:200]}")
        got = static(ids)
        arena.rewind(shape[0])
        self.checking = True
        try:
            want = self.eager(cache, ids, shape[1])
        finally:
            self.checking = False
        if not torch.equal(got, want):
            self._refuse(None, ids, shape, "its replay's bits differ from the eager pass's")
            return want
        arena.passes[shape] = static
        if len(arena.passes) > MAX_GRAPHS:
            arena.passes.popitem(last=False)
        self.stats.captured += 1
        self.stats.capture_ms += (time.perf_counter() - started) * 1e3
        return want


    def _refuse(self, cache: KVCache | None, ids: list[int], shape: tuple[int, int], why: str):
        """Keep `shape` eager from now on; with a cache, run this pass eagerly."""
        self.stats.refused[shape] = why
        log.warning("pass %dx%d stays eager: %s", shape[0], shape[1], why)
        if cache is None:
            return None
        self.checking = True
        try:
            return self.eager(cache, ids, shape[1])
        finally:
            self.checking = False


def _eligible(cache: KVCache, shape: tuple[int, int]) -> bool:
    layer = cache.past.layers[0]
    # An empty cache (or one not yet initialised) takes the eager path: see the module's note.
    return shape[0] <= MAX_ROWS and layer.is_initialized and len(cache.tokens) > 0


def attach(model: torch.nn.Module, eager: Callable[[KVCache, list[int], int], torch.Tensor],
           capture: bool = True) -> PassGraphs:
    """Give `model` static passes of `eager` (captured where `capture`): graph_setup.attach hands
    it forward.py's pass."""
    graphs = PassGraphs(model, eager, capture)
    model._specd_graphs = graphs
    return graphs


def detach(model: torch.nn.Module) -> None:
    """Back to eager passes only (the arenas' residents keep their tensors where they point)."""
    graphs = attached(model)
    for arena in graphs.arenas.values() if graphs else ():
        arena.release()
    model.__dict__.pop("_specd_graphs", None)


@contextmanager
def suspended(model: torch.nn.Module):
    """Passes run eagerly inside (a benchmark's one-off shapes, kept one-off)."""
    graphs = attached(model)
    if graphs is None:
        yield
        return
    was, graphs.checking = graphs.checking, True
    try:
        yield
    finally:
        graphs.checking = was


def attached(model: torch.nn.Module) -> PassGraphs | None:
    return getattr(model, "_specd_graphs", None)


def run_captured(model: torch.nn.Module, cache: KVCache, ids: list[int], keep: int) -> torch.Tensor | None:
    """The hook `forward.py` calls: logits from a static pass, or None where the pass runs eagerly."""
    graphs = attached(model)
    return None if graphs is None else graphs.run(cache, ids, keep)
