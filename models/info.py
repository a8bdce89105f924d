"""What `specd models` shows of a spec, read from the files without loading any weights."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

from specd.decoding.loaded import ModelSpec
from specd.models.groups import GROUPS, OLD_GROUPS
from specd.models.integrity import is_converted
from specd.models.specs import cached_folder, cached_hub_folder


@dataclass(frozen=True)
class ModelInfo:
    role: str
    spec: str
    folder: str
    converted: bool
    bytes_on_disk: int
    parameters: int | None
    dtype: str | None


def info(spec: ModelSpec, cache_dir: Path) -> ModelInfo:
    folder = _folder_without_converting(spec, cache_dir)
    present = folder is not None and folder.is_dir()
    weights = sorted(f for f in folder.glob("*.safetensors") if f.name not in (GROUPS, OLD_GROUPS)) if present else []
    converted = present and (spec.kind in ("folder", "hub") or is_converted(folder))
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) if present else 0
    params, dtype = _count_parameters(weights) if weights else (None, None)
    return ModelInfo(spec.role, str(spec), str(folder) if folder else "-", converted, size, params, dtype)


def _folder_without_converting(spec: ModelSpec, cache_dir: Path) -> Path | None:
    if (cached := cached_folder(spec, cache_dir)) is not None:
        return cached
    return Path(spec.ref) if spec.kind == "folder" else cached_hub_folder(spec.ref)


def _count_parameters(files: list[Path]) -> tuple[int, str]:
    """Sum tensor sizes from the safetensors headers (8-byte length, then JSON)."""
    count, dtypes = 0, set()
    for file in files:
        with file.open("rb") as stream:
            (length,) = struct.unpack("<Q", stream.read(8))
            header = json.loads(stream.read(length))
        for name, tensor in header.items():
            if name != "__metadata__":
                n = 1
                for dim in tensor["shape"]:
                    n *= dim
                count += n
                dtypes.add(tensor["dtype"])
    return count, "/".join(sorted(dtypes))
