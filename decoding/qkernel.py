"""specd's CPU kernels (decoding/kernels/*.c), loaded with ctypes: matmuls with weights in GGUF's
own blocks (Q4_K, Q6_K, Q8_0) and activations quantized to int8 in blocks of 32, as llama.cpp
computes them, rows of such weights (an embedding's lookup), and attention over a static
key/value cache for the passes those models run (`attend`).

Why our own: on an x86 CPU without avx512_bf16 torch's int4 kernel is compute-bound at one row
(about half the memory bandwidth a pass could use) and slower per row than this at a prefill's
128; these keep a pass near the time its weights take to read, on AVX2 and AVX-512 alike.

Exactness: each output value is one dot product, integer inside each block of 32 and float across
blocks in one fixed order, computed whole by one thread; so a row's bits depend on that row alone,
never on the rows beside it or the thread count (tests/decoding/test_qkernel.py). The AVX2,
AVX-VNNI and AVX-512 code compute the portable code's very bits (the same float operations in the
same order), so the choice between them, made at run time from the CPU's flags, changes speed only.
Attention likewise: a row's softmax runs over blocks of 32 keys counted from position 0, whatever
the pass's width or the cache's length, each (row, query head) computed whole by one thread
(tests/decoding/test_attend.py); the cache it reads holds IEEE halves (kernels/half.h).
"""

from __future__ import annotations

import ctypes
import threading
from functools import cache
from pathlib import Path

import torch

Q8_0, Q4_K, Q6_K = 8, 12, 14          # GGML's type numbers
Q4_K_PAIRED, Q6_K_PAIRED = 112, 114   # the same blocks in the layout AVX2 reads fastest (kernels/layout.c)
ATTEND_EVENT = "specd::attend"        # `attend` under torch's profiler (decoding/profile.py)
BLOCK = {Q8_0: (32, 34), Q4_K: (256, 144), Q6_K: (256, 210),
         Q4_K_PAIRED: (256, 144), Q6_K_PAIRED: (256, 210)}  # values and bytes per block
NAMES = {Q8_0: "Q8_0", Q4_K: "Q4_K", Q6_K: "Q6_K", Q4_K_PAIRED: "Q4_K paired", Q6_K_PAIRED: "Q6_K paired"}


class KernelMissing(RuntimeError):
    """The library was not built here (no C compiler at install time)."""


def library_path() -> Path:
    found = sorted(Path(__file__).parent.glob("_kernels*.so"))
    if not found:
        raise KernelMissing("specd's CPU kernels were not built (no C compiler when specd was installed); "
                            "reinstall with gcc or clang present, or set models.quantize = \"int4\"")
    return found[0]


@cache
def library() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(library_path()))
    p, i = ctypes.c_void_p, ctypes.c_int
    lib.specd_matmul.argtypes = [i, p, i, i, p, i, p, p, p]
    lib.specd_rows.argtypes = [i, p, i, p, i, p]
    lib.specd_threads.argtypes = [i]
    lib.pool_threads.argtypes = []
    lib.specd_kernel_level.argtypes = [i]
    lib.specd_kernel_best.argtypes = []
    lib.specd_act_bytes.argtypes = [i, i]
    lib.specd_layout.argtypes = [i]
    lib.specd_relayout.argtypes = [i, i, p, ctypes.c_size_t]
    lib.specd_attend.argtypes = [p, i, i, i, i, p, p, i, i, ctypes.c_float, p]
    lib.specd_halves.argtypes = [p, ctypes.c_size_t, p]
    lib.specd_threads(torch.get_num_threads())
    _force_from_environment(lib)
    return lib


def _force_from_environment(lib: ctypes.CDLL) -> None:
    """$SPECD_KERNELS (portable, avx2, avxvnni) runs lower kernels than the CPU has, as ATEN_CPU_CAPABILITY
    does for torch: how an AVX-512 machine measures what an AVX2 laptop gets. Never higher."""
    import os

    wanted = os.environ.get("SPECD_KERNELS", "")
    if not wanted:
        return
    if wanted not in LEVELS:
        raise ValueError(f"SPECD_KERNELS={wanted!r}: expected one of {', '.join(LEVELS)}")
    lib.specd_kernel_level(LEVELS.index(wanted))


def available() -> bool:
    try:
        library()
    except (KernelMissing, OSError):
        return False
    return True


LEVELS = ("portable", "avx2", "avxvnni", "avx512")


def level(force: str | None = None) -> str:
    """Which kernels run: "portable", "avx2", "avxvnni" or "avx512" (the best this CPU has unless
    forced; `force` chooses a lower one, the highest this CPU runs at or below it, for tests and
    comparisons: they all compute the same bits)."""
    return LEVELS[library().specd_kernel_level(-1 if force is None else LEVELS.index(force))]


def best_level() -> str:
    """The best kernels this CPU runs, whatever is forced now."""
    return LEVELS[library().specd_kernel_best()]


def threads(n: int) -> int:
    """Use `n` threads for the matmuls from now on; returns how many are in use."""
    return library().specd_threads(n)


def threads_in_use() -> int:
    """The threads the matmuls run on now (`threads` sets them)."""
    return library().pool_threads()


def row_bytes(kind: int, k: int) -> int:
    values, size = BLOCK[kind]
    assert k % values == 0, f"{NAMES[kind]} rows hold a multiple of {values} values, not {k}"
    return k // values * size


def layout(kind: int) -> int:
    """The type `kind`'s blocks are best held as for the kernels in use (`kind` itself, or the paired
    layout of a K-quant where the kernels are AVX2's: one multiply fewer per 64 weights)."""
    return library().specd_layout(kind)


