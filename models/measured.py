"""What specd measures once per machine and model and keeps: small JSON records in
`<cache>/measured/`, each under a key that names everything its answer depends on (the model's
weight files, the weight kind, the settings that shape the passes, and this machine: the CPU's
flags, torch's and transformers' versions, specd's kernel library), so a restart skips the
measuring and anything that could change the answer measures again."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from functools import cache
from pathlib import Path

log = logging.getLogger("specd.models")


@cache
def machine() -> dict:
    """The parts of this machine a pass's bits and speed depend on."""
    import torch
    import transformers

    from specd.models.cpu import cpu_flags

    return {"cpu": cpu_flags(), "torch": torch.__version__, "transformers": transformers.__version__,
            "kernels": library_hash()}


def model_stamp(folder: Path, weights: str) -> list:
    """The model's weight files (names, sizes, times) and how they are run."""
    files = [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in sorted(folder.glob("*.safetensors"))]
    return [str(folder), weights, files]


def key_of(parts: dict) -> str:
    return hashlib.sha256(json.dumps({**parts, "machine": machine()},
                                     sort_keys=True, default=str).encode()).hexdigest()[:20]


def recall(cache_dir: Path, name: str, parts: dict) -> dict | None:
    """The record kept for `name` under these `parts` (and this machine), or None."""
    path = cache_dir / "measured" / f"{name}-{key_of(parts)}.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:  # damaged: measured again, and written anew
        log.warning("%s is unreadable (%s); measuring again", path, error)
        return None


def keep(cache_dir: Path, name: str, parts: dict, record: dict) -> None:
    write_atomic(cache_dir / "measured" / f"{name}-{key_of(parts)}.json", json.dumps(record, indent=1).encode())


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` whole or not at all: a process killed while writing leaves no file
    that is read."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.partial-{os.getpid()}")
    partial.write_bytes(data)
    os.replace(partial, path)


@cache
def library_hash() -> str:
    """specd's kernel library, by its bytes: what its passes compute and how it lays blocks out."""
    from specd.decoding import qkernel

    try:
        return hashlib.sha256(qkernel.library_path().read_bytes()).hexdigest()[:16]
    except (qkernel.KernelMissing, OSError):
        return "none"
