"""The block weights in 2 MB pages: what lets a decoding pass read them at the memory's pace.

A width-1 pass streams every weight once, 934 MB for the built-in target. Held in the 4 KB pages
of a mapped file, the kernels read them at 16-17 GB/s on the 2-core Xeon, where a plain sum reads
memory at 25-33: each 4 KB page is a TLB miss and a page walk, and the hardware prefetchers stop
at every page's end. Copied once into anonymous memory advised MADV_HUGEPAGE (Linux's transparent
huge pages), the same kernels read them at ~21 GB/s: the target's width-1 pass went from 70.8 to
53.0 ms (`specd bench --profile` with SPECD_HUGE_PAGES=0, then without, one script; README).

The copy costs a start a few tenths of a second and no memory: the mapped file's pages count as
resident as much as the copy does, and only the copy is kept. Where the kernel has transparent
huge pages off (`never`), or is not Linux, the weights stay mapped as they were. The bits of every
matmul are the same either way; only where the bytes lie changes.
`SPECD_HUGE_PAGES=0` keeps them mapped (to compare, as `SPECD_KERNELS` lowers the kernels).
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import os
from pathlib import Path

import torch

log = logging.getLogger("specd.models")

HUGE = 2 << 20      # bytes in an x86-64 huge page
ALIGN = 64          # each tensor starts on a cache line
THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def wanted() -> bool:
    """Whether weights go into huge pages here: asked (not SPECD_HUGE_PAGES=0) and possible (Linux
    with transparent huge pages on for `madvise` or `always`)."""
    if os.environ.get("SPECD_HUGE_PAGES", "1") == "0" or not hasattr(mmap, "MADV_HUGEPAGE"):
        return False
    try:
        return "[never]" not in THP.read_text()
    except OSError:
        return False


def in_huge_pages(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """`tensors` (CPU, any dtype) copied into one region advised MADV_HUGEPAGE, in order; each
    distinct tensor once (a tied output layer keeps sharing the embedding's). The same tensors
    where huge pages are not wanted or the region cannot be made."""
    if not tensors or not wanted():
        return tensors
    distinct = list({id(t): t for t in tensors}.values())
    offsets, size = [], 0
    for t in distinct:
        offsets.append(size)
        size += -(-t.numel() * t.element_size() // ALIGN) * ALIGN
    size = -(-size // HUGE) * HUGE   # whole huge pages: a shorter advised range gets none
    try:
        region = mmap.mmap(-1, size + HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        start = _aligned_start(region)
        region.madvise(mmap.MADV_HUGEPAGE, start, size)
    except (OSError, ValueError) as error:
        log.info("weights stay in 4 KB pages: %s", error)
        return tensors
    placed = {}
    for t, offset in zip(distinct, offsets):
        nbytes = t.numel() * t.element_size()
        copy = torch.frombuffer(region, dtype=torch.uint8, count=nbytes, offset=start + offset)
        copy.copy_(t.contiguous().view(-1).view(torch.uint8))
        placed[id(t)] = copy.view(t.dtype).view(t.shape)
    _let_go(distinct)
    return [placed[id(t)] for t in tensors]


def _let_go(copied: list[torch.Tensor]) -> None:
    """Take the pages of `copied` that a file backs out of this process (madvise DONTNEED: the
    file's cached pages stay, for the next start). safetensors maps a whole file as one storage,
    so a tensor of it left mapped (an untied embedding) keeps the mapping, and every page the copy
    read in, resident: 1 GB of the built-in target's laid-out file. Pages of anonymous memory are
    left alone: DONTNEED would zero them, and a caller may still read its tensors."""
    files = _file_mappings()
    page = mmap.PAGESIZE
    madvise = ctypes.CDLL(None, use_errno=True).madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    for t in copied:
        start = t.data_ptr()
        end = start + t.numel() * t.element_size()
        first, last = -(-start // page) * page, end // page * page   # whole pages of `t` alone
        if last > first and any(low <= start and end <= high for low, high in files):
            madvise(first, last - first, mmap.MADV_DONTNEED)


def _file_mappings() -> list[tuple[int, int]]:
    """[start, end) of this process's mappings of files (/proc/self/maps lines naming a path)."""
    try:
        lines = Path("/proc/self/maps").read_text().splitlines()
    except OSError:
        return []
    spans = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 6 and fields[5].startswith("/"):
            low, high = fields[0].split("-")
            spans.append((int(low, 16), int(high, 16)))
    return spans


def _aligned_start(region: mmap.mmap) -> int:
    """The offset in `region` of its first 2 MB boundary (huge pages map only whole aligned 2 MB)."""
    address = ctypes.addressof(ctypes.c_char.from_buffer(region))
    return -address % HUGE
