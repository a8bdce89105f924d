"""The GGUF blocks in the layout the kernels in use read fastest, kept on disk once made.

Laying out the built-in target's 1.1 GB of blocks in place (qkernel.relayout: the AVX2 body's
paired layout) took 0.9-2.8 s at every start: the blocks map the file privately, so each 4 KB page
is copied at its first write, one page fault at a time. The laid-out blocks are written beside the
quantized weights the first time and mapped from that file after: a start then only maps it, and
the first pass reads its pages in (read faults map 16 pages at once; 0.07 s for the 1.1 GB here).

The file is keyed by what its bytes depend on: the blocks file it was made from (name, size,
time), the layout chosen for each type, and specd's kernel library (whose code defines the
layouts). Only the newest file per model is kept: a rebuilt library does not pile up gigabytes.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path

import torch

log = logging.getLogger("specd.models")

SUFFIX = "laid-out.safetensors"


def laid_out(blocks: dict[str, tuple[int, torch.Tensor]], source: Path, cache_dir: Path,
             say: Callable[[str], None] = log.info) -> dict[str, tuple[int, torch.Tensor]]:
    """`blocks` (type, raw per module, read from `source`) as the kernels in use read them: the
    same weights, the same bits from every matmul. Read from the cache where it holds them, else
    laid out in place and kept."""
    from specd.decoding import qkernel

    wanted = {name: qkernel.layout(kind) for name, (kind, _) in blocks.items()}
    if all(wanted[name] == kind for name, (kind, _) in blocks.items()):
        return blocks
    path = cache_dir / "quantized" / f"{source.parent.name}-{_key(source, wanted)}-{SUFFIX}"
    if (kept := _read(path)) is not None and {n: k for n, (k, _) in kept.items()} == wanted:
        return kept
    say(f"laying out {source.parent.name}'s blocks for specd's {qkernel.level()} kernels; this happens once")
    made = {name: (wanted[name], qkernel.relayout(kind, raw.contiguous(), wanted[name]))
            for name, (kind, raw) in blocks.items()}
    _keep(path, made, source.parent.name)
    return made


def _key(source: Path, wanted: dict[str, int]) -> str:
    from specd.models.measured import library_hash

    stat = source.stat()
    parts = [source.name, stat.st_size, stat.st_mtime_ns, sorted(wanted.items()), library_hash()]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def _read(path: Path) -> dict[str, tuple[int, torch.Tensor]] | None:
    """The file's blocks, mapped (not copied: safetensors maps the file, and nothing writes to
    them), with the type kept in its metadata; None where it is missing or damaged."""
    if not path.is_file():
        return None
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), "pt") as f:
            kinds = f.metadata() or {}
            return {name: (int(kinds[name]), f.get_tensor(name)) for name in f.keys()}
    except (SafetensorError, OSError, KeyError, ValueError) as error:
        log.warning("%s is unreadable (%s); laying the blocks out again", path, error)
        return None


def _keep(path: Path, blocks: dict[str, tuple[int, torch.Tensor]], model: str) -> None:
    """Write the file whole (models/quantize.py's write_cached) and remove this model's older
    ones. A cache that cannot be written costs the next start the layout again, nothing else."""
    from specd.models.quantize import write_cached

    try:
        write_cached(path, {name: raw for name, (_, raw) in blocks.items()},
                     metadata={name: str(kind) for name, (kind, _) in blocks.items()})
    except OSError as error:
        log.warning("cannot keep the laid-out blocks in %s (%s); the next start lays them out again", path, error)
        return
    for old in path.parent.glob(f"{model}-{'?' * 16}-{SUFFIX}"):
        if old != path:
            old.unlink(missing_ok=True)
