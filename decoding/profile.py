"""`specd bench --profile`: where a pass's milliseconds go, by part, beside the pass's floor.

For a loaded model and a cache holding ~1000 tokens, each width is timed plainly (the median of a
few passes: what a request pays) and once more under torch's profiler, whose op times are sorted
into parts; the matmuls are timed by hooks on the linear layers, since specd's kernels are called
through ctypes and torch's profiler does not see inside them; layers run in one kernel call each
(decoding/fused.py) are timed by the kernel's own clock, per phase. Python is what the plain time
leaves after the parts. The floor is the bytes of weights one pass reads (every linear layer's, the
output layer's included) over the memory bandwidth measured in the same run: no pass can be
faster than reading its weights once.
"""

from __future__ import annotations

import time
from collections import defaultdict

import torch

from specd.decoding import fused
from specd.decoding.blocks import BlockLinear
from specd.decoding.forward import prefill, step
from specd.decoding.kvcache import KVCache
from specd.decoding.qkernel import ATTEND_EVENT
from specd.decoding.qlinear import Int4Linear, Int8Linear
from specd.decoding.verify import accept_greedy

WIDTHS = (1, 4, 8, 16)
CACHED = 1000
PARTS = {  # torch op -> part; what is not named here is "other ops"
    "aten::scaled_dot_product_attention": "attention", ATTEND_EVENT: "attention",
    "aten::rms_norm": "norms, rotary", "aten::pow": "norms, rotary", "aten::mean": "norms, rotary",
    "aten::rsqrt": "norms, rotary", "aten::cos": "norms, rotary", "aten::sin": "norms, rotary",
    "aten::neg": "norms, rotary",
    "aten::index_copy_": "cache writes",
    "aten::argmax": "sampling", "aten::max": "sampling",
}
# ops that only run inside the linear layers (the hooks count them there): torch's kernels' own
INSIDE_MATMULS = {"aten::_weight_int4pack_mm_for_cpu", "aten::_weight_int8pack_mm", "aten::linear", "aten::addmm",
                  "aten::mm", "aten::matmul"}
ORDER = ("matmuls", "attention", "norms, rotary", "cache writes", "sampling", "other ops", "python")


def bandwidth_gbs(x: torch.Tensor, repeats: int = 5) -> float:
    """GB/s of reading `x` (float32, far larger than the caches), with every core. The caller holds
    it in memory like the weights' (models/hugepages.py): in 2 MB pages a read is faster (33 against
    25 GB/s on the 2-core Xeon), and a floor must be what the weights' own pages allow."""
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        x.sum()
        best = min(best, time.perf_counter() - t)
    return x.numel() * 4 / best / 1e9


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of the weights a pass reads: every linear layer's tensors (the embedding reads a row)."""
    total = 0
    for module in model.modules():
        if module is model.get_input_embeddings():
            continue
        if _is_matmul(module):
            total += sum(t.numel() * t.element_size() for t in [*module.parameters(False), *module.buffers(False)])
    return total


def _is_matmul(module: torch.nn.Module) -> bool:
    return isinstance(module, (torch.nn.Linear, BlockLinear, Int4Linear, Int8Linear))


def profile_model(model: torch.nn.Module, vocab: int, pad_id: int, capacity: int, gbs: float,
                  widths: tuple[int, ...] = WIDTHS, repeats: int = 5) -> dict:
    """ms per pass and by part at each width, after CACHED tokens, beside the floor."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (CACHED + max(widths),), generator=g).tolist()
    cache = KVCache(model, capacity)
    prefill(model, cache, ids[:CACHED], 128, lambda: False)
    floor_ms = weight_bytes(model) / (gbs * 1e9) * 1e3
    out = {"weight_mb": weight_bytes(model) / 2**20, "floor_ms": floor_ms, "widths": {}}
    for width in widths:
        rows = ids[CACHED:CACHED + width]
        run = lambda rows=rows: _pass(model, cache, rows, pad_id)  # noqa: E731
        plain = _median(run, repeats)
        parts = _parts(model, run)
        parts["python"] = max(0.0, plain - sum(parts.values()))
        out["widths"][width] = {"ms": plain, "x_floor": plain / floor_ms, "parts": parts}
    return out


def _pass(model, cache: KVCache, rows: list[int], pad_id: int) -> None:
    logits = step(model, cache, rows, len(rows), pad_id)
    accept_greedy(logits, rows[1:])
    cache.truncate(CACHED)


def _median(run, repeats: int) -> float:
    run()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        run()
        times.append((time.perf_counter() - t) * 1e3)
    return sorted(times)[len(times) // 2]


def _parts(model: torch.nn.Module, run) -> dict[str, float]:
    """One pass under the profiler: ms per part (without Python, which the caller derives)."""
    matmul_ms = [0.0]
    started: dict[int, float] = {}

    def before(module, args):
        started[id(module)] = time.perf_counter()

    def after(module, args, output):
        matmul_ms[0] += (time.perf_counter() - started.pop(id(module))) * 1e3

    hooks = [h for m in model.modules() if _is_matmul(m)
             for h in (m.register_forward_pre_hook(before), m.register_forward_hook(after))]
    layers = getattr(getattr(model, "specd_lean", None), "fused", None) is not None
    try:
        if layers:
            fused.timing(True)     # the layers run in C (decoding/fused.py): their own clock, per phase
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            run()
    finally:
        in_layers = fused.timing(False) if layers else {}
        for h in hooks:
            h.remove()
    parts: dict[str, float] = defaultdict(float, in_layers)
    parts["matmuls"] += matmul_ms[0]
    for event in prof.key_averages():
        part = PARTS.get(event.key, "other ops")
        ms = (event.cpu_time_total if part == "attention" else event.self_cpu_time_total) / 1e3
        if event.key in INSIDE_MATMULS or _under_attention(event.key):
            continue
        parts[part] += ms
    return {part: parts.get(part, 0.0) for part in ORDER if part != "python"}


def _under_attention(key: str) -> bool:
    """The ops SDPA runs inside itself (its total already counts them)."""
    return "flash_attention" in key or key == "aten::_scaled_dot_product_attention_math"