def relayout(kind: int, blocks: torch.Tensor, to: int) -> torch.Tensor:
    """`blocks` of `kind` rewritten in place as `to` (a layout of the same weights: `layout(kind)`,
    or back); returns them. The same numbers, so every matmul gives the same bits."""
    assert blocks.dtype == torch.uint8 and blocks.is_contiguous(), "contiguous uint8 blocks"
    count = blocks.numel() // BLOCK[kind][1]
    assert library().specd_relayout(kind, to, blocks.data_ptr(), count) == 0, \
        f"no layout from {NAMES[kind]} to {NAMES[to]}"
    return blocks


def matmul(kind: int, blocks: torch.Tensor, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [..., K] float32 @ W.T (+ bias [N] float32), W [N, K] as `blocks` [N, row_bytes] uint8 ->
    [..., N] float32. The bias is added in the kernel, one float add per value as `y + bias` does:
    a decoding pass makes ~200 of these calls, and each torch op between them costs microseconds."""
    n, k = blocks.shape[0], x.shape[-1]
    assert blocks.dtype == torch.uint8 and blocks.shape[1] == row_bytes(kind, k), \
        f"{tuple(blocks.shape)} {NAMES[kind]} blocks for rows of {k} values"
    assert bias is None or (bias.dtype == torch.float32 and bias.shape == (n,) and bias.is_contiguous()), \
        f"a float32 bias of {n} values"
    return checked_matmul(kind, blocks, x, bias)


def checked_matmul(kind: int, blocks: torch.Tensor, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """`matmul` for blocks and a bias checked once beforehand (BlockLinear checks them when made)."""
    n, k = blocks.shape[0], x.shape[-1]
    rows = x.reshape(-1, k)
    if rows.dtype != torch.float32 or not rows.is_contiguous():
        rows = rows.to(torch.float32).contiguous()
    m = rows.shape[0]
    y = torch.empty(m, n, dtype=torch.float32)
    lib = library()
    rc = lib.specd_matmul(kind, blocks.data_ptr(), n, k, rows.data_ptr(), m, y.data_ptr(),
                          _scratch(m * lib.specd_act_bytes(kind, k)), None if bias is None else bias.data_ptr())
    assert rc == 0, f"the kernel refused {NAMES[kind]} [{n}, {k}] x [{m}, {k}]"
    return y.reshape(*x.shape[:-1], n)


_local = threading.local()  # each thread's scratch for the quantized activations, grown as needed


def _scratch(size: int) -> int:
    buffer = getattr(_local, "scratch", None)
    if buffer is None or buffer.numel() < size:
        buffer = _local.scratch = torch.empty(max(size, 1 << 16), dtype=torch.uint8)
    return buffer.data_ptr()


KV_DTYPE = torch.float16  # what the cache of a pass through `attend` holds (kernels/half.h says why)


def halves(x: torch.Tensor) -> torch.Tensor:
    """float32 x rounded to `KV_DTYPE` as the kernels write the cache (kernels/half.h), so the torch
    ops' passes (decoding/lean.py) write the bits a layer's one call writes."""
    assert x.dtype == torch.float32, "float32 values"
    x = x.contiguous()
    out = torch.empty(x.shape, dtype=KV_DTYPE)
    library().specd_halves(x.data_ptr(), x.numel(), out.data_ptr())
    return out


def attend(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, start: int, scale: float) -> torch.Tensor:
    """Attention of q [S, H, D] (row r at position start + r) over a static cache layer's keys and
    values [H_kv, capacity, D], positions 0..start + r written, head h reading key/value head
    h // (H / H_kv); float32 queries, `KV_DTYPE` keys and values, contiguous -> [S, H * D] float32.
    Each row computed alone (kernels/attend.h): its bits never depend on the pass's width or the
    cache's capacity."""
    s, heads, d = q.shape
    kv_heads, capacity, _ = keys.shape
    assert q.dtype == torch.float32, "float32 queries"
    assert keys.dtype == values.dtype == KV_DTYPE, f"{KV_DTYPE} keys and values"
    assert q.is_contiguous() and keys.is_contiguous() and values.is_contiguous(), "contiguous tensors"
    assert values.shape == keys.shape and keys.shape[2] == d, f"keys and values [H_kv, capacity, {d}]"
    assert heads % kv_heads == 0 and d % 8 == 0 and d <= 256, f"{heads} heads on {kv_heads}, head size {d}"
    assert 0 <= start and start + s <= capacity, f"positions {start}..{start + s - 1} within {capacity}"
    out = torch.empty(s, heads * d, dtype=torch.float32)
    call = lambda: library().specd_attend(q.data_ptr(), s, heads, kv_heads, d, keys.data_ptr(),  # noqa: E731
                                          values.data_ptr(), capacity, start, scale, out.data_ptr())
    if torch.autograd._profiler_enabled():          # torch's profiler cannot see into a ctypes call: name it
        with torch.profiler.record_function(ATTEND_EVENT):
            rc = call()
    else:
        rc = call()
    assert rc == 0, "the attention kernel refused its shapes"
    return out


def rows(kind: int, blocks: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """The float32 rows `ids` of W [N, K] held as `blocks` -> [*ids.shape, K]."""
    k = blocks.shape[1] // BLOCK[kind][1] * BLOCK[kind][0]
    flat = ids.reshape(-1).to(torch.int64).contiguous()
    assert bool(((flat >= 0) & (flat < blocks.shape[0])).all()), "token ids within the vocabulary"
    out = torch.empty(flat.numel(), k, dtype=torch.float32)
    rc = library().specd_rows(kind, blocks.data_ptr(), k, flat.data_ptr(), flat.numel(), out.data_ptr())
    assert rc == 0, f"the kernel refused {NAMES[kind]} rows of {k}"
    return out.reshape(*ids.shape, k)
