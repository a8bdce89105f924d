"""Cached model folders carry a manifest of their files, so a damaged cache is named, never loaded.

A folder specd made (a converted built-in model or GGUF file) has a marker, `specd-converted.json`,
written last: what it was made from, and every file in the folder with its size, sha256 and
modification time, taken once the files are complete and flushed to disk. Two checks read it:

- at load, quick: every listed file is there with its size (a half-written or truncated file is
  caught), and a file whose modification time changed is hashed again (something wrote to it);
- `specd models pull --repair`, thorough: every byte of every file is hashed.

Either names the first bad file. The check covers whatever the manifest lists, not a fixed set of
names: a file cached into the folder later (quantized weights, say) joins with `join`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import msgspec

from specd.decoding.loaded import ModelError

MARKER = "specd-converted.json"
_BLOCK = 1 << 22


class CacheDamaged(ModelError):
    """A cached model folder does not match its manifest; the message names the file."""

    def __init__(self, folder: Path, name: str, problem: str):
        super().__init__(f"the cached model in {folder} is damaged: {name} {problem}; "
                         "`specd models pull --repair` rebuilds it")
        self.name, self.problem = name, problem


class FileEntry(msgspec.Struct, frozen=True):
    size: int
    sha256: str
    mtime_ns: int


class Marker(msgspec.Struct, frozen=True, kw_only=True):
    source: str                           # what the folder was made from
    seconds: float = 0.0                  # how long making it took
    builtin: str | None = None            # the built-in model's name, its GGUF's sha256 and size
    sha256: str | None = None
    bytes: int | None = None
    files: dict[str, FileEntry] = {}      # path in the folder -> entry; empty: made by an older
                                          # specd, which listed none (loaded unchecked)


def is_converted(folder: Path) -> bool:
    return (folder / MARKER).is_file()


def seal(folder: Path, marker: Marker) -> Marker:
    """Flush every file of `folder` to disk, list them in the marker, and write the marker last."""
    files = {name: _entry(folder / name) for name in _members(folder)}
    sealed = msgspec.structs.replace(marker, files=files)
    _write_marker(folder, sealed)
    return sealed


def join(folder: Path, names: list[str], gone: tuple[str, ...] = ()) -> None:
    """Add files newly cached into `folder` (already complete) to its manifest, and drop `gone`
    ones (removed). A folder whose marker lists no files (made by an older specd) stays
    unchecked: one file would not vouch for it."""
    marker = read_marker(folder)
    if not marker.files:
        return
    files = {**{k: v for k, v in marker.files.items() if k not in gone},
             **{name: _entry(folder / name) for name in names}}
    _write_marker(folder, msgspec.structs.replace(marker, files=files))


def read_marker(folder: Path) -> Marker:
    try:
        return msgspec.json.decode((folder / MARKER).read_bytes(), type=Marker)
    except (OSError, msgspec.DecodeError) as error:
        raise CacheDamaged(folder, MARKER, f"cannot be read ({error})") from None


def check(folder: Path, thorough: bool = False) -> int:
    """Raise CacheDamaged naming the first file that does not match the manifest; else the number
    of files checked (0 for a folder made before manifests)."""
    files = read_marker(folder).files
    for name, entry in files.items():
        path = folder / name
        try:
            st = path.stat()
        except OSError:
            raise CacheDamaged(folder, name, "is missing") from None
        if st.st_size != entry.size:
            raise CacheDamaged(folder, name,
                               f"has {st.st_size:,} bytes, expected {entry.size:,} (half-written or cut short)")
        if (thorough or st.st_mtime_ns != entry.mtime_ns) and _sha256(path) != entry.sha256:
            raise CacheDamaged(folder, name, "does not match its recorded sha256 (corrupted)")
    return len(files)


def _members(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and p.name != MARKER)


def _entry(path: Path) -> FileEntry:
    digest = _sha256(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)                      # on disk before the marker says the folder is whole
    finally:
        os.close(fd)
    st = path.stat()
    return FileEntry(st.st_size, digest, st.st_mtime_ns)


def _write_marker(folder: Path, marker: Marker) -> None:
    temporary = folder / f".{MARKER}.{os.getpid()}"
    with open(temporary, "wb") as f:
        f.write(msgspec.json.format(msgspec.json.encode(marker), indent=1))
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, folder / MARKER)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()
