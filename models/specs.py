"""Model specs: what the config's text names, and where its converted folder lives in the cache.

A spec is `builtin` (the built-in model of its role), `builtin:<name>`, a local folder, a GGUF file,
or a Hugging Face id (loaded from the local hub cache; nothing is fetched from the hub unless it
is reachable). No torch here: `specd models` and the config read these cheaply.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from specd.decoding.loaded import ModelError, ModelSpec, Role
from specd.models.manifest import BUILTIN_BY_NAME, BUILTIN_BY_ROLE, BuiltinModel

_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


def default_cache_dir() -> Path:
    """$SPECD_CACHE_DIR, else $XDG_CACHE_HOME/specd, else ~/.cache/specd."""
    if os.environ.get("SPECD_CACHE_DIR"):
        return Path(os.environ["SPECD_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "specd"


def parse_spec(text: str, role: Role = "target") -> ModelSpec:
    text = text.strip()
    if text == "builtin":
        return ModelSpec("builtin", BUILTIN_BY_ROLE[role].name, role)
    if text.startswith("builtin:"):
        name = text.removeprefix("builtin:")
        if name not in BUILTIN_BY_NAME:
            raise ModelError(f"unknown built-in model {name!r}; known: {', '.join(BUILTIN_BY_NAME)}")
        return ModelSpec("builtin", name, role)
    path = Path(text).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return ModelSpec("gguf", str(path.resolve()), role)
    if path.is_dir():
        return ModelSpec("folder", str(path.resolve()), role)
    if path.suffix == ".gguf" or text.startswith((".", "/", "~")):
        raise ModelError(f"{role} model {text!r}: no such file or folder")
    if _HUB_ID.match(text):
        return ModelSpec("hub", text, role)
    raise ModelError(f"{role} model {text!r} is not `builtin`, a folder, a .gguf file or a hub id")


def builtin_folder(model: BuiltinModel, cache_dir: Path) -> Path:
    return cache_dir / "models" / model.name


def gguf_folder(gguf: Path, cache_dir: Path) -> Path:
    """Keyed by path, size and modification time: a changed file converts again."""
    stat = gguf.stat()
    key = hashlib.sha256(f"{gguf.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()
    return cache_dir / "models" / f"gguf-{gguf.stem}-{key[:12]}"


def cached_folder(spec: ModelSpec, cache_dir: Path) -> Path | None:
    """The folder specd makes in the cache for `spec`; None for a folder or hub id (not specd's)."""
    if spec.kind == "builtin":
        return builtin_folder(BUILTIN_BY_NAME[spec.ref], cache_dir)
    if spec.kind == "gguf":
        return gguf_folder(Path(spec.ref), cache_dir)
    return None


def cached_hub_folder(ref: str) -> Path | None:
    """The hub id's snapshot in the local Hugging Face cache, without reaching the hub."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(ref, local_files_only=True))
    except Exception:
        return None
